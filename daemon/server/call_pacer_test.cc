// CallPacer at its edges, on explicit times: a burst's worth at once, then
// one call per 1/rate, never more than the burst however long it rested.
#include "daemon/server/call_pacer.h"

#include "gtest/gtest.h"

namespace hrx::daemon {
namespace {

TEST(CallPacerTest, ABurstRunsAtOnceThenOneCallPerInterval) {
  CallPacer pacer(/*calls_per_second=*/100, /*burst=*/10);
  const absl::Time start = absl::FromUnixSeconds(1000);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(pacer.Take(start), absl::ZeroDuration()) << i;
  }
  // The eleventh waits 10 ms (1/100 s), and asking again takes nothing.
  EXPECT_EQ(pacer.Take(start), absl::Milliseconds(10));
  EXPECT_EQ(pacer.Take(start), absl::Milliseconds(10));
  EXPECT_EQ(pacer.Take(start + absl::Milliseconds(10)), absl::ZeroDuration());
  EXPECT_GT(pacer.Take(start + absl::Milliseconds(10)), absl::ZeroDuration());
}

TEST(CallPacerTest, RestingRefillsAtMostTheBurst) {
  CallPacer pacer(100, 10);
  const absl::Time start = absl::FromUnixSeconds(1000);
  for (int i = 0; i < 10; ++i) (void)pacer.Take(start);
  const absl::Time later = start + absl::Hours(1);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(pacer.Take(later), absl::ZeroDuration()) << i;
  }
  EXPECT_GT(pacer.Take(later), absl::ZeroDuration());
}

TEST(CallPacerTest, ZeroCallsPerSecondIsUnpaced) {
  CallPacer pacer(0, 0);
  const absl::Time now = absl::FromUnixSeconds(1000);
  for (int i = 0; i < 100000; ++i) {
    ASSERT_EQ(pacer.Take(now), absl::ZeroDuration());
  }
}

}  // namespace
}  // namespace hrx::daemon
