// ExecutorLink against a fake executor on a socketpair: the test writes the
// executor's frames itself, so it can be as hostile as tenant code in an
// executor can be (it holds the link socket and may write anything).
#include "daemon/backend/remote/executor_link.h"

#include <sys/socket.h>

#include <thread>

#include "absl/synchronization/notification.h"
#include "daemon/backend/remote/frame_io.h"
#include "daemon/backend/remote/remote_queue.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hrx::backend::remote {
namespace {

namespace wire = hrx::executor::v1;
using ::testing::HasSubstr;

class ExecutorLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int ends[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends), 0);
    executor_end_ = shared::UniqueFd(ends[1]);
    executor_ = std::make_unique<FrameWriter>(executor_end_.get());
    wire::Event hello;
    hello.mutable_hello()->set_pid(1);
    executor_->Send(hello);
    auto link =
        ExecutorLink::Open(shared::UniqueFd(ends[0]), "flood",
                           absl::Seconds(30), [] { return absl::OkStatus(); });
    ASSERT_TRUE(link.ok()) << link.status();
    link_ = *std::move(link);
  }
  void TearDown() override {
    // The executor goes (frames still queued to a link that stopped
    // reading are dropped): the link's reader ends and it can be destroyed.
    shutdown(executor_end_.get(), SHUT_RDWR);
    executor_.reset();
  }

  // A queue whose first completion holds the delivery thread (as one
  // waiting on the same executor would) until `release_` is notified:
  // events can only pile up behind it.
  std::unique_ptr<RemoteQueue> HoldDelivery() {
    auto queue = std::make_unique<RemoteQueue>(link_, 7);
    EXPECT_TRUE(queue
                    ->EnqueueHostCallback([this](absl::Status) {
                      entered_.Notify();
                      release_.WaitForNotification();
                    })
                    .ok());
    executor_->Send(Progress());
    entered_.WaitForNotification();
    return queue;
  }
  static wire::Event Progress() {
    wire::Event progress;
    progress.mutable_progress()->set_queue(7);
    progress.mutable_progress()->set_completed(1);
    return progress;
  }

  // Polls until the link is lost (at most ~10 s).
  absl::Status AwaitLoss() {
    for (int i = 0; i < 1000 && link_->lost().ok(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return link_->lost();
  }

  shared::UniqueFd executor_end_;
  std::unique_ptr<FrameWriter> executor_;
  std::shared_ptr<ExecutorLink> link_;
  absl::Notification entered_, release_;
};

TEST_F(ExecutorLinkTest, AFloodOfEventsLosesTheLinkInsteadOfGrowingHrxd) {
  auto queue = HoldDelivery();
  // Forged events, one more than hrxd holds.
  const wire::Event progress = Progress();
  for (size_t i = 0; i <= kMaxQueuedEvents; ++i) executor_->Send(progress);
  const absl::Status lost = AwaitLoss();
  EXPECT_EQ(lost.code(), absl::StatusCode::kUnavailable) << lost;
  EXPECT_THAT(lost.message(),
              HasSubstr("sent events faster than hrxd delivers them"));
  release_.Notify();
  queue.reset();  // its pending work ended with the loss
}

TEST_F(ExecutorLinkTest, BigForgedEventsAreBoundedByBytesToo) {
  auto queue = HoldDelivery();
  // Read data for a fence nobody reads: 32 MiB a frame, past 256 MiB.
  wire::Event big;
  big.mutable_read_data()->set_queue(7);
  big.mutable_read_data()->set_fence(99);
  big.mutable_read_data()->set_data(std::string(size_t{32} << 20, 'x'));
  for (int i = 0; i < 9; ++i) executor_->Send(big);
  const absl::Status lost = AwaitLoss();
  EXPECT_THAT(lost.message(), HasSubstr("bytes waiting"));
  release_.Notify();
  queue.reset();
}

TEST_F(ExecutorLinkTest, AnUnansweredPingMarksTheExecutorUnresponsive) {
  const absl::Time start = absl::Now();
  link_->Ping(start, absl::Milliseconds(250));
  EXPECT_FALSE(link_->Unresponsive(start + absl::Seconds(1), absl::Seconds(2)));
  EXPECT_TRUE(link_->Unresponsive(start + absl::Seconds(3), absl::Seconds(2)));
  // An answer clears it (the fake executor answers the ping's id).
  FrameReader requests(executor_end_.get());
  std::string bytes;
  ASSERT_TRUE(requests.Next(&bytes));
  wire::Request ping;
  ASSERT_TRUE(ping.ParseFromString(bytes));
  ASSERT_TRUE(ping.has_ping());
  wire::Event pong;
  pong.mutable_reply()->set_id(ping.id());
  executor_->Send(pong);
  for (int i = 0; i < 500 && link_->Unresponsive(start + absl::Seconds(3),
                                                 absl::Seconds(2));
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(link_->Unresponsive(start + absl::Seconds(3), absl::Seconds(2)));
}

}  // namespace
}  // namespace hrx::backend::remote
