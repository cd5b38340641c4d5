// Per-command cost of small fills through the daemon against the same fills
// on the CPU backend in-process, measured in one run (the machines are
// shared and noisy, so only the ratio is meaningful).
//
//   bazel run -c opt //tests/benchmarks:fill_benchmark [-- --fills=100000]
//
// Three paths, each enqueuing N fills of 64 bytes then waiting for them:
//   in-process  CpuBackend queue, EnqueueFill x N, Wait
//   daemon      libhrx Stream::Fill x N (batched on Streams.Open), Synchronize
//   unary       one Streams.Submit RPC per fill (the unbatched path), fewer N
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/backend/cpu/cpu_backend.h"
#include "daemon/mutex_checks.h"
#include "hrx/client.h"
#include "tests/raw_session.h"
#include "tests/subprocess.h"
#include "tests/test_daemon.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kFillBytes = 64;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

uint64_t FlagValue(int argc, char** argv, const std::string& name,
                   uint64_t fallback) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    uint64_t value = 0;
    const std::string arg = argv[i];
    if (arg.rfind(prefix, 0) == 0 &&
        absl::SimpleAtoi(arg.substr(prefix.size()), &value)) {
      return value;
    }
  }
  return fallback;
}

int Fail(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "fill_benchmark: %s: %s\n", what.c_str(),
               status.ToString().c_str());
  return 1;
}

double InProcess(uint64_t fills) {
  hrx::backend::CpuBackend backend({.memory_bytes = 1 << 20});
  auto queue = *backend.CreateQueue();
  auto memory =
      *backend.Allocate(4096, hrx::backend::MemoryKind::kDevice, true);
  const auto start = Clock::now();
  hrx::backend::Fence last = 0;
  for (uint64_t i = 0; i < fills; ++i) {
    last = *queue->EnqueueFill(memory, (i % 64) * kFillBytes, kFillBytes,
                               static_cast<uint8_t>(i));
  }
  (void)queue->Wait(last);
  return Seconds(start) / fills;
}

struct DaemonFigures {
  double batched = 0;     // per fill, batched on Streams.Open
  double unary = 0;       // per fill, one Streams.Submit each
  double round_trip = 0;  // a 1-byte fill and its Synchronize
};

// Starts hrxd with `flags` and measures its three paths.
absl::StatusOr<DaemonFigures> MeasureDaemon(
    const std::vector<std::string>& flags, uint64_t fills,
    uint64_t unary_fills) {
  const std::string dir = hrx::testing::MakeShortTempDir();
  const std::string socket_path = dir + "/hrxd.sock";
  const char* daemon_path = std::getenv("HRXD_BINARY");
  std::vector<std::string> argv = {
      daemon_path != nullptr ? daemon_path
                             : hrx::testing::RunfilePath("daemon/hrxd"),
      "--socket=" + socket_path, "--backend=cpu", "--log-level=warn"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  hrx::testing::Subprocess daemon = hrx::testing::Subprocess::Start(argv, dir);
  if (!hrx::testing::WaitUntilServing(socket_path, &daemon)) {
    return absl::UnavailableError("hrxd did not start: " + daemon.Stderr());
  }
  DaemonFigures figures;
  auto client = hrx::Client::Connect(socket_path, "fill_benchmark");
  if (!client.ok()) return client.status();
  auto stream = (*client)->OpenDevice(0)->CreateStream();
  if (!stream.ok()) return stream.status();
  auto buffer = stream->Allocate(4096);
  if (!buffer.ok()) return buffer.status();
  std::vector<hrx::View> views;
  for (uint64_t i = 0; i < 64; ++i)
    views.push_back(*buffer->Slice(i * kFillBytes, kFillBytes));
  for (int i = 0; i < 1000; ++i) (void)stream->Fill(views[i % 64], 1);
  if (absl::Status s = stream->Synchronize(); !s.ok()) return s;

  auto start = Clock::now();
  for (uint64_t i = 0; i < fills; ++i) {
    if (absl::Status s = stream->Fill(views[i % 64], static_cast<uint8_t>(i));
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = stream->Synchronize(); !s.ok()) return s;
  figures.batched = Seconds(start) / fills;

  const hrx::View one = *buffer->Slice(0, 1);
  constexpr int kRoundTrips = 2000;
  start = Clock::now();
  for (int i = 0; i < kRoundTrips; ++i) {
    if (absl::Status s = stream->Fill(one, static_cast<uint8_t>(i)); !s.ok()) {
      return s;
    }
    if (absl::Status s = stream->Synchronize(); !s.ok()) return s;
  }
  figures.round_trip = Seconds(start) / kRoundTrips;

  hrx::testing::RawSession raw(socket_path);
  const hrx::v1::Handle raw_stream = *raw.CreateStream();
  const hrx::v1::Handle raw_buffer = *raw.Allocate(4096);
  start = Clock::now();
  for (uint64_t i = 0; i < unary_fills; ++i) {
    if (absl::Status s = raw.Submit(hrx::testing::FillRequest(
            raw_stream, raw_buffer, (i % 64) * kFillBytes, kFillBytes, 1));
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = raw.Synchronize(raw_stream); !s.ok()) return s;
  figures.unary = Seconds(start) / unary_fills;
  return figures;
}

}  // namespace

int main(int argc, char** argv) {
  // The in-process baseline runs as hrxd does (daemon/mutex_checks.h).
  hrx::daemon::ConfigureMutexChecks();
  const uint64_t fills = FlagValue(argc, argv, "fills", 100000);
  const uint64_t unary_fills = FlagValue(argc, argv, "unary_fills", 2000);

  // Warm the in-process path once so that thread start-up is not timed.
  (void)InProcess(1000);
  const double in_process = InProcess(fills);
  // The same work with the tenant's queues in an executor process (the
  // default), then inside hrxd (--executors=false): the isolation's cost.
  auto isolated = MeasureDaemon({}, fills, unary_fills);
  if (!isolated.ok()) return Fail("daemon with executors", isolated.status());
  auto shared = MeasureDaemon({"--executors=false"}, fills, unary_fills);
  if (!shared.ok()) return Fail("daemon without executors", shared.status());

  std::printf("fills of %lu bytes, per command:\n",
              static_cast<unsigned long>(kFillBytes));
  std::printf("  in-process cpu backend      %8.3f us  (%lu fills)  baseline\n",
              in_process * 1e6, static_cast<unsigned long>(fills));
  const struct {
    const char* name;
    const DaemonFigures& figures;
  } rows[] = {{"executors", *isolated}, {"in hrxd  ", *shared}};
  for (const auto& row : rows) {
    std::printf(
        "  daemon (%s), batched   %8.3f us  (%lu fills)  %.2fx baseline\n",
        row.name, row.figures.batched * 1e6, static_cast<unsigned long>(fills),
        row.figures.batched / in_process);
    std::printf(
        "  daemon (%s), one RPC   %8.3f us  (%lu fills)  %.2fx baseline\n",
        row.name, row.figures.unary * 1e6,
        static_cast<unsigned long>(unary_fills),
        row.figures.unary / in_process);
    std::printf("  daemon (%s), fill+sync %8.3f us\n", row.name,
                row.figures.round_trip * 1e6);
  }
  std::printf(
      "isolation cost (executors / in hrxd): batched %.2fx, one RPC %.2fx, "
      "fill+sync %.2fx\n",
      isolated->batched / shared->batched, isolated->unary / shared->unary,
      isolated->round_trip / shared->round_trip);
  return 0;
}
