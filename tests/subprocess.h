// Test helper: runs a program as a real child process, its output captured
// in files, so tests can drive the daemon and clients as separate processes.
#ifndef HRX_TESTS_SUBPROCESS_H_
#define HRX_TESTS_SUBPROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace hrx::testing {

// Absolute path of a runfile such as "daemon/hrxd" in a Bazel test.
std::string RunfilePath(const std::string& relative);

// The bytes of the file at `path` (empty when it cannot be read).
std::string ReadFile(const std::string& path);

// A fresh directory under /tmp with a short path (Unix socket paths are
// limited to 108 bytes; TEST_TMPDIR is longer than that).
std::string MakeShortTempDir();

class Subprocess {
 public:
  // Starts `argv[0]` with `argv`; stdout and stderr go to files in `dir`.
  // With `inherit_fd` >= 0, the child gets that descriptor as fd 3 (the
  // first descriptor systemd passes in socket activation).
  static Subprocess Start(const std::vector<std::string>& argv,
                          const std::string& dir,
                          const std::vector<std::string>& extra_env = {},
                          int inherit_fd = -1);
  Subprocess(Subprocess&&) noexcept;
  ~Subprocess();  // kills and reaps a child still running

  pid_t pid() const { return pid_; }
  // Sends `signal_number` (no-op once reaped).
  void Signal(int signal_number) const;
  // Waits for exit; returns the exit code, or 128 + signal when killed.
  int Wait();
  // Exit code when the child already exited, without blocking.
  std::optional<int> Poll();

  std::string Stdout() const;
  std::string Stderr() const;

 private:
  Subprocess(pid_t pid, std::string stdout_path, std::string stderr_path)
      : pid_(pid),
        stdout_path_(std::move(stdout_path)),
        stderr_path_(std::move(stderr_path)) {}

  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::string stdout_path_;
  std::string stderr_path_;
};

// Runs to completion; returns {exit code, stdout, stderr}.
struct RunResult {
  int exit_code;
  std::string out;
  std::string err;
};
RunResult RunToCompletion(const std::vector<std::string>& argv,
                          const std::string& dir);

// True once `child` printed `text` on stdout; false when it exits without
// having printed it, or `limit` passes first.
bool WaitForOutput(Subprocess& child, const std::string& text,
                   absl::Duration limit = absl::Seconds(30));

}  // namespace hrx::testing

#endif  // HRX_TESTS_SUBPROCESS_H_
