// An executor's stderr as tenant code can write it: forged daemon lines,
// terminal escapes, endless lines and floods reach hrxd's log escaped, cut
// and rate-limited, each line naming the executor.
#include "daemon/executor/executor_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hrx::executor {
namespace {

using ::testing::HasSubstr;

TEST(EscapeForLogTest, ControlAndNonAsciiBytesAreWrittenOut) {
  EXPECT_EQ(EscapeForLog("plain text 1.0"), "plain text 1.0");
  EXPECT_EQ(EscapeForLog("\x1b[2J"), "\\x1b[2J");
  EXPECT_EQ(EscapeForLog("a\rb\nc\td"), "a\\x0db\\x0ac\\x09d");
  EXPECT_EQ(EscapeForLog("\\x41"), "\\\\x41");  // no forged escapes either
  EXPECT_EQ(EscapeForLog(std::string("\0\xff", 2)), "\\x00\\xff");
}

TEST(LineBudgetTest, ABurstThenTheRate) {
  const absl::Time start = absl::Now();
  LineBudget budget(start);
  int passed = 0;
  for (int i = 0; i < 1000; ++i) passed += budget.Take(start);
  EXPECT_EQ(passed, static_cast<int>(kExecutorLogBurstLines));
  EXPECT_FALSE(budget.Take(start));
  // One second later, one second's worth.
  passed = 0;
  for (int i = 0; i < 1000; ++i)
    passed += budget.Take(start + absl::Seconds(1));
  EXPECT_EQ(passed, static_cast<int>(kExecutorLogLinesPerSecond));
}

class Collected {
 public:
  void Add(const std::string& line) {
    absl::MutexLock lock(&mu_);
    lines_.push_back(line);
  }
  // Waits until a line contains `text` (at most ~10 s).
  bool Await(const std::string& text) {
    absl::MutexLock lock(&mu_);
    auto seen = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const std::string& line : lines_) {
        if (line.find(text) != std::string::npos) return true;
      }
      return false;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&seen), absl::Seconds(10));
  }
  std::vector<std::string> lines() {
    absl::MutexLock lock(&mu_);
    return lines_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

TEST(ExecutorLogPumpTest, WhatAnExecutorWritesIsEscapedCutLimitedAndNamed) {
  Collected collected;
  ExecutorLogPump pump([&](const std::string& line) { collected.Add(line); });
  int ends[2];
  ASSERT_EQ(pipe2(ends, O_CLOEXEC), 0);
  pump.Add("ops", shared::UniqueFd(ends[0]));
  auto write_all = [&](const std::string& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n =
          write(ends[1], bytes.data() + done, bytes.size() - done);
      ASSERT_GT(n, 0);
      done += static_cast<size_t>(n);
    }
  };
  write_all("2026-12-04T00:00:00 error [daemon] hrxd is shutting down\n");
  write_all("\x1b[2Jcleared\n");
  // 64 MiB in one line, then a thousand short ones.
  const std::string chunk(1 << 20, 'z');
  for (int i = 0; i < 64; ++i) write_all(chunk);
  write_all("\n");
  for (int i = 0; i < 1000; ++i) write_all("spam\n");
  close(ends[1]);
  ASSERT_TRUE(collected.Await("lines dropped"));
  const std::vector<std::string> lines = collected.lines();
  ASSERT_GE(lines.size(), 3u);
  EXPECT_EQ(lines[0],
            "ops: 2026-12-04T00:00:00 error [daemon] hrxd is shutting down");
  EXPECT_EQ(lines[1], "ops: \\x1b[2Jcleared");
  EXPECT_THAT(lines[2], HasSubstr("more bytes cut"));
  EXPECT_LE(lines[2].size(), kMaxExecutorLogLineBytes + 64);
  size_t bytes = 0;
  for (const std::string& line : lines) {
    EXPECT_EQ(line.rfind("ops: ", 0), 0u) << line;
    EXPECT_EQ(line.find('\x1b'), std::string::npos) << line;
    bytes += line.size();
  }
  // The burst, and the report of what was dropped: not 64 MiB + 1000 lines.
  EXPECT_LE(lines.size(), static_cast<size_t>(kExecutorLogBurstLines) + 20);
  EXPECT_LT(bytes, size_t{64} << 10);
}

}  // namespace
}  // namespace hrx::executor
