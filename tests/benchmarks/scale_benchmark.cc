// The daemon's memory on a fresh hrxd (idle RSS; RSS and descriptors per
// idle session and per 1000 live buffers), then the aggregate throughput of
// 1, 2, 4 and 8 client processes. Ratios are to the single client of the same
// run.
//
//   bazel run -c opt //tests/benchmarks:scale_benchmark --
//       [--fills=20000] [--json=/path/scale.json]
//
// Each client process (this binary with --worker) opens its own session
// and stream and enqueues `fills` 64-byte fills, then synchronises; the
// aggregate is all their fills over the wall time from the first start to
// the last exit.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hrx/client.h"
#include "tests/benchmarks/median.h"
#include "tests/subprocess.h"
#include "tests/test_daemon.h"

namespace {

using hrx::bench::FlagText;
using hrx::bench::FlagValue;
using Clock = std::chrono::steady_clock;

int Worker(const std::string& socket_path, uint64_t fills) {
  auto client = hrx::Client::Connect(socket_path, "scale_worker");
  if (!client.ok()) return 2;
  auto stream = (*client)->OpenDevice(0)->CreateStream();
  if (!stream.ok()) return 3;
  auto buffer = stream->Allocate(4096);
  if (!buffer.ok()) return 4;
  std::vector<hrx::View> views;
  for (uint64_t i = 0; i < 64; ++i) views.push_back(*buffer->Slice(i * 64, 64));
  for (uint64_t i = 0; i < fills; ++i) {
    if (!stream->Fill(views[i % 64], static_cast<uint8_t>(i)).ok()) return 5;
  }
  return stream->Synchronize().ok() ? 0 : 6;
}

// Kilobytes of resident memory of `pid`.
uint64_t RssKiB(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    uint64_t kib = 0;
    if (line.rfind("VmRSS:", 0) == 0 &&
        absl::SimpleAtoi(
            absl::StripAsciiWhitespace(line.substr(6, line.size() - 6 - 3)),
            &kib)) {
      return kib;
    }
  }
  return 0;
}

uint64_t OpenFiles(pid_t pid) {
  uint64_t count = 0;
  DIR* dir = opendir(absl::StrCat("/proc/", pid, "/fd").c_str());
  if (dir == nullptr) return 0;
  while (readdir(dir) != nullptr) ++count;
  closedir(dir);
  return count - 2;  // . and ..
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t fills = FlagValue(argc, argv, "fills", 20000);
  const std::string json_path = FlagText(argc, argv, "json", "");
  if (FlagText(argc, argv, "worker", "") != "") {
    return Worker(FlagText(argc, argv, "worker", ""), fills);
  }
  const std::string dir = hrx::testing::MakeShortTempDir();
  const std::string socket_path = dir + "/hrxd.sock";
  const char* daemon_path = std::getenv("HRXD_BINARY");
  hrx::testing::Subprocess daemon = hrx::testing::Subprocess::Start(
      {daemon_path != nullptr ? daemon_path
                              : hrx::testing::RunfilePath("daemon/hrxd"),
       "--socket=" + socket_path, "--backend=cpu", "--log-level=warn"},
      dir);
  if (!hrx::testing::WaitUntilServing(socket_path, &daemon)) {
    std::fprintf(stderr, "scale_benchmark: hrxd did not start: %s\n",
                 daemon.Stderr().c_str());
    return 1;
  }
  const std::string self = "/proc/self/exe";
  char resolved[4096] = {};
  const ssize_t length = readlink(self.c_str(), resolved, sizeof(resolved) - 1);
  const std::string binary(resolved, length > 0 ? length : 0);

  // --- Daemon memory, first, on the fresh daemon -----------------------------
  const pid_t pid = daemon.pid();
  const uint64_t idle_rss = RssKiB(pid);
  const uint64_t idle_fds = OpenFiles(pid);
  constexpr int kSessions = 50;
  std::vector<std::unique_ptr<hrx::Client>> sessions;
  for (int i = 0; i < kSessions; ++i) {
    auto client = hrx::Client::Connect(socket_path, "idle");
    if (!client.ok()) return 1;
    sessions.push_back(*std::move(client));
  }
  usleep(200000);
  const uint64_t sessions_rss = RssKiB(pid);
  const uint64_t sessions_fds = OpenFiles(pid);
  sessions.clear();
  auto client = hrx::Client::Connect(socket_path, "handles");
  auto stream = (*client)->OpenDevice(0)->CreateStream();
  if (!stream.ok()) return 1;
  const uint64_t before_handles = RssKiB(pid);
  const uint64_t before_handle_fds = OpenFiles(pid);
  constexpr int kHandles = 1000;
  std::vector<hrx::Buffer> buffers;
  for (int i = 0; i < kHandles; ++i) {
    auto buffer = stream->Allocate(64);
    if (!buffer.ok()) {
      std::fprintf(stderr, "scale_benchmark: buffer %d: %s\n", i,
                   buffer.status().ToString().c_str());
      return 1;
    }
    buffers.push_back(*std::move(buffer));
  }
  const uint64_t handles_rss = RssKiB(pid);
  const uint64_t handles_fds = OpenFiles(pid);
  buffers.clear();
  client->reset();
  usleep(200000);
  // --- Aggregate throughput -------------------------------------------------
  const std::vector<int> counts = {1, 2, 4, 8};
  std::vector<double> per_second;
  for (int count : counts) {
    const auto start = Clock::now();
    std::vector<std::unique_ptr<hrx::testing::Subprocess>> workers;
    for (int i = 0; i < count; ++i) {
      workers.push_back(std::make_unique<hrx::testing::Subprocess>(
          hrx::testing::Subprocess::Start({binary, "--worker=" + socket_path,
                                           absl::StrCat("--fills=", fills)},
                                          dir)));
    }
    for (auto& worker : workers) {
      if (worker->Wait() != 0) {
        std::fprintf(stderr, "scale_benchmark: a worker failed: %s\n",
                     worker->Stderr().c_str());
        return 1;
      }
    }
    const double seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    per_second.push_back(count * fills / seconds);
  }

  daemon.Signal(SIGTERM);
  daemon.Wait();

  std::printf("scale_benchmark (CPU backend, %lu fills of 64 B per client)\n",
              static_cast<unsigned long>(fills));
  std::printf("%-10s %14s %10s\n", "clients", "fills/s", "vs 1");
  for (size_t i = 0; i < counts.size(); ++i) {
    std::printf("%-10d %14.0f %10.2f\n", counts[i], per_second[i],
                per_second[i] / per_second[0]);
  }
  const double per_session_kib =
      (static_cast<double>(sessions_rss) - idle_rss) / kSessions;
  const double per_thousand_kib =
      static_cast<double>(handles_rss) - before_handles;
  std::printf("hrxd idle RSS              %8lu KiB, %lu descriptors\n",
              static_cast<unsigned long>(idle_rss),
              static_cast<unsigned long>(idle_fds));
  std::printf("per idle session           %8.1f KiB, %.2f descriptors\n",
              per_session_kib,
              (static_cast<double>(sessions_fds) - idle_fds) / kSessions);
  std::printf(
      "per 1000 live 64 B buffers %8.1f KiB, %ld descriptors\n",
      per_thousand_kib,
      static_cast<long>(handles_fds) - static_cast<long>(before_handle_fds));
  if (!json_path.empty()) {
    std::ofstream json(json_path);
    json << "{\n  \"fills_per_client\": " << fills << ",\n  \"aggregate\": [";
    for (size_t i = 0; i < counts.size(); ++i) {
      json << absl::StrFormat(
          "%s{\"clients\": %d, \"fills_per_second\": %.0f, \"ratio\": %.3f}",
          i == 0 ? "" : ", ", counts[i], per_second[i],
          per_second[i] / per_second[0]);
    }
    json << absl::StrFormat(
        "],\n  \"idle_rss_kib\": %u,\n  \"per_idle_session_kib\": %.1f,\n"
        "  \"per_1000_buffers_kib\": %.1f,\n  \"per_1000_buffers_fds\": "
        "%d\n}\n",
        idle_rss, per_session_kib, per_thousand_kib,
        static_cast<int>(handles_fds) - static_cast<int>(before_handle_fds));
  }
  return 0;
}
