// QueuePool: per-tenant queues, and the retired queues of a lost backend,
// which go once nothing names them (a tenant that crashes its executor in
// a loop must not pile up queues, and with them executor connections).
#include "daemon/core/queue_pool.h"

#include <memory>
#include <utility>

#include "daemon/backend/cpu/cpu_backend.h"
#include "gtest/gtest.h"
#include "shared/status_matchers.h"

namespace hrx::daemon {
namespace {

using ::hrx::shared::IsOk;

class QueuePoolTest : public ::testing::Test {
 protected:
  QueuePoolTest()
      : devices_(std::make_unique<backend::CpuBackend>(
            backend::CpuBackendOptions{uint64_t{64} << 20})),
        pool_(devices_, /*capacity=*/2),
        tenant_("ops", Role::kClient, Limits()) {}

  SingleDevice devices_;
  QueuePool pool_;
  Tenant tenant_;
};

TEST_F(QueuePoolTest, ARetiredQueueGoesOnceNothingLeasesIt) {
  auto first = pool_.Assign(tenant_);
  ASSERT_THAT(first.status(), IsOk());
  auto second = pool_.Assign(tenant_);
  ASSERT_THAT(second.status(), IsOk());
  EXPECT_NE(first->queue.get(), second->queue.get());
  // Queues in service are never swept, leased or not.
  second->queue.reset();
  EXPECT_EQ(pool_.Sweep(), 0u);

  pool_.Retire("ops");
  EXPECT_EQ(pool_.retired(), 2u);
  // The unleased one goes; the one a stream still names stays, and still
  // works for it.
  EXPECT_EQ(pool_.Sweep(), 1u);
  EXPECT_EQ(pool_.retired(), 1u);
  auto fence = first->queue->EnqueueHostCallback([](absl::Status) {});
  ASSERT_THAT(fence.status(), IsOk());
  ASSERT_THAT(first->queue->Wait(*fence), IsOk());
  EXPECT_EQ(pool_.Sweep(), 0u);

  first->queue.reset();
  EXPECT_EQ(pool_.Sweep(), 1u);
  EXPECT_EQ(pool_.retired(), 0u);

  // The tenant's next stream gets a new queue.
  auto fresh = pool_.Assign(tenant_);
  ASSERT_THAT(fresh.status(), IsOk());
  EXPECT_EQ(fresh->index, 0u);
  EXPECT_EQ(pool_.created(), 3u);
}

TEST_F(QueuePoolTest, CloseDestroysRetiredQueuesStillLeased) {
  auto leased = pool_.Assign(tenant_);
  ASSERT_THAT(leased.status(), IsOk());
  pool_.Retire("ops");
  pool_.Close();
  EXPECT_EQ(pool_.retired(), 0u);
  EXPECT_EQ(pool_.Assign(tenant_).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace hrx::daemon
