// Stream API parity, memory side: bounded upload staging (the reference
// runtime's staging tests, counterpart by counterpart), the transfer cache
// and the allocation pool, against a real daemon.
#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "tests/client_fixture.h"

namespace hrx::testing {
namespace {

using ::hrx::shared::IsOk;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Le;
using ::testing::SizeIs;

constexpr uint64_t kStagingLimit = uint64_t{64} << 20;

class StagingTest : public ClientFixture {
 protected:
  void SetUp() override {
    ClientFixture::SetUp();
    // These tests are about the daemon's inline upload staging: keep every
    // transfer inline rather than through the shared staging region.
    stream_->SetSharedTransferThreshold(UINT64_MAX);
  }

  void Upload(const View& dst, uint64_t bytes, uint8_t value) {
    const std::vector<uint8_t> data(bytes, value);
    ASSERT_THAT(stream_->Upload(*dst.Slice(0, bytes), data), IsOk());
  }
  void ExpectPoolWithinBounds() {
    const StreamStats stats = Stats(*stream_);
    EXPECT_LE(stats.completed_staging_ids.size(), 8u);
    EXPECT_LE(stats.upload_staging.bytes, kStagingLimit);
  }
};

TEST_F(StagingTest, CompletedStagingIsReclaimedAndReusedOnEveryCompletionPath) {
  Buffer buffer = Allocate(*stream_, 1024);
  Upload(buffer.Binding(), 1024, 7);
  const StreamStats first = Stats(*stream_);
  ASSERT_THAT(first.pending_staging_ids, SizeIs(1));
  const uint64_t original = first.pending_staging_ids[0];
  // Path 1: a blocking read.
  EXPECT_THAT(ReadAll(*stream_, buffer.Binding()), Each(7));
  EXPECT_THAT(Stats(*stream_).pending_staging_ids, IsEmpty());
  Upload(buffer.Binding(), 1024, 9);
  EXPECT_THAT(Stats(*stream_).pending_staging_ids, ElementsAre(original));
  // Path 2: a blocking upload.
  const std::vector<uint8_t> eleven(1024, 11);
  ASSERT_THAT(stream_->UploadBlocking(buffer.Binding(), eleven), IsOk());
  EXPECT_THAT(Stats(*stream_).pending_staging_ids, IsEmpty());
  // A smaller upload reuses the capacity that fits.
  Upload(buffer.Binding(), 512, 12);
  EXPECT_THAT(Stats(*stream_).pending_staging_ids, ElementsAre(original));
  // Path 3: synchronize.
  ASSERT_THAT(stream_->Synchronize(), IsOk());
  EXPECT_THAT(Stats(*stream_).pending_staging_ids, IsEmpty());
  // Path 4: observing completion without blocking.
  Upload(buffer.Binding(), 1024, 13);
  ASSERT_THAT(stream_->Synchronize(), IsOk());
  Upload(buffer.Binding(), 1024, 13);
  while (!Yes(stream_->IsIdle())) {
  }
  EXPECT_THAT(Stats(*stream_).pending_staging_ids, IsEmpty());
  // Never more than eight pending, however many uploads are issued.
  for (int i = 0; i < 32; ++i) {
    Upload(buffer.Binding(), 1024, 1);
    EXPECT_LE(Stats(*stream_).pending_staging_ids.size(), 8u);
  }
  ASSERT_THAT(stream_->Synchronize(), IsOk());
  ExpectPoolWithinBounds();
  EXPECT_THAT(ReadAll(*stream_, buffer.Binding()), Each(1));
}

// hrxd's kMaxPendingStagings (daemon/core/pools.h), as documented.
constexpr size_t kMaxPendingStagingsForTest = 8;

TEST_F(StagingTest, UploadsBatchUntilPressureAndReuseTheSmallestCapacity) {
  Buffer buffer = Allocate(*stream_, 4096);
  for (uint64_t size : {1024u, 2048u, 4096u}) Upload(buffer.Binding(), size, 7);
  const StreamStats batched = Stats(*stream_);
  ASSERT_THAT(batched.pending_staging_ids, SizeIs(3));
  const uint64_t medium = batched.pending_staging_ids[1];
  ASSERT_THAT(stream_->Synchronize(), IsOk());
  Upload(buffer.Binding(), 1500, 9);  // 2048 is the smallest that fits
  EXPECT_THAT(Stats(*stream_).pending_staging_ids, ElementsAre(medium));
  for (int i = 0; i < 7; ++i) Upload(buffer.Binding(), 1024, 11);
  EXPECT_THAT(Stats(*stream_).pending_staging_ids, SizeIs(8));
  // The ninth reclaims what has completed, draining the stream first if
  // nothing has: the bound holds and the new staging is pending.
  Upload(buffer.Binding(), 1024, 13);
  EXPECT_THAT(Stats(*stream_).pending_staging_ids,
              SizeIs(Le(kMaxPendingStagingsForTest)));
  ASSERT_THAT(stream_->Synchronize(), IsOk());
  EXPECT_THAT(ReadAll(*stream_, *buffer.Slice(0, 1024)), Each(13));
}

TEST_F(StagingTest, LargerUploadsReplaceSmallCompletedStaging) {
  Buffer buffer = Allocate(*stream_, 16 << 20);
  for (int i = 0; i < 8; ++i) Upload(buffer.Binding(), 1024, 7);
  ASSERT_THAT(stream_->Synchronize(), IsOk());
  EXPECT_THAT(Stats(*stream_).completed_staging_ids, SizeIs(8));

  Upload(buffer.Binding(), 1 << 20, 0x35);
  const StreamStats large = Stats(*stream_);
  ASSERT_THAT(large.pending_staging_ids, SizeIs(1));
  ASSERT_THAT(stream_->Synchronize(), IsOk());
  Upload(buffer.Binding(), 1 << 20, 0xa9);
  EXPECT_THAT(Stats(*stream_).pending_staging_ids,
              ElementsAre(large.pending_staging_ids[0]));
  EXPECT_THAT(ReadAll(*stream_, *buffer.Slice(0, 1 << 20)), Each(0xa9));
  ExpectPoolWithinBounds();

  // Larger packets also exercise the byte ceiling.
  for (int i = 0; i < 9; ++i) Upload(buffer.Binding(), 16 << 20, 0x63);
  EXPECT_THAT(ReadAll(*stream_, buffer.Binding()), Each(0x63));
  ExpectPoolWithinBounds();
  EXPECT_LE(Stats(*stream_).pending_staging_bytes, kStagingLimit);
}

TEST_F(StagingTest, TransferCacheReplaysAndForgetsFreedBuffers) {
  Buffer buffer = Allocate(*stream_, 4096);
  Buffer copy = Allocate(*stream_, 4096);
  for (int i = 0; i < 3; ++i) {
    ASSERT_THAT(stream_->Fill(buffer.Binding(), 0x42), IsOk());
    ASSERT_THAT(stream_->Copy(copy.Binding(), buffer.Binding()), IsOk());
  }
  const StreamStats cached = Stats(*stream_);
  EXPECT_EQ(cached.transfer_cache.entries, 2u);
  EXPECT_EQ(cached.transfer_cache.misses, 2u);
  EXPECT_EQ(cached.transfer_cache.hits, 4u);
  EXPECT_THAT(ReadAll(*stream_, copy.Binding()), Each(0x42));
  ASSERT_THAT(buffer.Free(), IsOk());
  EXPECT_EQ(Stats(*stream_).transfer_cache.entries, 0u);
}

TEST_F(StagingTest, TransferCacheHoldsAtMost128Entries) {
  Buffer buffer = Allocate(*stream_, 256);
  for (int i = 0; i < 200; ++i) {
    ASSERT_THAT(stream_->Fill(*buffer.Slice(0, 1 + i % 200), i & 0xff), IsOk());
  }
  const StreamStats stats = Stats(*stream_);
  EXPECT_EQ(stats.transfer_cache.entries, 128u);
  EXPECT_EQ(stats.transfer_cache.evictions, 72u);
}

TEST_F(StagingTest, FreedBuffersAreReusedByExactSizeOnceIdle) {
  Buffer first = Allocate(*stream_, 4096);
  const uint64_t id = first.allocation_id();
  ASSERT_THAT(stream_->Fill(first.Binding(), 1), IsOk());
  ASSERT_THAT(first.Free(), IsOk());
  ASSERT_THAT(stream_->Synchronize(), IsOk());
  Buffer other_size = Allocate(*stream_, 4097);
  EXPECT_NE(other_size.allocation_id(), id);
  Buffer same_size = Allocate(*stream_, 4096);
  EXPECT_EQ(same_size.allocation_id(), id);
  // Zeroed requests never take pooled memory.
  ASSERT_THAT(same_size.Free(), IsOk());
  auto zeroed = stream_->AllocateZeroed(4096);
  ASSERT_THAT(zeroed.status(), IsOk());
  EXPECT_NE(zeroed->allocation_id(), id);
  EXPECT_THAT(ReadAll(*stream_, zeroed->Binding()), Each(0));
}

TEST_F(StagingTest, AllocationPoolKeepsAtMost16Buffers) {
  std::vector<Buffer> buffers;
  for (int i = 0; i < 20; ++i) buffers.push_back(Allocate(*stream_, 1024));
  buffers.clear();  // frees all twenty
  const hrx::v1::GetStatusResponse status = QueryStatus(daemon_->socket_path());
  EXPECT_EQ(status.allocation_pool().entries(), 16u);
  EXPECT_EQ(status.allocation_pool().bytes(), 16u * 1024);
  EXPECT_EQ(status.allocation_pool().evictions(), 4u);
}

}  // namespace
}  // namespace hrx::testing
