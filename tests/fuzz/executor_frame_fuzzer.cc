// Fuzzes what hrxd reads from an executor, a process it does not trust (it
// runs tenants' kernels): the frame stream on the executor's socket and the
// events in it. Input: the bytes the executor writes. The frames go through
// FrameReader over a real socket pair, and each through the event parser.
// Checks: nothing crashes or reads past a frame; every frame the reader
// returns is within kMaxFrameBytes.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <thread>

#include "daemon/backend/remote/frame_io.h"
#include "hrx/executor/v1/executor.pb.h"
#include "shared/unique_fd.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int ends[2];
  HRX_FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) == 0);
  hrx::shared::UniqueFd daemon_end(ends[0]);
  hrx::shared::UniqueFd executor_end(ends[1]);
  // The executor writes everything and hangs up, as a dying one would.
  std::thread executor([&] {
    size_t sent = 0;
    while (sent < size) {
      const ssize_t n =
          send(executor_end.get(), data + sent, size - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    executor_end.Reset();
  });
  hrx::backend::remote::FrameReader reader(daemon_end.get());
  std::string frame;
  hrx::executor::v1::Event event;
  while (reader.Next(&frame)) {
    HRX_FUZZ_CHECK(frame.size() <= hrx::backend::remote::kMaxFrameBytes);
    if (!event.ParseFromString(frame)) break;  // the link breaks here too
  }
  daemon_end.Reset();  // unblocks a writer stuck on a full socket
  executor.join();
  return 0;
}
