// What a flood of control calls from one tenant costs another tenant's
// synchronous step (issue: hrxd never stalls because of a tenant; bar: the
// bystander's latency within 2x of idle). One hrxd (CPU backend, executors
// on, as shipped); a bystander tenant (uid 4101) times Fill(1 B) +
// Synchronize on its ring, alone and then while --flooders processes of
// another tenant (uid 4102) each allocate and free a buffer in a loop, as
// fast as hrxd answers. Prints p50 and p99 of both and their ratios. Runs
// as root (the clients switch uids).
//   bazel run -c opt //tests/benchmarks:flood_benchmark --
//       [--rounds=3000] [--flooders=4]
#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "hrx/client.h"
#include "tests/benchmarks/median.h"
#include "tests/subprocess.h"

namespace {

using hrx::bench::FlagValue;

constexpr uid_t kBystander = 4101;
constexpr uid_t kFlooder = 4102;

struct Percentiles {
  double p50 = 0;
  double p99 = 0;
};

// In a child as `uid` (no supplementary groups): runs `body`; the child's
// exit status says whether it worked. -1 if no child could be made.
template <typename Body>
pid_t StartClient(uid_t uid, Body body) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  if (setgroups(0, nullptr) != 0 || setgid(uid) != 0 || setuid(uid) != 0) {
    _exit(3);
  }
  _exit(body() ? 0 : 1);
}

// The bystander: `rounds` timed Fill + Synchronize (after a tenth more to
// warm up), written as two doubles to `out`.
bool Failed(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "flood_benchmark: %s: %s\n", what,
               status.ToString().c_str());
  return false;
}

bool MeasureBystander(const std::string& socket, int rounds, int out) {
  auto client = hrx::Client::Connect(socket, "bystander");
  if (!client.ok()) return Failed("connect", client.status());
  auto device = (*client)->OpenDevice(0);
  if (!device.ok()) return Failed("open device", device.status());
  auto stream = device->CreateStream();
  if (!stream.ok()) return Failed("stream", stream.status());
  auto buffer = stream->Allocate(64);
  if (!buffer.ok()) return Failed("allocate", buffer.status());
  const hrx::View view = buffer->Binding();
  std::vector<double> micros;
  for (int i = 0; i < rounds + rounds / 10; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (absl::Status filled = stream->Fill(view, static_cast<uint8_t>(i));
        !filled.ok()) {
      return Failed("fill", filled);
    }
    if (absl::Status synced = stream->Synchronize(); !synced.ok()) {
      return Failed("sync", synced);
    }
    const double took = std::chrono::duration<double, std::micro>(
                            std::chrono::steady_clock::now() - start)
                            .count();
    if (i >= rounds / 10) micros.push_back(took);
  }
  std::sort(micros.begin(), micros.end());
  Percentiles result{micros[micros.size() / 2],
                     micros[micros.size() * 99 / 100]};
  return write(out, &result, sizeof(result)) == sizeof(result);
}

// A flooder: allocates and frees a small buffer until it is killed.
bool Flood(const std::string& socket) {
  auto client = hrx::Client::Connect(socket, "flooder");
  if (!client.ok()) return Failed("flooder connect", client.status());
  auto device = (*client)->OpenDevice(0);
  if (!device.ok()) return Failed("flooder open device", device.status());
  auto stream = device->CreateStream();
  if (!stream.ok()) return Failed("flooder stream", stream.status());
  while (true) (void)stream->Allocate(64);  // freed as it goes
}

bool Bystander(const std::string& socket, int rounds, Percentiles* result) {
  int ends[2];
  if (pipe(ends) != 0) return false;
  const pid_t child = StartClient(kBystander, [&] {
    close(ends[0]);
    return MeasureBystander(socket, rounds, ends[1]);
  });
  close(ends[1]);
  if (child < 0) {
    close(ends[0]);
    return false;
  }
  const bool read_all = read(ends[0], result, sizeof(*result)) ==
                        static_cast<ssize_t>(sizeof(*result));
  close(ends[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return read_all && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (geteuid() != 0) {
    std::fprintf(stderr,
                 "flood_benchmark: run as root (clients switch uids)\n");
    return 1;
  }
  const int rounds =
      std::max(100, static_cast<int>(FlagValue(argc, argv, "rounds", 3000)));
  const int flooders = static_cast<int>(FlagValue(argc, argv, "flooders", 4));
  const std::string dir = hrx::testing::MakeShortTempDir();
  chmod(dir.c_str(), 0755);  // the clients' uids reach the socket
  const std::string socket = dir + "/hrxd.sock";
  std::ofstream(dir + "/hrxd.conf")
      << "tenants { name: \"bystander\" uids: " << kBystander << " }\n"
      << "tenants { name: \"flooder\" uids: " << kFlooder << " }\n";
  hrx::testing::Subprocess daemon = hrx::testing::Subprocess::Start(
      {hrx::testing::RunfilePath("daemon/hrxd"), "--socket=" + socket,
       "--backend=cpu", "--config=" + dir + "/hrxd.conf", "--socket_mode=0666",
       "--log-level=warn"},
      dir);
  // No gRPC in this process before it forks its clients: hrxd is up once
  // its socket exists (each client's connect waits for it to answer).
  struct stat socket_stat;
  for (int i = 0; i < 200 && stat(socket.c_str(), &socket_stat) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (stat(socket.c_str(), &socket_stat) != 0) {
    std::fprintf(stderr, "flood_benchmark: hrxd did not start: %s\n",
                 daemon.Stderr().c_str());
    return 1;
  }
  Percentiles idle, flooded;
  if (!Bystander(socket, rounds, &idle)) {
    std::fprintf(stderr, "flood_benchmark: the idle bystander failed\n");
    return 1;
  }
  std::vector<pid_t> flood;
  for (int i = 0; i < flooders; ++i) {
    const pid_t pid = StartClient(kFlooder, [&] { return Flood(socket); });
    if (pid > 0) flood.push_back(pid);  // never -1: kill(-1) is everyone
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));  // the flood is on
  const bool measured = Bystander(socket, rounds, &flooded);
  for (pid_t pid : flood) kill(pid, SIGKILL);
  for (pid_t pid : flood) waitpid(pid, nullptr, 0);
  daemon.Signal(SIGTERM);
  daemon.Wait();
  if (!measured) {
    std::fprintf(stderr, "flood_benchmark: the flooded bystander failed\n");
    return 1;
  }
  std::printf(
      "flood_benchmark (CPU backend, executors; bystander Fill + Synchronize "
      "on its ring, %d rounds; %d flooders allocating and freeing)\n",
      rounds, flooders);
  std::printf("%-10s %10s %10s\n", "", "p50 us", "p99 us");
  std::printf("%-10s %10.2f %10.2f\n", "idle", idle.p50, idle.p99);
  std::printf("%-10s %10.2f %10.2f\n", "flooded", flooded.p50, flooded.p99);
  std::printf("%-10s %9.2fx %9.2fx  (bar: 2x)\n", "ratio",
              flooded.p50 / idle.p50, flooded.p99 / idle.p99);
  return 0;
}
