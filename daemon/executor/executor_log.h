// What executors write to stderr (their own log lines, and whatever tenant
// code prints) reaches hrxd's log only through here: one thread reads every
// executor's stderr pipe, escapes control and non-ASCII bytes (no forged
// daemon lines, no terminal escapes), cuts long lines, rate-limits each
// executor and names it on every line. Nothing an executor writes can grow
// hrxd's log faster than the limits below, and a pipe is always drained, so
// an executor never blocks on its own stderr.
//
// Thread-safe.
#ifndef HRX_DAEMON_EXECUTOR_EXECUTOR_LOG_H_
#define HRX_DAEMON_EXECUTOR_EXECUTOR_LOG_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "shared/unique_fd.h"

namespace hrx::executor {

// Per executor: a line is cut to this many bytes (before escaping)...
inline constexpr size_t kMaxExecutorLogLineBytes = 512;
// ...and at most this many lines pass at once, refilled at kExecutorLogLines-
// PerSecond; the rest are counted and reported as dropped.
inline constexpr double kExecutorLogBurstLines = 50;
inline constexpr double kExecutorLogLinesPerSecond = 10;

// `bytes` with every byte outside printable ASCII, and the backslash,
// written as \xNN (\\ for the backslash).
std::string EscapeForLog(std::string_view bytes);

// A token bucket of lines.
class LineBudget {
 public:
  explicit LineBudget(absl::Time now) : refilled_(now) {}
  // Whether a line may pass now (taking a token).
  bool Take(absl::Time now);

 private:
  double tokens_ = kExecutorLogBurstLines;
  absl::Time refilled_;
};

class ExecutorLogPump {
 public:
  // `sink` gets each finished line: "<executor>: <escaped text>", or a
  // report of dropped lines. Called on the pump's thread only.
  using Sink = std::function<void(const std::string& line)>;
  explicit ExecutorLogPump(Sink sink);
  ~ExecutorLogPump();  // stops reading; pipes still open are closed
  ExecutorLogPump(const ExecutorLogPump&) = delete;
  ExecutorLogPump& operator=(const ExecutorLogPump&) = delete;

  // Reads `pipe` (the read end of an executor's stderr) until it ends.
  void Add(const std::string& executor, shared::UniqueFd pipe);

 private:
  struct Source {
    std::string executor;
    shared::UniqueFd pipe;
    std::string partial;     // a line not yet ended (at most the cut length)
    size_t partial_cut = 0;  // bytes of the current line beyond the cut
    LineBudget budget{absl::Now()};
    uint64_t dropped = 0;  // lines refused by the budget since the last one
  };
  void Run();
  // Handles `bytes` read from `source`; Finish when the line ends.
  void Take(Source& source, std::string_view bytes);
  void Finish(Source& source);
  void ReportDropped(Source& source);

  const Sink sink_;
  const shared::UniqueFd wake_;  // an eventfd: Add and the destructor
  absl::Mutex mu_;
  std::map<int, Source> added_ ABSL_GUARDED_BY(mu_);  // not yet polled
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace hrx::executor

#endif  // HRX_DAEMON_EXECUTOR_EXECUTOR_LOG_H_
