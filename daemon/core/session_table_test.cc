#include "daemon/core/session_table.h"

#include <string>

#include "daemon/core/core_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/refusal.h"
#include "shared/status_matchers.h"

namespace hrx::daemon {
namespace {

using ::hrx::daemon::testing::Me;
using ::hrx::shared::IsOk;
using ::testing::HasSubstr;

class SessionTableTest : public ::testing::Test {
 protected:
  SessionTableTest()
      : table_(std::shared_ptr<TenantRegistry>(TenantRegistry::BuiltIn(0)),
               clock_) {}
  ManualClock clock_{absl::FromUnixSeconds(1000)};
  SessionTable table_;
};

TEST_F(SessionTableTest, ClientNamesAreBoundedAndPrintable) {
  EXPECT_THAT(table_.Open(std::string(kMaxClientNameBytes, 'n'), Me()).status(),
              IsOk());
  auto long_name = table_.Open(std::string(kMaxClientNameBytes + 1, 'n'), Me());
  EXPECT_EQ(ReasonOf(long_name.status()), Reason::kClientNameTooLong);
  EXPECT_THAT(long_name.status().message(), HasSubstr("129 bytes"));
  auto control = table_.Open("bell\a", Me());
  EXPECT_EQ(ReasonOf(control.status()), Reason::kBadClientName);
  EXPECT_THAT(control.status().message(), HasSubstr("0x07"));
}

TEST_F(SessionTableTest, ASessionBelongsToItsConnectionOnly) {
  auto session = table_.Open("mine", Me(/*connection=*/7));
  ASSERT_THAT(session.status(), IsOk());
  EXPECT_THAT(table_.VerifyCaller(*session, Me(7)), IsOk());
  const absl::Status other = table_.VerifyCaller(*session, Me(8));
  EXPECT_EQ(ReasonOf(other), Reason::kSessionNotYours);
  PeerIdentity remote = Me(7);
  remote.remote = true;
  remote.certificate_subject = "CN=mallory";
  EXPECT_EQ(ReasonOf(table_.VerifyCaller(*session, remote)),
            Reason::kSessionNotYours);
}

TEST_F(SessionTableTest, EveryVerifiedCallRenewsTheLease) {
  auto session = table_.Open("mine", Me());
  ASSERT_THAT(session.status(), IsOk());
  std::shared_ptr<Session> entry = *table_.Find(*session);
  EXPECT_EQ(entry->last_call_ns.load(), absl::ToUnixNanos(clock_.Now()));
  clock_.Advance(absl::Seconds(30));
  ASSERT_THAT(table_.VerifyCaller(*session, Me()), IsOk());
  EXPECT_EQ(entry->last_call_ns.load(), absl::ToUnixNanos(clock_.Now()));
}

TEST_F(SessionTableTest, RemovedSessionsAreStaleAndSelectSeesTheRest) {
  auto a = table_.Open("a", Me(1));
  auto b = table_.Open("b", Me(2));
  ASSERT_THAT(table_.Remove(*a, "close session").status(), IsOk());
  EXPECT_EQ(ReasonOf(table_.Find(*a).status()), Reason::kStaleHandle);
  auto selected = table_.Select(
      [](uint64_t, const Session& s) { return s.client_name == "b"; });
  ASSERT_EQ(selected.size(), 1u);
  EXPECT_EQ(selected[0].first, *b);
  EXPECT_EQ(table_.size(), 1u);
}

TEST_F(SessionTableTest, ASessionEndedByItsExecutorsLossSaysSoWhenNamed) {
  auto lost = table_.Open("lost", Me(1));
  auto closed = table_.Open("closed", Me(2));
  const absl::Status why = Refusal(Reason::kExecutorLost, "gone. Fix: retry.");
  table_.Bury(*lost, why);
  // Still open: found as ever.
  EXPECT_THAT(table_.Find(*lost).status(), IsOk());
  ASSERT_THAT(table_.Remove(*lost, "close session").status(), IsOk());
  ASSERT_THAT(table_.Remove(*closed, "close session").status(), IsOk());
  EXPECT_EQ(ReasonOf(table_.Find(*lost).status()), Reason::kExecutorLost);
  EXPECT_EQ(ReasonOf(table_.Find(*closed).status()), Reason::kStaleHandle);
  // Bounded: the oldest is forgotten (stale again) past the limit.
  for (uint64_t i = 0; i < kMaxSessionTombstones; ++i) {
    table_.Bury(uint64_t{1} << 40 | i, why);
  }
  EXPECT_EQ(ReasonOf(table_.Find(*lost).status()), Reason::kStaleHandle);
}

TEST(CoreLeaseTest, ARemoteSessionEndsWhenItsLeaseLapsesOnTheClock) {
  CoreOptions options;
  options.remote_session_lease = absl::Seconds(120);
  auto registry = TenantRegistry::Parse(
      "tenants { name: \"far\" certificate_subjects: \"CN=far\" }", "test");
  ASSERT_THAT(registry.status(), IsOk());
  options.tenants = std::shared_ptr<TenantRegistry>(std::move(*registry));
  testing::CoreHarness harness(options);
  PeerIdentity far;
  far.remote = true;
  far.certificate_subject = "CN=far";
  auto session = harness.core().OpenSession("far", far);
  ASSERT_THAT(session.status(), IsOk());
  harness.clock().Advance(absl::Seconds(120));
  harness.core().Housekeep(harness.clock().Now());
  EXPECT_THAT(harness.core().sessions().Find(*session).status(), IsOk());
  harness.clock().Advance(absl::Seconds(1));
  harness.core().Housekeep(harness.clock().Now());
  EXPECT_EQ(ReasonOf(harness.core().sessions().Find(*session).status()),
            Reason::kStaleHandle);
}

}  // namespace
}  // namespace hrx::daemon
