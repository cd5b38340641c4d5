// FrameWriter's order: frames go out in the order sent, except that a
// SendFirst frame (a ping, a pong) goes ahead of every frame not yet begun,
// so a liveness check never waits behind a backlog the peer has not read.
#include "daemon/backend/remote/frame_io.h"

#include <sys/socket.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hrx/executor/v1/executor.pb.h"
#include "shared/unique_fd.h"

namespace hrx::backend::remote {
namespace {

namespace wire = hrx::executor::v1;

TEST(FrameWriterTest, AFrameSentFirstOvertakesEveryFrameNotYetBegun) {
  int ends[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends), 0);
  shared::UniqueFd writer_end(ends[0]);
  shared::UniqueFd reader_end(ends[1]);
  FrameWriter writer(writer_end.get());
  // Eight 1 MiB loads nobody reads yet: the first fills the socket, the
  // rest wait in the writer.
  constexpr int kLoads = 8;
  for (int i = 0; i < kLoads; ++i) {
    wire::Request load;
    load.set_id(100 + i);
    load.mutable_load_kernel()->set_code(std::string(1 << 20, 'x'));
    writer.Send(load);
  }
  wire::Request ping;
  ping.set_id(7);
  ping.mutable_ping();
  writer.SendFirst(ping);
  // The reader sees the frame that was begun (one load at most), then the
  // ping, then the rest in their order.
  FrameReader reader(reader_end.get());
  std::vector<uint64_t> order;
  std::string bytes;
  for (int i = 0; i < kLoads + 1; ++i) {
    ASSERT_TRUE(reader.Next(&bytes));
    wire::Request request;
    ASSERT_TRUE(request.ParseFromString(bytes));
    order.push_back(request.id());
  }
  const auto ping_at = std::find(order.begin(), order.end(), 7u);
  ASSERT_NE(ping_at, order.end());
  EXPECT_LE(ping_at - order.begin(), 1) << "the ping waited behind loads";
  std::vector<uint64_t> loads;
  for (uint64_t id : order) {
    if (id != 7) loads.push_back(id);
  }
  for (int i = 0; i < kLoads; ++i) EXPECT_EQ(loads[i], 100u + i);
}

}  // namespace
}  // namespace hrx::backend::remote
