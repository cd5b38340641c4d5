#include "shared/launch_check.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/status_matchers.h"

namespace hrx::shared {
namespace {

using ::testing::HasSubstr;

TEST(CheckLaunchShape, EnforcesCompiledWorkgroupDimensions) {
  const Dim3 compiled = {64, 2, 1};
  EXPECT_THAT(CheckLaunchShape("t", {1, 1, 1}, {64, 2, 1}, compiled), IsOk());
  EXPECT_THAT(CheckLaunchShape("t", {1, 1, 1}, {128, 1, 1}, compiled),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("workgroup_size_mismatch")));
  EXPECT_THAT(CheckLaunchShape("t", {0, 1, 1}, {64, 2, 1}, compiled),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("bad_launch_shape")));
  const Dim3 dynamic = {0, 2, 1};
  EXPECT_THAT(CheckLaunchShape("t", {1, 1, 1}, {32, 2, 1}, dynamic), IsOk());
  EXPECT_THAT(CheckLaunchShape("t", {1, 1, 1}, {32, 1, 1}, dynamic),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("workgroup_size_mismatch")));
}

TEST(CheckLaunchShape, BlockLimitIsInclusiveAndCannotWrap) {
  const Dim3 any = {0, 0, 0};
  EXPECT_THAT(CheckLaunchShape("t", {1, 1, 1}, {1024, 1, 1}, any), IsOk());
  EXPECT_THAT(CheckLaunchShape("t", {1, 1, 1}, {32, 32, 1}, any), IsOk());
  EXPECT_THAT(CheckLaunchShape("t", {1, 1, 1}, {1025, 1, 1}, any),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("bad_launch_shape")));
  // 2^16 * 2^16 * 2^16 would wrap a 32-bit product to 0.
  EXPECT_THAT(CheckLaunchShape("t", {1, 1, 1}, {65536, 65536, 65536}, any),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("bad_launch_shape")));
  EXPECT_THAT(CheckLaunchShape("t", {1, 1, 1}, {1, 0, 1}, any),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("bad_launch_shape")));
}

TEST(CheckArguments, ComparesConstantBytesAndBindingsWithTheSignature) {
  KernelSignature signature;
  signature.args = {
      {ArgKind::kScalar, 4}, {ArgKind::kScalar, 8}, {ArgKind::kBuffer, 0}};
  EXPECT_EQ(ConstantBytes(signature), 12u);
  EXPECT_EQ(BindingCount(signature), 1u);
  EXPECT_THAT(CheckArguments("t", signature, 12, 1), IsOk());
  EXPECT_THAT(CheckArguments("t", signature, 8, 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("constants_mismatch")));
  EXPECT_THAT(CheckArguments("t", signature, 12, 2),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("bindings_mismatch")));
}

}  // namespace
}  // namespace hrx::shared
