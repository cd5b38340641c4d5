// ExecutorLink against a fake executor on a socketpair: the test writes the
// executor's frames itself, so it can be as hostile as tenant code in an
// executor can be (it holds the link socket and may write anything).
#include "daemon/backend/remote/executor_link.h"

#include <sys/socket.h>

#include <chrono>
#include <map>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "daemon/backend/remote/frame_io.h"
#include "daemon/backend/remote/remote_backend.h"
#include "daemon/backend/remote/remote_queue.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/status_matchers.h"

namespace hrx::backend::remote {
namespace {

namespace wire = hrx::executor::v1;
using ::hrx::shared::StatusIs;
using ::testing::AllOf;
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
    auto link = ExecutorLink::Open(shared::UniqueFd(ends[0]), "flood",
                                   absl::Seconds(30), absl::Seconds(30),
                                   [] { return absl::OkStatus(); });
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
  EXPECT_THAT(std::string(lost.message()), HasSubstr("bytes waiting")) << lost;
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

TEST_F(ExecutorLinkTest, AHelloIsAwaitedForTheStartLimitNotTheCallLimit) {
  // A start (the runtime's device context) may take longer than a call may:
  // the hello arrives 300 ms in, past a 50 ms call limit, and is taken.
  int ends[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends), 0);
  shared::UniqueFd slow_end(ends[1]);
  std::thread slow_start([&slow_end] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    FrameWriter executor(slow_end.get());
    wire::Event hello;
    hello.mutable_hello()->set_pid(1);
    executor.Send(hello);
  });
  auto started = ExecutorLink::Open(shared::UniqueFd(ends[0]), "slow",
                                    absl::Seconds(5), absl::Milliseconds(50),
                                    [] { return absl::OkStatus(); });
  slow_start.join();
  EXPECT_TRUE(started.ok()) << started.status();

  // Past the start limit the executor is killed (its cause asked) and the
  // loss names the limit.
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends), 0);
  shared::UniqueFd silent_end(ends[1]);
  int causes = 0;
  auto silent =
      ExecutorLink::Open(shared::UniqueFd(ends[0]), "silent",
                         absl::Milliseconds(200), absl::Seconds(5), [&causes] {
                           ++causes;
                           return absl::OkStatus();
                         });
  EXPECT_THAT(silent.status(),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("executor_lost"),
                             HasSubstr("did not start within 200ms"))));
  EXPECT_EQ(causes, 1);
}

// A call the executor never answers, made under a lock that a completion
// callback needs, while the executor reports that completion: the call
// times out and loses the link, the callback then gets its lock, and the
// queue hears of the loss. (Losing the link used to wait for the delivery
// thread, which waited for the lock: neither ever moved.)
TEST_F(ExecutorLinkTest, ACallThatTimesOutUnderALockACallbackNeedsEndsNoOne) {
  int ends[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends), 0);
  shared::UniqueFd executor_end(ends[1]);
  FrameWriter executor(executor_end.get());
  wire::Event hello;
  hello.mutable_hello()->set_pid(1);
  executor.Send(hello);
  auto opened = ExecutorLink::Open(shared::UniqueFd(ends[0]), "silent",
                                   absl::Seconds(30), absl::Milliseconds(300),
                                   [] { return absl::OkStatus(); });
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::shared_ptr<ExecutorLink> link = *std::move(opened);
  auto queue = std::make_unique<RemoteQueue>(link, 7);

  absl::Mutex session_mu;  // as a session's lock
  absl::Notification callback_waiting, callback_ran;
  absl::Status callback_status;
  absl::ReleasableMutexLock session_lock(&session_mu);
  ASSERT_TRUE(queue
                  ->EnqueueHostCallback([&](absl::Status status) {
                    callback_waiting.Notify();
                    absl::MutexLock lock(&session_mu);
                    callback_status = status;
                    callback_ran.Notify();
                  })
                  .ok());
  // Work the executor never completes: it ends with the loss, which the
  // delivery thread announces once the callback above lets it go.
  absl::StatusOr<Fence> outstanding =
      queue->EnqueueHostCallback([](absl::Status) {});
  ASSERT_TRUE(outstanding.ok()) << outstanding.status();
  wire::Event progress;
  progress.mutable_progress()->set_queue(7);
  progress.mutable_progress()->set_completed(1);
  executor.Send(progress);
  callback_waiting.WaitForNotification();
  // Never answered (the executor reads nothing): lost after 300 ms.
  wire::Request allocate;
  allocate.mutable_allocate()->set_memory(1);
  allocate.mutable_allocate()->set_bytes(64);
  const absl::Status call = link->Call(allocate).status();
  session_lock.Release();
  EXPECT_EQ(call.code(), absl::StatusCode::kUnavailable) << call;
  EXPECT_THAT(call.message(), HasSubstr("did not answer"));
  ASSERT_TRUE(callback_ran.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(callback_status.ok()) << callback_status;  // it had completed
  // The executor is silent but still connected: only the announcement can
  // end this fence.
  const absl::Status ended = queue->Wait(*outstanding);
  EXPECT_EQ(ended.code(), absl::StatusCode::kUnavailable) << ended;
  EXPECT_THAT(ended.message(), HasSubstr("did not answer"));
  // Work asked for after the loss is refused at once.
  EXPECT_EQ(queue->EnqueueHostCallback([](absl::Status) {}).status().code(),
            absl::StatusCode::kUnavailable);
  shutdown(executor_end.get(), SHUT_RDWR);
  queue.reset();
}

// What hrxd sends an executor for a dispatch a cache keeps, launched again
// and again from two queues: the definition once, ahead of every launch,
// then the id alone; the forget after the last launch. A dispatch no cache
// keeps goes whole, once.
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
  auto first = std::make_unique<RemoteQueue>(link_, 7);
  auto second = std::make_unique<RemoteQueue>(link_, 8);
  auto dispatch = std::make_shared<DispatchArgs>();
  dispatch->kernel = *kernel;
  dispatch->constants = "abcd";
  dispatch->bindings = {{*memory, 0, 64}};
  dispatch->cached = true;
  // A copy is another launch: defined once of its own. One no cache keeps
  // is sent whole.
  auto copy = std::make_shared<DispatchArgs>(*dispatch);
  copy->cached = true;
  auto once = std::make_shared<DispatchArgs>(*dispatch);
  once->cached = false;
  std::thread other([&] {
    for (int i = 0; i < 50; ++i) {
      ASSERT_TRUE(second->EnqueueDispatch(dispatch).ok());
    }
  });
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(first->EnqueueDispatch(dispatch).ok());
  }
  other.join();
  ASSERT_TRUE(first->EnqueueDispatch(copy).ok());
  ASSERT_TRUE(first->EnqueueDispatch(once).ok());
  // Once the launches completed and the cache let go, the executor is told
  // to forget both definitions.
  for (uint64_t queue : {7, 8}) {
    wire::Event progress;
    progress.mutable_progress()->set_queue(queue);
    progress.mutable_progress()->set_completed(queue == 7 ? 52 : 50);
    executor_->Send(progress);
  }
  ASSERT_TRUE(first->Wait(52).ok());
  ASSERT_TRUE(second->Wait(50).ok());
  dispatch.reset();
  copy.reset();
  once.reset();
  {
    absl::MutexLock lock(&mu);
    auto both = [&] { return forgotten == 2; };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&both), absl::Seconds(10)));
  }
  first.reset();
  second.reset();
  TearDown();
  executor.join();

  // Each definition's position in what the executor read, and those of the
  // launches and the forget naming it.
  std::map<uint64_t, size_t> defined_at, forgotten_at;
  std::map<uint64_t, std::vector<size_t>> launched_at;
  int whole = 0;
  for (size_t i = 0; i < seen.size(); ++i) {
    const wire::Request& request = seen[i];
    if (request.has_define_dispatch()) {
      EXPECT_EQ(request.define_dispatch().args().constants(), "abcd");
      EXPECT_EQ(request.define_dispatch().args().bindings_size(), 1);
      defined_at[request.define_dispatch().dispatch()] = i;
    }
    if (request.has_enqueue() && request.enqueue().has_dispatch()) ++whole;
    if (request.has_enqueue() && request.enqueue().has_launch_dispatch()) {
      launched_at[request.enqueue().launch_dispatch().dispatch()].push_back(i);
    }
    if (request.has_forget() &&
        request.forget().kind() == wire::Forget::KIND_DISPATCH) {
      forgotten_at[request.forget().object()] = i;
    }
  }
  EXPECT_EQ(whole, 1);  // `once`
  ASSERT_EQ(defined_at.size(), 2u);
  ASSERT_EQ(forgotten_at.size(), 2u);
  std::vector<size_t> launch_counts;
  for (const auto& [id, at] : defined_at) {
    const std::vector<size_t>& launches = launched_at[id];
    ASSERT_FALSE(launches.empty());
    launch_counts.push_back(launches.size());
    EXPECT_LT(at, launches.front()) << "launched before its definition";
    ASSERT_TRUE(forgotten_at.contains(id));
    EXPECT_GT(forgotten_at[id], launches.back()) << "forgotten while in use";
  }
  EXPECT_THAT(launch_counts, UnorderedElementsAre(100, 1));
}

}  // namespace
}  // namespace hrx::backend::remote
