// Stream API parity, ordering side: the queue pool, events across streams,
// idle polling, deferred refusals, drain on close and scratch pools,
// against a real daemon.
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <vector>

#include "gmock/gmock.h"
#include "tests/client_fixture.h"
#include "tests/raw_session.h"

namespace hrx::testing {
namespace {

using ::hrx::shared::IsOk;
using ::hrx::shared::StatusIs;
using ::testing::AllOf;
using ::testing::Each;
using ::testing::HasSubstr;

class StreamOrderingTest : public ClientFixture {};

TEST_F(StreamOrderingTest, QueueCountIsSettableOnlyBeforeTheFirstStream) {
  // The fixture's stream exists, so the pool is busy.
  EXPECT_THAT(device_->SetStreamQueueCount(8), IsOk());  // the current count
  EXPECT_THAT(device_->SetStreamQueueCount(4),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("queue_pool_busy"), HasSubstr("Fix:"))));
  EXPECT_EQ(*device_->StreamQueueCount(), 8u);
}

TEST(QueuePoolTest, AFreshPoolTakesANewCountAndAssignsRoundRobin) {
  auto daemon = TestDaemon::Start();
  ASSERT_THAT(daemon.status(), IsOk());
  auto client = Client::Connect((*daemon)->socket_path());
  ASSERT_THAT(client.status(), IsOk());
  auto device = (*client)->OpenDevice(0);
  ASSERT_THAT(device.status(), IsOk());
  EXPECT_THAT(device->SetStreamQueueCount(0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("bad_queue_count")));
  EXPECT_THAT(device->SetStreamQueueCount(65),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("bad_queue_count")));
  ASSERT_THAT(device->SetStreamQueueCount(3), IsOk());
  EXPECT_THAT(device->SetStreamQueueCount(3), IsOk());
  std::vector<Stream> streams;
  for (int i = 0; i < 7; ++i) streams.push_back(*device->CreateStream());
  for (int i = 0; i < 7; ++i) EXPECT_EQ(streams[i].queue(), i % 3u) << i;
  EXPECT_EQ(*device->StreamQueueCount(), 3u);
}

TEST_F(StreamOrderingTest, AnEventOrdersAnotherStreamAfterTheRecordedWork) {
  Stream other = NewStream();
  Buffer buffer = Allocate(*stream_, 4 << 20);
  ASSERT_THAT(stream_->Fill(buffer.Binding(), 0x5a), IsOk());
  auto ready = stream_->RecordEvent();
  ASSERT_THAT(ready.status(), IsOk());
  ASSERT_THAT(other.WaitEvent(*ready), IsOk());
  // A foreign stream may use the allocation once ordered after the event.
  EXPECT_THAT(ReadAll(other, *buffer.Slice(0, 16)), Each(0x5a));
  EXPECT_THAT(ready->Synchronize(), IsOk());
  EXPECT_TRUE(Yes(ready->IsComplete()));
}

TEST_F(StreamOrderingTest, EventsOfAnotherClientAreRefused) {
  auto other_client = Client::Connect(daemon_->socket_path());
  ASSERT_THAT(other_client.status(), IsOk());
  auto other_stream = (*other_client)->OpenDevice(0)->CreateStream();
  ASSERT_THAT(other_stream.status(), IsOk());
  auto foreign = other_stream->RecordEvent();
  ASSERT_THAT(foreign.status(), IsOk());
  EXPECT_THAT(
      stream_->WaitEvent(*foreign),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("foreign_event")));
}

TEST_F(StreamOrderingTest, UnknownEventsAreRefusedByTheDaemon) {
  RawSession raw(daemon_->socket_path());
  const hrx::v1::Handle stream = *raw.CreateStream();
  hrx::v1::SubmitRequest request;
  *request.mutable_stream() = stream;
  request.add_commands()->mutable_wait_event()->set_event(12345);
  EXPECT_THAT(raw.Submit(request),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("unknown_event"),
                             HasSubstr("submit command 1 of 1"))));
  hrx::v1::SubmitRequest twice;
  *twice.mutable_stream() = stream;
  twice.add_commands()->mutable_record_event()->set_event(7);
  twice.add_commands()->mutable_record_event()->set_event(7);
  EXPECT_THAT(raw.Submit(twice),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("event_id_in_use"),
                             HasSubstr("submit command 2 of 2"))));
}

TEST_F(StreamOrderingTest, IsIdlePollsWithoutWaitingAndTurnsTrueOnceRun) {
  Buffer buffer = Allocate(*stream_, 64 << 20);
  for (int i = 0; i < 16; ++i) {
    ASSERT_THAT(stream_->Fill(buffer.Binding(), i), IsOk());
  }
  ASSERT_THAT(stream_->IsIdle().status(), IsOk());
  ASSERT_THAT(stream_->Synchronize(), IsOk());
  EXPECT_TRUE(Yes(stream_->IsIdle()));
}

// Each blocking read through the shared staging region is a batch (the copy
// into the region) followed at once by a sync: the sync must never overtake
// the batch. (It once could, when the sync's read was started by an earlier
// request's completion while the batch was still being enqueued; the
// stale region then showed the previous bytes.)
TEST_F(StreamOrderingTest, ASyncNeverOvertakesTheBatchBeforeIt) {
  constexpr uint64_t kBytes = 256 << 10;  // above the shared threshold
  Buffer buffer = Allocate(*stream_, kBytes);
  std::vector<uint8_t> bytes(kBytes);
  for (int round = 0; round < 300; ++round) {
    const uint8_t value = static_cast<uint8_t>(round * 7 + 1);
    ASSERT_THAT(stream_->Fill(buffer.Binding(), value), IsOk());
    ASSERT_THAT(stream_->ReadBlocking(buffer.Binding(), bytes), IsOk());
    ASSERT_EQ(bytes.front(), value) << "round " << round;
    ASSERT_EQ(bytes.back(), value) << "round " << round;
  }
}

class SingleQueueTest : public ClientFixture {
  std::vector<std::string> DaemonFlags() const override {
    return {"--queue_count=1"};
  }
};

TEST_F(SingleQueueTest, ObservingAStreamDoesNotWaitForOtherStreamsWork) {
  // One queue, so both streams share it: the observer's poll must answer
  // from its own published work, not wait for the other stream's.
  Stream observer = NewStream();
  ASSERT_EQ(observer.queue(), stream_->queue());
  Buffer big = Allocate(*stream_, 64 << 20);
  for (int i = 0; i < 32; ++i) {
    ASSERT_THAT(stream_->Fill(big.Binding(), i), IsOk());
  }
  ASSERT_THAT(stream_->Flush(), IsOk());  // published: ~2 GiB of fills queued
  // Also work the client holds back (unpublished) on the busy stream.
  ASSERT_THAT(stream_->Fill(big.Binding(), 1), IsOk());
  EXPECT_TRUE(Yes(observer.IsIdle()));
  EXPECT_THAT(stream_->Synchronize(), IsOk());
}

TEST_F(StreamOrderingTest,
       ARefusedBatchIsReportedAtTheNextSyncPointWithItsPosition) {
  Buffer keep = Allocate(*stream_, 64);
  Buffer gone = Allocate(*stream_, 64);
  const View stale = gone.Binding();
  ASSERT_THAT(gone.Free(), IsOk());
  ASSERT_THAT(stream_->Fill(keep.Binding(), 0x11), IsOk());
  ASSERT_THAT(stream_->Fill(stale, 0x22), IsOk());  // refused by the daemon
  EXPECT_THAT(stream_->Synchronize(),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("stale_handle"),
                             HasSubstr("submit command 2 of 2 (fill dst)"),
                             HasSubstr("Fix:"))));
  // Nothing of the refused batch ran, and the stream carries on.
  EXPECT_THAT(ReadAll(*stream_, keep.Binding()), Each(0));
  ASSERT_THAT(stream_->Fill(keep.Binding(), 0x33), IsOk());
  EXPECT_THAT(ReadAll(*stream_, keep.Binding()), Each(0x33));
}

TEST_F(StreamOrderingTest, ClosingAStreamDrainsItsWork) {
  Buffer buffer = Allocate(*stream_, 16 << 20);
  {
    Stream short_lived = NewStream();
    ASSERT_THAT(short_lived.Fill(buffer.Binding(), 0x7e), IsOk());
  }  // destroyed with its fill unsent: sent, then drained
  EXPECT_THAT(ReadAll(*stream_, *buffer.Slice((16 << 20) - 8, 8)), Each(0x7e));
}

TEST_F(StreamOrderingTest, AScratchPoolOnlyAcceptsBuffersOfItsOwnStream) {
  Stream other = NewStream();
  auto scratch = other.Scratch(4096);
  ASSERT_THAT(scratch.status(), IsOk());
  const uint64_t reused_id = scratch->allocation_id();
  ASSERT_THAT(other.Recycle(*std::move(scratch)), IsOk());
  EXPECT_EQ(other.scratch_bytes(), 4096u);

  Buffer owned = Allocate(*stream_, 4096);
  EXPECT_THAT(other.Recycle(std::move(owned)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("scratch_foreign_stream")));
  EXPECT_EQ(stream_->scratch_bytes(), 0u);
  EXPECT_EQ(other.scratch_bytes(), 4096u);
  auto again = other.Scratch(4096);
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_EQ(again->allocation_id(), reused_id);
  EXPECT_EQ(other.scratch_bytes(), 0u);
}

TEST_F(StreamOrderingTest, ScratchReusesUpToTwiceTheSizeAndEvictsLargestFirst) {
  for (uint64_t size : {1024u, 2048u, 4096u}) {
    ASSERT_THAT(stream_->Recycle(Allocate(*stream_, size)), IsOk());
  }
  EXPECT_EQ(stream_->scratch_bytes(), 7168u);
  stream_->SetScratchLimit(4000);  // evicts the 4096 first
  EXPECT_EQ(stream_->scratch_bytes(), 3072u);
  auto fits = stream_->Scratch(1500);  // 2048 is within 2x
  ASSERT_THAT(fits.status(), IsOk());
  EXPECT_EQ(fits->bytes(), 2048u);
  auto fresh = stream_->Scratch(400);  // 1024 is more than 2x: allocate
  ASSERT_THAT(fresh.status(), IsOk());
  EXPECT_EQ(fresh->bytes(), 400u);
  // Past the limit, a recycled buffer is simply freed.
  stream_->SetScratchLimit(1024);
  ASSERT_THAT(stream_->Recycle(*std::move(fits)), IsOk());
  EXPECT_EQ(stream_->scratch_bytes(), 1024u);
}

TEST_F(StreamOrderingTest, SharedAllocationsAreZeroedAndUsableOnTheStream) {
  auto shared = stream_->AllocateShared(8192);
  ASSERT_THAT(shared.status(), IsOk());
  EXPECT_THAT(ReadAll(*stream_, shared->Binding()), Each(0));
  ASSERT_THAT(stream_->Fill(*shared->Slice(4096, 4096), 0xc3), IsOk());
  EXPECT_THAT(ReadAll(*stream_, *shared->Slice(4096, 4096)), Each(0xc3));
}

class SmallBudgetTest : public ClientFixture {
 protected:
  std::vector<std::string> DaemonFlags() const override {
    const std::string config =
        "/tmp/hrx-small-budget-" + std::to_string(getpid()) + ".conf";
    std::ofstream(config)
        << "tenants { name: \"ops\" uids: 0 role: ROLE_ADMIN budget { "
           "inflight_commands: 100 shared_bytes: 4096 } }\n";
    return {"--config=" + config};
  }
};

TEST_F(SmallBudgetTest, InflightCommandsAreChargedPerBatchUntilItCompletes) {
  Buffer buffer = Allocate(*stream_, 64);
  for (int i = 0; i < 150; ++i)
    ASSERT_THAT(stream_->Fill(buffer.Binding(), 1), IsOk());
  EXPECT_THAT(stream_->Synchronize(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("budget_exhausted: submit 150 commands"),
                             HasSubstr("inflight_commands budget of 100"))));
  for (int i = 0; i < 100; ++i)
    ASSERT_THAT(stream_->Fill(buffer.Binding(), 2), IsOk());
  EXPECT_THAT(stream_->Synchronize(), IsOk());
  EXPECT_THAT(ReadAll(*stream_, buffer.Binding()), Each(2));
}

TEST_F(SmallBudgetTest, SharedBytesAreBudgetedAndLargeTransfersFallBackInline) {
  EXPECT_THAT(stream_->AllocateShared(4097),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("shared_bytes budget")));
  auto fits = stream_->AllocateShared(4096);
  EXPECT_THAT(fits.status(), IsOk());
  // The shared staging region (16 MiB) cannot be had: transfers stay inline.
  std::vector<uint8_t> data(1 << 20);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<uint8_t>(i * 5);
  Buffer buffer = Allocate(*stream_, data.size());
  ASSERT_THAT(stream_->Upload(buffer.Binding(), data), IsOk());
  EXPECT_TRUE(ReadAll(*stream_, buffer.Binding()) == data);
}

// The session's allocation pool hands memory out again only once no queued
// command holds it: a freed buffer's fill still waiting on one stream must
// not land in a new allocation made on another.
TEST_F(StreamOrderingTest, FreedMemoryIsNotReusedWhileQueuedWorkStillWritesIt) {
  Stream held = NewStream();
  Stream other = NewStream();
  ASSERT_NE(held.queue(), other.queue());
  auto flag = held.AllocateZeroed(1);
  ASSERT_THAT(flag.status(), IsOk());
  HoldQueue(held, *flag);
  // Queued behind the gate: this fill runs only once the flag is set.
  auto freed = held.Allocate(1 << 16);
  ASSERT_THAT(freed.status(), IsOk());
  ASSERT_THAT(held.Fill(freed->Binding(), 0x07), IsOk());
  ASSERT_THAT(freed->Free(), IsOk());

  auto fresh = other.Allocate(1 << 16);
  ASSERT_THAT(fresh.status(), IsOk());
  ASSERT_THAT(other.Fill(fresh->Binding(), 0x11), IsOk());
  ASSERT_THAT(other.Synchronize(), IsOk());
  ASSERT_THAT(other.Fill(flag->Binding(), 1), IsOk());
  ASSERT_THAT(other.Synchronize(), IsOk());
  ASSERT_THAT(held.Synchronize(), IsOk());  // the queued fill has run
  EXPECT_THAT(ReadAll(other, fresh->Binding()), Each(0x11))
      << "the freed buffer's queued fill wrote into a new allocation";
}

}  // namespace
}  // namespace hrx::testing
