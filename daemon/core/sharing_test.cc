// Grants and export tickets, with the clock under the test's control: a
// ticket expires without the test sleeping.
#include "daemon/core/sharing.h"

#include "daemon/core/core_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/refusal.h"
#include "shared/status_matchers.h"

namespace hrx::daemon {
namespace {

using ::hrx::daemon::testing::CoreHarness;
using ::hrx::daemon::testing::Me;
using ::hrx::shared::IsOk;
using ::testing::HasSubstr;

constexpr absl::Duration kLifetime = absl::Seconds(10);

class SharingTest : public ::testing::Test {
 protected:
  SharingTest() : harness_(Options()) {}
  static CoreOptions Options() {
    CoreOptions options;
    options.ticket_lifetime = kLifetime;
    return options;
  }
  Sharing& sharing() { return harness_.core().sharing(); }
  uint64_t Shared(uint64_t bytes) {
    return harness_.core()
        .buffers()
        .Allocate(harness_.session(), bytes, AllocationKind::kShared)
        ->handle;
  }

  CoreHarness harness_;
};

TEST_F(SharingTest, ATicketIsRedeemableUntilItsLifetimeEndsInclusive) {
  auto ticket = sharing().Export(harness_.session(), Shared(4096),
                                 backend::ExportKind::kShm);
  ASSERT_THAT(ticket.status(), IsOk());
  harness_.clock().Advance(kLifetime);  // the deadline itself still redeems
  EXPECT_THAT(sharing().Redeem(ticket->ticket, Me()).status(), IsOk());
}

TEST_F(SharingTest, AnExpiredTicketIsRefusedAndHoldsNothing) {
  auto ticket = sharing().Export(harness_.session(), Shared(4096),
                                 backend::ExportKind::kShm);
  ASSERT_THAT(ticket.status(), IsOk());
  EXPECT_EQ(harness_.Usage(Resource::kExports), 1u);
  harness_.clock().Advance(kLifetime + absl::Milliseconds(1));
  auto redeemed = sharing().Redeem(ticket->ticket, Me());
  EXPECT_EQ(ReasonOf(redeemed.status()), Reason::kTicketExpired);
  EXPECT_THAT(redeemed.status().message(), HasSubstr("expired 1ms ago"));
  EXPECT_EQ(harness_.Usage(Resource::kExports), 0u);
}

TEST_F(SharingTest, HousekeepingDropsExpiredTicketsWithoutARedeem) {
  ASSERT_THAT(
      sharing()
          .Export(harness_.session(), Shared(4096), backend::ExportKind::kShm)
          .status(),
      IsOk());
  harness_.clock().Advance(kLifetime + absl::Seconds(1));
  harness_.core().Housekeep(harness_.clock().Now());
  EXPECT_EQ(harness_.Usage(Resource::kExports), 0u);
}

TEST_F(SharingTest, ATicketIsSingleUse) {
  auto ticket = sharing().Export(harness_.session(), Shared(4096),
                                 backend::ExportKind::kShm);
  ASSERT_THAT(sharing().Redeem(ticket->ticket, Me()).status(), IsOk());
  EXPECT_EQ(ReasonOf(sharing().Redeem(ticket->ticket, Me()).status()),
            Reason::kTicketUsed);
  EXPECT_EQ(ReasonOf(sharing().Redeem("no such ticket", Me()).status()),
            Reason::kUnknownTicket);
}

TEST_F(SharingTest, AGrantImportsOnlyForItsGranteeAndDiesWhenRevoked) {
  const uint64_t buffer = harness_.Allocate(64);
  auto other = harness_.core().OpenSession("other", Me(/*connection=*/2));
  auto third = harness_.core().OpenSession("third", Me(/*connection=*/3));
  ASSERT_THAT(other.status(), IsOk());
  auto grant = sharing().Grant(harness_.session(), buffer, "", *other);
  ASSERT_THAT(grant.status(), IsOk());
  EXPECT_EQ(ReasonOf(sharing().Import(*third, *grant).status()),
            Reason::kGrantNotYours);
  auto imported = sharing().Import(*other, *grant);
  ASSERT_THAT(imported.status(), IsOk());
  EXPECT_EQ(imported->bytes, 64u);
  ASSERT_THAT(sharing().Revoke(harness_.session(), *grant), IsOk());
  EXPECT_EQ(ReasonOf(sharing().Import(*other, *grant).status()),
            Reason::kUnknownGrant);
}

TEST_F(SharingTest, FreeingABufferRevokesItsGrants) {
  const uint64_t buffer = harness_.Allocate(64);
  auto other = harness_.core().OpenSession("other", Me(/*connection=*/2));
  auto grant = sharing().Grant(harness_.session(), buffer, "", *other);
  ASSERT_THAT(grant.status(), IsOk());
  ASSERT_THAT(harness_.core().buffers().Free(harness_.session(), buffer),
              IsOk());
  EXPECT_EQ(ReasonOf(sharing().Import(*other, *grant).status()),
            Reason::kUnknownGrant);
  EXPECT_EQ(harness_.Usage(Resource::kGrants), 0u);
}

TEST_F(SharingTest, MemoryThatWasSharedIsNeverRecycledThroughThePool) {
  const uint64_t kept =
      harness_.core()
          .buffers()
          .Allocate(harness_.session(), 64, AllocationKind::kDevice)
          ->handle;
  const uint64_t granted =
      harness_.core()
          .buffers()
          .Allocate(harness_.session(), 64, AllocationKind::kDevice)
          ->handle;
  auto other = harness_.core().OpenSession("other", Me(/*connection=*/2));
  auto grant = sharing().Grant(harness_.session(), granted, "", *other);
  ASSERT_THAT(grant.status(), IsOk());
  auto imported = sharing().Import(*other, *grant);
  ASSERT_THAT(imported.status(), IsOk());
  ASSERT_THAT(harness_.core().buffers().Free(harness_.session(), granted),
              IsOk());
  ASSERT_THAT(harness_.core().buffers().Free(harness_.session(), kept), IsOk());
  // Only the buffer that never left the session waits for reuse: the
  // importer still holds the other one.
  EXPECT_EQ(harness_.core().admin().status().allocation_pool.entries, 1u);
}

TEST_F(SharingTest, DeviceMemoryOfABackendSharedByTenantsComesZeroed) {
  // One backend for every tenant (no executors): a plain device allocation
  // could be another tenant's freed memory, so it is asked for zeroed.
  const size_t zeroed_before = harness_.faults().zeroed_allocations();
  ASSERT_THAT(harness_.core()
                  .buffers()
                  .Allocate(harness_.session(), 4096, AllocationKind::kDevice)
                  .status(),
              IsOk());
  EXPECT_EQ(harness_.faults().zeroed_allocations(), zeroed_before + 1);
}

}  // namespace
}  // namespace hrx::daemon
