#include "shared/span_check.h"

#include <cstdint>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/status_matchers.h"

namespace hrx::shared {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

TEST(CheckSpan, AcceptsSpansWithinCapacityIncludingEmptyAtTheEnd) {
  EXPECT_THAT(CheckSpan("t", 0, 16, 16), IsOk());
  EXPECT_THAT(CheckSpan("t", 16, 0, 16), IsOk());
  EXPECT_THAT(CheckSpan("t", 0, 0, 0), IsOk());
  EXPECT_THAT(CheckSpan("t", 15, 1, 16), IsOk());
}

TEST(CheckSpan, RefusesSpansPastTheEndNamingTheNumbers) {
  EXPECT_THAT(
      CheckSpan("fill dst", 8, 9, 16),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("view_out_of_range"), HasSubstr("fill dst"),
                     HasSubstr("offset 8"), HasSubstr("length 9"),
                     HasSubstr("16 bytes"), HasSubstr("Fix:"))));
  EXPECT_THAT(CheckSpan("t", 17, 0, 16),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("17")));
}

TEST(CheckSpan, RefusesSpansWhoseEndWouldWrapPast2To64) {
  // offset + length wraps to 8, which a naive check would accept.
  EXPECT_THAT(CheckSpan("t", kMax - 7, 16, 4096),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("view_out_of_range")));
  EXPECT_THAT(CheckSpan("t", 8, kMax, 4096),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("view_out_of_range")));
  EXPECT_THAT(CheckSpan("t", kMax, 1, kMax),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("view_out_of_range")));
  EXPECT_THAT(CheckSpan("t", kMax, 0, kMax), IsOk());
}

TEST(SpansOverlap, DetectsSharedBytesOnly) {
  EXPECT_TRUE(SpansOverlap(0, 8, 9));
  EXPECT_FALSE(SpansOverlap(0, 8, 8));
  EXPECT_FALSE(SpansOverlap(8, 0, 8));
  EXPECT_TRUE(SpansOverlap(4, 4, 1));
  EXPECT_FALSE(SpansOverlap(4, 4, 0));
}

}  // namespace
}  // namespace hrx::shared
