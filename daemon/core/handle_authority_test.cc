#include "daemon/core/handle_authority.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/status_matchers.h"

namespace hrx::daemon {
namespace {

using ::hrx::shared::HandleKind;
using ::hrx::shared::IsOk;
using ::hrx::shared::StatusIs;
using ::hrx::shared::WireHandle;
using ::testing::HasSubstr;

constexpr uint64_t kSession =
    shared::Handle{HandleKind::kSession, 3, 1}.Encode();
constexpr uint64_t kOtherSession =
    shared::Handle{HandleKind::kSession, 4, 1}.Encode();
constexpr uint64_t kBuffer = shared::Handle{HandleKind::kBuffer, 7, 2}.Encode();

HandleAuthority Authority(uint64_t instance = 0x1234) {
  shared::SipKey key{};
  key[0] = static_cast<uint8_t>(instance);
  return HandleAuthority(instance, key);
}

TEST(HandleAuthorityTest, OpensWhatItSealed) {
  const HandleAuthority authority = Authority();
  const WireHandle handle = authority.Seal(kSession, kBuffer);
  auto opened = authority.Open(handle, kSession, HandleKind::kBuffer, "t");
  ASSERT_THAT(opened.status(), IsOk());
  EXPECT_EQ(*opened, kBuffer);
  auto session = authority.OpenSession(authority.SealSession(kSession));
  ASSERT_THAT(session.status(), IsOk());
  EXPECT_EQ(*session, kSession);
}

TEST(HandleAuthorityTest, RefusesEachKindOfBadHandleWithItsOwnCode) {
  const HandleAuthority authority = Authority();
  const WireHandle good = authority.Seal(kSession, kBuffer);

  WireHandle forged = good;
  forged.object = shared::Handle{HandleKind::kBuffer, 8, 2}.Encode();
  EXPECT_THAT(
      authority.Open(forged, kSession, HandleKind::kBuffer, "t"),
      StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("forged_handle")));
  WireHandle corrupted = good;
  corrupted.tag ^= 1;
  EXPECT_THAT(
      authority.Open(corrupted, kSession, HandleKind::kBuffer, "t"),
      StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("forged_handle")));

  EXPECT_THAT(authority.Open(good, kOtherSession, HandleKind::kBuffer, "t"),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("foreign_handle")));

  const WireHandle earlier_run = Authority(0x9999).Seal(kSession, kBuffer);
  EXPECT_THAT(authority.Open(earlier_run, kSession, HandleKind::kBuffer, "t"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("previous_daemon_run")));

  EXPECT_THAT(authority.Open(good, kSession, HandleKind::kStream, "t"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("wrong_handle_kind")));
  EXPECT_THAT(authority.Open(WireHandle{}, kSession, HandleKind::kBuffer, "t"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("missing_handle")));
  // A buffer handle is not a session handle.
  EXPECT_THAT(authority.OpenSession(good),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("wrong_handle_kind")));
}

TEST(HandleAuthorityTest, KernelRandomRunsDiffer) {
  const HandleAuthority a = HandleAuthority::FromKernelRandom();
  const HandleAuthority b = HandleAuthority::FromKernelRandom();
  EXPECT_NE(a.instance(), b.instance());
  EXPECT_NE(a.Seal(kSession, kBuffer).tag, b.Seal(kSession, kBuffer).tag);
}

}  // namespace
}  // namespace hrx::daemon
