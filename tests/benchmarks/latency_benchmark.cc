// Synchronous round trips through hrxd over each stream transport, against
// two baselines measured in the same run: a raw Unix-socket ping-pong
// between two processes (the IPC floor) and the CPU backend driven
// in-process (the engine itself). Also batched small fills per command.
//
//   bazel run -c opt //tests/benchmarks:latency_benchmark --
//       [--rounds=3000] [--fills=50000] [--json=/path/figures.json]
//
// Prints one table (p50 of `rounds` each; ratios to the baselines) and,
// with --json, the same figures as JSON.
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "daemon/backend/cpu/cpu_backend.h"
#include "daemon/mutex_checks.h"
#include "hrx/client.h"
#include "tests/benchmarks/median.h"
#include "tests/subprocess.h"
#include "tests/test_daemon.h"

namespace {

using hrx::bench::FlagText;
using hrx::bench::FlagValue;
using Clock = std::chrono::steady_clock;
using hrx::bench::MedianMicros;

// One byte there and back between two processes over a socket pair.
double PingPongMicros(int rounds) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) return 0;
  const pid_t child = fork();
  if (child == 0) {
    close(pair[0]);
    char byte = 0;
    while (read(pair[1], &byte, 1) == 1) {
      if (write(pair[1], &byte, 1) != 1) break;
    }
    _exit(0);
  }
  close(pair[1]);
  absl::StatusOr<double> median = MedianMicros(rounds, [&] {
    char byte = 1;
    if (write(pair[0], &byte, 1) != 1 || read(pair[0], &byte, 1) != 1) {
      return absl::InternalError("ping-pong");
    }
    return absl::OkStatus();
  });
  close(pair[0]);
  waitpid(child, nullptr, 0);
  return median.ok() ? *median : 0;
}

struct InProcess {
  double fill_sync = 0;  // a 1-byte fill and its wait, µs
  double batched = 0;    // per 64-byte fill, µs
};

InProcess MeasureInProcess(int rounds, uint64_t fills) {
  hrx::backend::CpuBackend backend({.memory_bytes = 1 << 20});
  auto queue = *backend.CreateQueue();
  auto memory =
      *backend.Allocate(4096, hrx::backend::MemoryKind::kDevice, true);
  InProcess figures;
  figures.fill_sync = *MedianMicros(rounds, [&] {
    auto fence = queue->EnqueueFill(memory, 0, 1, 1);
    if (!fence.ok()) return fence.status();
    return queue->Wait(*fence);
  });
  const auto start = Clock::now();
  hrx::backend::Fence last = 0;
  for (uint64_t i = 0; i < fills; ++i) {
    last =
        *queue->EnqueueFill(memory, (i % 64) * 64, 64, static_cast<uint8_t>(i));
  }
  (void)queue->Wait(last);
  figures.batched =
      std::chrono::duration<double, std::micro>(Clock::now() - start).count() /
      fills;
  return figures;
}

struct DaemonFigures {
  double fill_sync = 0;  // Fill(1 B) + Synchronize, µs
  double read8 = 0;      // ReadBlocking of 8 bytes, µs
  double poll = 0;       // IsIdle, µs
  double batched = 0;    // per 64-byte fill, µs
};

absl::StatusOr<DaemonFigures> MeasureDaemon(const std::string& socket_path,
                                            hrx::Transport transport,
                                            int rounds, uint64_t fills) {
  hrx::ConnectOptions options;
  options.socket_path = socket_path;
  options.client_name = "latency_benchmark";
  options.transport = transport;
  auto client = hrx::Client::Connect(options);
  if (!client.ok()) return client.status();
  auto device = (*client)->OpenDevice(0);
  if (!device.ok()) return device.status();
  auto stream = device->CreateStream();
  if (!stream.ok()) return stream.status();
  auto buffer = stream->Allocate(4096);
  if (!buffer.ok()) return buffer.status();
  const hrx::View one = *buffer->Slice(0, 1);
  const hrx::View eight = *buffer->Slice(0, 8);
  DaemonFigures figures;
  auto fill_sync = MedianMicros(rounds, [&] {
    if (absl::Status s = stream->Fill(one, 1); !s.ok()) return s;
    return stream->Synchronize();
  });
  if (!fill_sync.ok()) return fill_sync.status();
  figures.fill_sync = *fill_sync;
  uint8_t bytes[8];
  auto read8 = MedianMicros(rounds, [&] {
    return stream->ReadBlocking(eight, std::span<uint8_t>(bytes, 8));
  });
  if (!read8.ok()) return read8.status();
  figures.read8 = *read8;
  auto poll = MedianMicros(rounds, [&] { return stream->IsIdle().status(); });
  if (!poll.ok()) return poll.status();
  figures.poll = *poll;
  std::vector<hrx::View> views;
  for (uint64_t i = 0; i < 64; ++i) views.push_back(*buffer->Slice(i * 64, 64));
  const auto start = Clock::now();
  for (uint64_t i = 0; i < fills; ++i) {
    if (absl::Status s = stream->Fill(views[i % 64], static_cast<uint8_t>(i));
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = stream->Synchronize(); !s.ok()) return s;
  figures.batched =
      std::chrono::duration<double, std::micro>(Clock::now() - start).count() /
      fills;
  return figures;
}

}  // namespace

int main(int argc, char** argv) {
  // The in-process baseline runs as hrxd does (daemon/mutex_checks.h).
  hrx::daemon::ConfigureMutexChecks();
  const int rounds = static_cast<int>(FlagValue(argc, argv, "rounds", 3000));
  const uint64_t fills = FlagValue(argc, argv, "fills", 50000);
  const std::string json_path = FlagText(argc, argv, "json", "");

  const double ping_pong = PingPongMicros(rounds);
  const InProcess in_process = MeasureInProcess(rounds, fills);

  // A daemon with `flag` (none if empty) for `measure`.
  auto with_daemon = [&](const std::string& flag, auto measure) -> bool {
    const std::string dir = hrx::testing::MakeShortTempDir();
    const std::string socket_path = dir + "/hrxd.sock";
    const char* daemon_path = std::getenv("HRXD_BINARY");
    std::vector<std::string> daemon_argv = {
        daemon_path != nullptr ? daemon_path
                               : hrx::testing::RunfilePath("daemon/hrxd"),
        "--socket=" + socket_path, "--backend=cpu", "--log-level=warn"};
    if (!flag.empty()) daemon_argv.push_back(flag);
    hrx::testing::Subprocess daemon =
        hrx::testing::Subprocess::Start(daemon_argv, dir);
    if (!hrx::testing::WaitUntilServing(socket_path, &daemon)) {
      std::fprintf(stderr, "latency_benchmark: hrxd did not start: %s\n",
                   daemon.Stderr().c_str());
      return false;
    }
    measure(socket_path);
    daemon.Signal(SIGTERM);
    daemon.Wait();
    return true;
  };
  absl::StatusOr<DaemonFigures> ring = absl::UnknownError("not run");
  absl::StatusOr<DaemonFigures> grpc = ring;
  absl::StatusOr<DaemonFigures> unisolated = ring;
  const std::string extra = FlagText(argc, argv, "daemon_flags", "");
  if (!with_daemon(extra, [&](const std::string& socket_path) {
        ring = MeasureDaemon(socket_path, hrx::Transport::kRing, rounds, fills);
        grpc = MeasureDaemon(socket_path, hrx::Transport::kGrpc, rounds, fills);
      })) {
    return 1;
  }
  // The baseline of what executors cost: the same daemon with its tenants'
  // work inside it.
  if (!with_daemon("--executors=false", [&](const std::string& socket_path) {
        unisolated =
            MeasureDaemon(socket_path, hrx::Transport::kRing, rounds, fills);
      })) {
    return 1;
  }
  if (!ring.ok() || !grpc.ok() || !unisolated.ok()) {
    std::fprintf(stderr, "latency_benchmark: %s %s %s\n",
                 ring.status().ToString().c_str(),
                 grpc.status().ToString().c_str(),
                 unisolated.status().ToString().c_str());
    return 1;
  }

  struct Row {
    std::string name;
    double ring, grpc, baseline;
    std::string baseline_name;
  };
  const std::vector<Row> rows = {
      {"fill_sync_vs_ping_pong", ring->fill_sync, grpc->fill_sync, ping_pong,
       "ping-pong"},
      {"fill_sync_vs_in_process", ring->fill_sync, grpc->fill_sync,
       in_process.fill_sync, "in-process"},
      {"read8_vs_ping_pong", ring->read8, grpc->read8, ping_pong, "ping-pong"},
      {"poll_vs_ping_pong", ring->poll, grpc->poll, ping_pong, "ping-pong"},
      {"batched_fill_vs_in_process", ring->batched, grpc->batched,
       in_process.batched, "in-process"},
      {"fill_sync_vs_no_executors", ring->fill_sync, grpc->fill_sync,
       unisolated->fill_sync, "ring, --executors=false"},
      {"batched_fill_vs_no_executors", ring->batched, grpc->batched,
       unisolated->batched, "ring, --executors=false"},
  };
  std::printf(
      "latency_benchmark (CPU backend, p50 of %d; batched: %lu fills)\n",
      rounds, static_cast<unsigned long>(fills));
  std::printf("%-28s %10s %10s %12s %10s %10s\n", "figure", "ring us",
              "grpc us", "baseline us", "ring x", "grpc x");
  for (const Row& row : rows) {
    std::printf("%-28s %10.2f %10.2f %12.2f %10.2f %10.2f  (%s)\n",
                row.name.c_str(), row.ring, row.grpc, row.baseline,
                row.ring / row.baseline, row.grpc / row.baseline,
                row.baseline_name.c_str());
  }
  if (!json_path.empty()) {
    std::ofstream json(json_path);
    json << "{\n  \"rounds\": " << rounds << ",\n  \"fills\": " << fills
         << ",\n  \"figures\": [\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& row = rows[i];
      json << absl::StrFormat(
          "    {\"name\": \"%s\", \"ring_us\": %.3f, \"grpc_us\": %.3f, "
          "\"baseline\": \"%s\", \"baseline_us\": %.3f, \"ring_ratio\": %.3f, "
          "\"grpc_ratio\": %.3f}%s\n",
          row.name, row.ring, row.grpc, row.baseline_name, row.baseline,
          row.ring / row.baseline, row.grpc / row.baseline,
          i + 1 < rows.size() ? "," : "");
    }
    json << "  ]\n}\n";
  }
  return 0;
}
