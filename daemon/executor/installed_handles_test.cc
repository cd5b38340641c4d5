#include "daemon/executor/installed_handles.h"

#include <functional>
#include <set>
#include <string>

#include "daemon/core/handle_authority.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/refusal.h"
#include "shared/siphash.h"
#include "shared/status_matchers.h"

namespace hrx::executor {
namespace {

using ::hrx::shared::HandleKind;
using ::hrx::shared::IsOk;
using ::hrx::shared::WireHandle;

constexpr uint64_t kAlice = 0x11;
constexpr uint64_t kBob = 0x22;

uint64_t Object(HandleKind kind, uint32_t slot) {
  return shared::Handle{kind, slot, 1}.Encode();
}

// hrxd, as the executor's table sees it: the daemon's authority and which
// objects are alive. Counts the questions it is asked.
class InstalledHandlesTest : public ::testing::Test {
 protected:
  InstalledHandlesTest()
      : hrxd_(0x5eed, shared::SipKey{}),
        table_([this](const WireHandle& handle, uint64_t caller,
                      HandleKind kind, std::string_view what) {
          return Ask(handle, caller, kind, what);
        }) {}

  absl::StatusOr<uint64_t> Ask(const WireHandle& handle, uint64_t caller,
                               HandleKind kind, std::string_view what) {
    ++asked_;
    if (during_ask_) during_ask_();
    if (vouch_for_ != 0) return vouch_for_;
    absl::StatusOr<uint64_t> object = hrxd_.Open(handle, caller, kind, what);
    if (!object.ok()) return object.status();
    if (!live_.contains(*object)) {
      return Refusal(Reason::kStaleHandle,
                     std::string(what) + ": freed. Fix: use a live handle.");
    }
    return object;
  }

  // Opens `handle` here and directly at hrxd: the answers must be the same.
  void ExpectSameAnswer(const WireHandle& handle, uint64_t caller,
                        HandleKind kind) {
    const absl::StatusOr<uint64_t> here =
        table_.Open(handle, caller, kind, "copy src");
    const absl::StatusOr<uint64_t> there =
        Ask(handle, caller, kind, "copy src");
    EXPECT_EQ(here.status(), there.status());
    if (here.ok() && there.ok()) {
      EXPECT_EQ(*here, *there);
    }
  }

  daemon::HandleAuthority hrxd_;
  InstalledHandles table_;
  std::set<uint64_t> live_;
  int asked_ = 0;
  std::function<void()> during_ask_;  // runs while hrxd is being asked
  uint64_t vouch_for_ = 0;            // a broken hrxd's answer, if set
};

TEST_F(InstalledHandlesTest, AnInstalledHandleOpensWithoutAskingHrxd) {
  const uint64_t buffer = Object(HandleKind::kBuffer, 3);
  live_.insert(buffer);
  const WireHandle handle = hrxd_.Seal(kAlice, buffer);
  table_.Install(handle);
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<uint64_t> opened =
        table_.Open(handle, kAlice, HandleKind::kBuffer, "fill dst");
    ASSERT_THAT(opened, IsOk());
    EXPECT_EQ(*opened, buffer);
  }
  EXPECT_EQ(asked_, 0);
  EXPECT_EQ(table_.Seal(kAlice, buffer), handle);
  EXPECT_EQ(table_.size(), 1u);
}

TEST_F(InstalledHandlesTest, AnyAlteredFieldIsRefusedWithHrxdsOwnAnswer) {
  const uint64_t buffer = Object(HandleKind::kBuffer, 3);
  live_.insert(buffer);
  const WireHandle handle = hrxd_.Seal(kAlice, buffer);
  table_.Install(handle);
  WireHandle altered = handle;
  altered.tag ^= 1;  // forged
  ExpectSameAnswer(altered, kAlice, HandleKind::kBuffer);
  altered = handle;
  altered.object = Object(HandleKind::kBuffer, 4);  // forged: another slot
  ExpectSameAnswer(altered, kAlice, HandleKind::kBuffer);
  altered = handle;
  altered.instance ^= 2;  // previous run
  ExpectSameAnswer(altered, kAlice, HandleKind::kBuffer);
  ExpectSameAnswer(WireHandle{}, kAlice, HandleKind::kBuffer);  // missing
  // Each of those was asked, and none was installed by the asking.
  EXPECT_EQ(table_.size(), 1u);
  const absl::Status forged =
      table_
          .Open(WireHandle{handle.instance, handle.session, handle.object,
                           handle.tag ^ 1},
                kAlice, HandleKind::kBuffer, "fill dst")
          .status();
  EXPECT_EQ(ReasonOf(forged), Reason::kForgedHandle) << forged;
}

TEST_F(InstalledHandlesTest, AnotherSessionsOrKindsHandleIsNeverOpenedHere) {
  const uint64_t buffer = Object(HandleKind::kBuffer, 3);
  live_.insert(buffer);
  const WireHandle alices = hrxd_.Seal(kAlice, buffer);
  table_.Install(alices);
  // Bob names Alice's installed handle: foreign, as hrxd says.
  ExpectSameAnswer(alices, kBob, HandleKind::kBuffer);
  EXPECT_EQ(
      ReasonOf(
          table_.Open(alices, kBob, HandleKind::kBuffer, "fill dst").status()),
      Reason::kForeignHandle);
  // Alice names it as a kernel: the wrong kind, as hrxd says.
  ExpectSameAnswer(alices, kAlice, HandleKind::kKernel);
  EXPECT_EQ(
      ReasonOf(table_.Open(alices, kAlice, HandleKind::kKernel, "dispatch")
                   .status()),
      Reason::kWrongHandleKind);
  EXPECT_EQ(table_.Seal(kBob, buffer), WireHandle{});
}

TEST_F(InstalledHandlesTest, RevokedHandlesAskAgainAndHrxdDecides) {
  const uint64_t kept = Object(HandleKind::kBuffer, 1);
  const uint64_t freed = Object(HandleKind::kBuffer, 2);
  const uint64_t kernel = Object(HandleKind::kKernel, 3);
  live_ = {kept, freed, kernel};
  for (uint64_t object : {kept, freed, kernel}) {
    table_.Install(hrxd_.Seal(kAlice, object));
  }
  table_.Install(hrxd_.Seal(kBob, kept));
  // Freed: revoked here, and gone at hrxd: stale, as hrxd says.
  live_.erase(freed);
  table_.Revoke(kAlice, freed);
  ExpectSameAnswer(hrxd_.Seal(kAlice, freed), kAlice, HandleKind::kBuffer);
  EXPECT_EQ(ReasonOf(table_
                         .Open(hrxd_.Seal(kAlice, freed), kAlice,
                               HandleKind::kBuffer, "fill dst")
                         .status()),
            Reason::kStaleHandle);
  // Alice's session ended: none of hers open here without asking; Bob's do.
  table_.RevokeSession(kAlice);
  EXPECT_EQ(table_.size(), 1u);
  asked_ = 0;
  ASSERT_THAT(table_.Open(hrxd_.Seal(kBob, kept), kBob, HandleKind::kBuffer,
                          "fill dst"),
              IsOk());
  EXPECT_EQ(asked_, 0);
  // A live handle hrxd vouches for is installed by the asking: once.
  ASSERT_THAT(table_.Open(hrxd_.Seal(kAlice, kernel), kAlice,
                          HandleKind::kKernel, "dispatch"),
              IsOk());
  ASSERT_THAT(table_.Open(hrxd_.Seal(kAlice, kernel), kAlice,
                          HandleKind::kKernel, "dispatch"),
              IsOk());
  EXPECT_EQ(asked_, 1);
  EXPECT_EQ(table_.size(), 2u);
}

// hrxd vouched for a handle, and revoked something before the answer was
// taken: the answer stands for that open but is not kept (the revocation
// could have been of this very handle).
TEST_F(InstalledHandlesTest, AHandleRevokedWhileHrxdWasAskedIsNotKept) {
  const uint64_t buffer = Object(HandleKind::kBuffer, 3);
  live_.insert(buffer);
  const WireHandle handle = hrxd_.Seal(kAlice, buffer);
  during_ask_ = [&] { table_.RevokeSession(kAlice); };
  ASSERT_THAT(table_.Open(handle, kAlice, HandleKind::kBuffer, "fill dst"),
              IsOk());
  EXPECT_EQ(table_.size(), 0u);
  during_ask_ = nullptr;
  ASSERT_THAT(table_.Open(handle, kAlice, HandleKind::kBuffer, "fill dst"),
              IsOk());
  EXPECT_EQ(asked_, 2);
  EXPECT_EQ(table_.size(), 1u);  // kept once nothing was revoked meanwhile
}

// hrxd vouching for another object than the handle names is a broken
// daemon: refused, and nothing is kept.
TEST_F(InstalledHandlesTest, AVouchingForAnotherObjectIsRefused) {
  const uint64_t buffer = Object(HandleKind::kBuffer, 3);
  live_.insert(buffer);
  vouch_for_ = Object(HandleKind::kBuffer, 9);
  const absl::Status refused = table_
                                   .Open(hrxd_.Seal(kAlice, buffer), kAlice,
                                         HandleKind::kBuffer, "fill dst")
                                   .status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInternal) << refused;
  EXPECT_EQ(ReasonOf(refused), Reason::kStreamProtocol) << refused;
  EXPECT_EQ(table_.size(), 0u);
}

}  // namespace
}  // namespace hrx::executor
