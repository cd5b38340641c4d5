// hello: connect to hrxd, allocate device memory, fill it, read it back.
//
// Run against `make run`'s daemon (in another terminal):
//   bazel run //examples:hello
// or, built outside Bazel against an installed libhrx (docs/building.md):
//   g++ examples/hello.cc -Iexamples $(pkg-config --cflags --libs hrx) -o hello
//   ./hello
// The daemon is found at $HRXD_SOCKET, else the per-user default socket.
#include <cstdint>
#include <cstdio>
#include <vector>

#include "example_util.h"
#include "hrx/client.h"

using hrx_examples::Check;

int main() {
  // A session with the daemon. Every call returns absl::Status(Or); a
  // refusal carries the daemon's code and a reason token.
  auto client = Check(hrx::Client::Connect(), "connect");
  auto device = Check(client->OpenDevice(0), "open device 0");
  std::printf("device: %s (%s), %llu bytes of memory\n",
              device.info().name.c_str(), device.info().backend.c_str(),
              static_cast<unsigned long long>(device.info().memory_bytes));

  // A stream is an ordered timeline of work on the daemon's queue pool.
  auto stream = Check(device.CreateStream(), "create stream");
  constexpr uint64_t kBytes = 1 << 20;
  auto buffer = Check(stream.AllocateZeroed(kBytes), "allocate");

  // Enqueued commands are batched and sent with the next synchronisation:
  // here, the blocking read.
  Check(stream.Fill(buffer.Binding(), 0xab), "fill");
  auto tail = Check(buffer.Slice(kBytes - 16, 16), "slice");
  Check(stream.Fill(tail, 0x01), "fill tail");

  std::vector<uint8_t> bytes(kBytes);
  Check(stream.ReadBlocking(buffer.Binding(), bytes), "read");
  std::printf("first byte 0x%02x, last byte 0x%02x\n", bytes.front(),
              bytes.back());
  const bool ok = bytes.front() == 0xab && bytes[kBytes - 17] == 0xab &&
                  bytes[kBytes - 16] == 0x01 && bytes.back() == 0x01;
  std::printf("hello: %s\n", ok ? "ok" : "WRONG BYTES");
  return ok ? 0 : 1;
}
