// ExecutorLink against a fake executor on a socketpair: the test writes the
// executor's frames itself, so it can be as hostile as tenant code in an
// executor can be (it holds the link socket and may write anything).
#include "daemon/backend/remote/executor_link.h"

#include <sys/socket.h>

#include <thread>

#include "absl/synchronization/notification.h"
#include "daemon/backend/remote/frame_io.h"
#include "daemon/backend/remote/remote_backend.h"
#include "daemon/backend/remote/remote_queue.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hrx::backend::remote {
namespace {

namespace wire = hrx::executor::v1;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

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

// What hrxd sends an executor for a dispatch it launches again and again
// (as a stream's dispatch cache does): the definition once, then the id.
TEST_F(ExecutorLinkTest, ALaunchReplayedFromACacheCrossesTheLinkAsItsIdAlone) {
  // The fake executor answers every call OK and keeps every request.
  absl::Mutex mu;
  std::vector<wire::Request> seen;
  int forgotten = 0;
  std::thread executor([&] {
    FrameReader requests(executor_end_.get());
    std::string bytes;
    while (requests.Next(&bytes)) {
      wire::Request request;
      ASSERT_TRUE(request.ParseFromString(bytes));
      if (request.id() != 0) {
        wire::Event reply;
        reply.mutable_reply()->set_id(request.id());
        executor_->Send(reply);
      }
      absl::MutexLock lock(&mu);
      if (request.has_forget() &&
          request.forget().kind() == wire::Forget::KIND_DISPATCH) {
        ++forgotten;
      }
      seen.push_back(std::move(request));
    }
  });
  RemoteBackend backend(link_);
  auto memory = backend.Allocate(64, MemoryKind::kDevice, false);
  ASSERT_TRUE(memory.ok()) << memory.status();
  auto kernel = backend.LoadKernel("code", "scale");
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  auto queue = std::make_unique<RemoteQueue>(link_, 7);
  auto dispatch = std::make_shared<DispatchArgs>();
  dispatch->kernel = *kernel;
  dispatch->constants = "abcd";
  dispatch->bindings = {{*memory, 0, 64}};
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(queue->EnqueueDispatch(dispatch).ok());
  // A copy is another launch: defined once of its own.
  auto copy = std::make_shared<DispatchArgs>(*dispatch);
  ASSERT_TRUE(queue->EnqueueDispatch(copy).ok());
  // Once the launches completed and the cache let go, the executor is told
  // to forget both.
  wire::Event progress;
  progress.mutable_progress()->set_queue(7);
  progress.mutable_progress()->set_completed(4);
  executor_->Send(progress);
  ASSERT_TRUE(queue->Wait(4).ok());
  dispatch.reset();
  copy.reset();
  {
    absl::MutexLock lock(&mu);
    auto both = [&] { return forgotten == 2; };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&both), absl::Seconds(10)));
  }
  queue.reset();
  TearDown();
  executor.join();

  std::vector<uint64_t> defined, launched, forgot;
  for (const wire::Request& request : seen) {
    if (request.has_define_dispatch()) {
      defined.push_back(request.define_dispatch().dispatch());
      EXPECT_EQ(request.define_dispatch().args().constants(), "abcd");
      EXPECT_EQ(request.define_dispatch().args().bindings_size(), 1);
    }
    if (request.has_enqueue()) {
      EXPECT_FALSE(request.enqueue().has_dispatch()) << "sent whole";
      launched.push_back(request.enqueue().launch_dispatch().dispatch());
    }
    if (request.has_forget() &&
        request.forget().kind() == wire::Forget::KIND_DISPATCH) {
      forgot.push_back(request.forget().object());
    }
  }
  ASSERT_EQ(defined.size(), 2u);
  EXPECT_NE(defined[0], defined[1]);
  EXPECT_THAT(launched,
              ElementsAre(defined[0], defined[0], defined[0], defined[1]));
  EXPECT_THAT(forgot, UnorderedElementsAre(defined[0], defined[1]));
}

}  // namespace
}  // namespace hrx::backend::remote
