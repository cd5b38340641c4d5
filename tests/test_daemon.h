// Test helper: a real hrxd process on a temporary Unix socket.
#ifndef HRX_TESTS_TEST_DAEMON_H_
#define HRX_TESTS_TEST_DAEMON_H_

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "hrx/v1/status.pb.h"
#include "tests/subprocess.h"

namespace hrx::testing {

// The backend integration tests run on: $HRX_TEST_BACKEND, default "cpu".
std::string TestBackend();

// The hrxd binary under test: the runfile $HRX_TEST_DAEMON names (a build
// variant such as daemon/hrxd_hip_nvidia), default daemon/hrxd.
std::string DaemonPath();

class TestDaemon {
 public:
  // Starts //daemon:hrxd on `dir`/hrxd.sock (a fresh short temp directory
  // when `dir` is empty) and waits until it answers a status call.
  // With `wrapper`, the daemon runs as its last argument (e.g. under
  // unshare); process() is then the wrapper.
  static absl::StatusOr<std::unique_ptr<TestDaemon>> Start(
      const std::vector<std::string>& extra_flags = {},
      const std::string& dir = "",
      const std::vector<std::string>& wrapper = {});
  ~TestDaemon();  // SIGKILLs a daemon still running, removes the directory

  const std::string& socket_path() const { return socket_path_; }
  const std::string& dir() const { return dir_; }
  Subprocess& process() { return *process_; }

  // SIGTERM, then the exit code.
  int Stop();

 private:
  TestDaemon(std::string dir, std::string socket_path,
             std::unique_ptr<Subprocess> process, bool owns_dir)
      : dir_(std::move(dir)),
        socket_path_(std::move(socket_path)),
        process_(std::move(process)),
        owns_dir_(owns_dir) {}

  std::string dir_;
  std::string socket_path_;
  std::unique_ptr<Subprocess> process_;
  bool owns_dir_;
};

// The daemon's status (an empty reply, and a test failure, when it fails).
hrx::v1::GetStatusResponse QueryStatus(const std::string& socket_path);

// A loopback TCP port that is free at the moment of the call, for the
// daemon's --listen and --metrics_listen.
int FreeLoopbackPort();

// Entries of /proc/<pid>/<what>: "fd" counts descriptors, "task" threads.
size_t ProcEntries(pid_t pid, const std::string& what);
// Polls (up to 10 s) until `pid` holds at most `limit` of `what`; returns
// the last count (what a daemon lets go of, it may let go of a little late).
size_t ProcEntriesSettle(pid_t pid, const std::string& what, size_t limit);
// Waits until `count()` reads the same `samples` times in a row, 50 ms
// apart (connections from earlier calls close asynchronously); returns it.
template <typename Count>
size_t Settled(Count count, int samples = 10) {
  size_t last = count();
  int same = 0;
  for (int i = 0; i < 200 && same < samples; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const size_t now = count();
    same = now == last ? same + 1 : 0;
    last = now;
  }
  return last;
}

// ProcEntries once it held still for half a second (Settled).
size_t ProcEntriesSteady(pid_t pid, const std::string& what);

// The pid of the daemon's executor for `name` (a tenant, or "shared"), or 0.
pid_t ExecutorPid(pid_t daemon, const std::string& name);

// True once a status call on `socket_path` succeeds (within ~20 s).
bool WaitUntilServing(const std::string& socket_path, Subprocess* process);

}  // namespace hrx::testing

#endif  // HRX_TESTS_TEST_DAEMON_H_
