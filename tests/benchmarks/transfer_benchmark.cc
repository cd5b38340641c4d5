// Bulk transfer bandwidth through the daemon against a plain memcpy of the
// same size on the same machine, in one run, as ratios; and a sweep that
// compares inline (message) transfers with shared-memory ones by size, which
// is where kDefaultSharedTransferThreshold comes from.
//
//   bazel run -c opt //tests/benchmarks:transfer_benchmark
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "hrx/client.h"
#include "tests/subprocess.h"
#include "tests/test_daemon.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kBulkBytes = uint64_t{256} << 20;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double GBps(uint64_t bytes, double seconds) { return bytes / seconds / 1e9; }

int Fail(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "transfer_benchmark: %s: %s\n", what,
               status.ToString().c_str());
  return 1;
}

// Best of `rounds` (the machine is shared; the best run is the least noisy).
template <typename F>
double Best(int rounds, F run) {
  double best = 1e30;
  for (int i = 0; i < rounds; ++i) {
    const auto start = Clock::now();
    if (!run()) return -1;
    best = std::min(best, Seconds(start));
  }
  return best;
}

}  // namespace

int main() {
  const std::string dir = hrx::testing::MakeShortTempDir();
  const std::string socket_path = dir + "/hrxd.sock";
  hrx::testing::Subprocess daemon = hrx::testing::Subprocess::Start(
      {hrx::testing::RunfilePath("daemon/hrxd"), "--socket=" + socket_path,
       "--backend=cpu", "--log-level=warn"},
      dir);
  if (!hrx::testing::WaitUntilServing(socket_path, &daemon)) {
    std::fprintf(stderr, "transfer_benchmark: hrxd did not start\n");
    return 1;
  }
  auto client = hrx::Client::Connect(socket_path, "transfer_benchmark");
  if (!client.ok()) return Fail("connect", client.status());
  auto stream = (*client)->OpenDevice(0)->CreateStream();
  if (!stream.ok()) return Fail("stream", stream.status());
  auto buffer = stream->Allocate(kBulkBytes);
  if (!buffer.ok()) return Fail("allocate", buffer.status());

  std::vector<uint8_t> source(kBulkBytes), sink(kBulkBytes);
  for (uint64_t i = 0; i < kBulkBytes; i += 4096)
    source[i] = static_cast<uint8_t>(i);
  std::memset(sink.data(), 1, kBulkBytes);  // touch every page first

  const double memcpy_s = Best(3, [&] {
    std::memcpy(sink.data(), source.data(), kBulkBytes);
    return true;
  });
  const hrx::View all = buffer->Binding();
  bool ok = true;
  const double upload_s = Best(3, [&] {
    ok = ok && stream->Upload(all, source).ok() && stream->Synchronize().ok();
    return ok;
  });
  const double read_s = Best(3, [&] {
    ok = ok && stream->ReadBlocking(all, sink).ok();
    return ok;
  });
  stream->SetSharedTransferThreshold(UINT64_MAX);  // messages only
  const double inline_upload_s = Best(2, [&] {
    ok = ok && stream->Upload(all, source).ok() && stream->Synchronize().ok();
    return ok;
  });
  const double inline_read_s = Best(2, [&] {
    ok = ok && stream->ReadBlocking(all, sink).ok();
    return ok;
  });
  if (!ok) return Fail("transfer", absl::InternalError("a transfer failed"));

  std::printf("256 MiB, best of runs:\n");
  std::printf("  memcpy in-process                %6.2f GB/s  baseline\n",
              GBps(kBulkBytes, memcpy_s));
  std::printf("  upload via shared memory         %6.2f GB/s  %.2fx memcpy\n",
              GBps(kBulkBytes, upload_s), memcpy_s / upload_s);
  std::printf("  readback via shared memory       %6.2f GB/s  %.2fx memcpy\n",
              GBps(kBulkBytes, read_s), memcpy_s / read_s);
  std::printf("  upload inline (1 MiB messages)   %6.2f GB/s  %.2fx memcpy\n",
              GBps(kBulkBytes, inline_upload_s), memcpy_s / inline_upload_s);
  std::printf("  readback inline (4 MiB replies)  %6.2f GB/s  %.2fx memcpy\n",
              GBps(kBulkBytes, inline_read_s), memcpy_s / inline_read_s);

  std::printf(
      "\nupload + synchronize, then blocking read, per transfer (us):\n");
  std::printf("  %10s  %12s %12s  %12s %12s\n", "bytes", "inline up",
              "shared up", "inline read", "shared read");
  for (uint64_t size :
       {uint64_t{4} << 10, uint64_t{16} << 10, uint64_t{64} << 10,
        uint64_t{256} << 10, uint64_t{1} << 20, uint64_t{4} << 20}) {
    const hrx::View part = *buffer->Slice(0, size);
    const std::span<const uint8_t> in(source.data(), size);
    const std::span<uint8_t> out(sink.data(), size);
    double results[4];
    for (int shared = 0; shared < 2; ++shared) {
      stream->SetSharedTransferThreshold(shared ? 0 : UINT64_MAX);
      results[shared] = Best(20, [&] {
        return stream->Upload(part, in).ok() && stream->Synchronize().ok();
      });
      results[2 + shared] =
          Best(20, [&] { return stream->ReadBlocking(part, out).ok(); });
    }
    std::printf("  %10lu  %12.1f %12.1f  %12.1f %12.1f\n",
                static_cast<unsigned long>(size), results[0] * 1e6,
                results[1] * 1e6, results[2] * 1e6, results[3] * 1e6);
  }
  return 0;
}
