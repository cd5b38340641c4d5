// The executor process: hrxd runs its own binary again with --executor, so
// an executor always has the backend its daemon was built with.
#ifndef HRX_DAEMON_EXECUTOR_EXECUTOR_MAIN_H_
#define HRX_DAEMON_EXECUTOR_EXECUTOR_MAIN_H_

namespace hrx::executor {

// The flag that makes hrxd's binary an executor (argv[1]).
inline constexpr char kExecutorFlag[] = "--executor";
// The descriptor an executor finds its socket to hrxd on.
inline constexpr int kExecutorSocketFd = 3;

// Enters the sandbox, opens the backend and serves hrxd until it closes the
// socket. Returns the process's exit code.
int RunExecutor(int argc, char** argv);

}  // namespace hrx::executor

#endif  // HRX_DAEMON_EXECUTOR_EXECUTOR_MAIN_H_
