// StreamConversation against a scripted transport and engine: the protocol's
// order, flow control and ending, without a daemon. (The integration suites
// run it against hrxd's core on both transports.)
#include "daemon/stream/stream_conversation.h"

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "shared/refusal.h"
#include "shared/status_matchers.h"

namespace hrx::daemon {
namespace {

using ::hrx::shared::IsOk;

constexpr uint64_t kStream = 7;
constexpr uint32_t kQueue = 3;

// Keeps every callback for the test to run when it chooses.
class ScriptedEngine final : public StreamEngine {
 public:
  absl::Status SessionStatus() override { return absl::OkStatus(); }
  void CountRefusal(const absl::Status& refusal) override {
    refusals.push_back(refusal);
  }
  absl::StatusOr<uint64_t> OpenStream(
      hrx::v1::CreateStreamResponse* opened) override {
    if (!open_result.ok()) return open_result;
    opened->set_queue(kQueue);
    return kStream;
  }
  void DestroyStream(uint64_t stream, StreamDone done) override {
    destroyed.push_back(stream);
    destroy_done.push_back(std::move(done));
  }
  void DeferRefusal(uint64_t stream, absl::Status refusal) override {
    EXPECT_EQ(stream, kStream);
    deferred.push_back(std::move(refusal));
  }
  void Submit(
      uint64_t stream,
      const google::protobuf::RepeatedPtrField<hrx::v1::Command>& commands,
      BatchDone done) override {
    EXPECT_EQ(stream, kStream);
    batch_sizes.push_back(commands.size());
    submits.push_back(std::move(done));
  }
  void Synchronize(uint64_t stream, StreamDone done) override {
    EXPECT_EQ(stream, kStream);
    syncs.push_back(std::move(done));
  }
  absl::StatusOr<StreamRead> PrepareRead(const hrx::v1::View& src) override {
    if (src.length() > read_limit) {
      return Refusal(Reason::kBudgetExhausted,
                     "read: over the test's limit. Fix: read less.");
    }
    StreamRead read;
    read.length = src.length();
    read.reply_bytes = src.length();
    auto hold = std::make_shared<int>(0);
    holds.push_back(hold);
    read.hold = hold;
    return read;
  }
  void Read(uint64_t stream, const StreamRead& read, std::string* out,
            StreamDone done) override {
    EXPECT_EQ(stream, kStream);
    reads.push_back({read.length, out, std::move(done)});
  }
  bool Progress(uint64_t stream) override {
    EXPECT_EQ(stream, kStream);
    return false;
  }
  absl::StatusOr<bool> Poll(uint64_t stream) override {
    EXPECT_EQ(stream, kStream);
    return poll_result;
  }
  void LaunchProfiled(uint64_t stream, const hrx::v1::Handle& exec,
                      hrx::v1::Profile* profile, StreamDone done) override {
    if (exec.object() != 0) {  // the test's way to name a bad exec
      done(Refusal(Reason::kForgedHandle,
                   "launch profiled: forged. Fix: "
                   "use the handle you were given."));
      return;
    }
    profile->add_nodes()->set_nanoseconds(5);
    done(absl::OkStatus());
  }

  struct PendingRead {
    uint64_t length;
    std::string* out;
    StreamDone done;
  };

  absl::Status open_result = absl::OkStatus();
  absl::StatusOr<bool> poll_result = true;
  uint64_t read_limit = ~uint64_t{0};
  std::vector<absl::Status> refusals;
  std::vector<absl::Status> deferred;
  std::vector<uint64_t> destroyed;
  std::vector<StreamDone> destroy_done;
  std::vector<int> batch_sizes;
  std::vector<BatchDone> submits;
  std::vector<StreamDone> syncs;
  std::vector<PendingRead> reads;
  std::vector<std::weak_ptr<int>> holds;
};

// Hands requests over only when the conversation asks for one, as both real
// transports do, and takes replies at once unless told to hold them.
class ScriptedTransport final : public StreamConversation {
 public:
  explicit ScriptedTransport(std::shared_ptr<ScriptedEngine> engine) {
    Start(std::shared_ptr<StreamEngine>(std::move(engine)));
  }
  explicit ScriptedTransport(absl::Status refused) { Start(refused); }

  // Delivers the next queued request if one was asked for; false if not.
  bool Deliver() {
    if (!read_wanted || script.empty()) return false;
    read_wanted = false;
    auto [message, parsed] = std::move(script.front());
    script.pop_front();
    request() = std::move(message);
    OnRequest(parsed);
    return true;
  }
  void Push(hrx::v1::StreamRequest message,
            absl::Status parsed = absl::OkStatus()) {
    message.set_token(++last_token);
    script.emplace_back(std::move(message), std::move(parsed));
  }
  void PushOpen() {
    hrx::v1::StreamRequest message;
    message.mutable_open();
    Push(std::move(message));
  }
  void PushBatch(int commands, bool ack) {
    hrx::v1::StreamRequest message;
    for (int i = 0; i < commands; ++i) {
      message.mutable_batch()->add_commands()->mutable_fill();
    }
    message.mutable_batch()->set_ack(ack);
    Push(std::move(message));
  }
  void PushSync() {
    hrx::v1::StreamRequest message;
    message.mutable_sync();
    Push(std::move(message));
  }
  void PushRead(uint64_t length) {
    hrx::v1::StreamRequest message;
    message.mutable_read()->set_length(length);
    Push(std::move(message));
  }
  void DeliverAll() {
    while (Deliver()) {
    }
  }
  void RequestsEnd() { OnRequestsEnded(); }
  void Break(const absl::Status& why) { OnBroken(why); }
  void LeaveStream() { LeaveStreamAtEnd(); }
  void TakeHeldWrite() { OnWritten(true); }

  bool read_wanted = false;
  bool hold_writes = false;
  uint64_t last_token = 0;
  std::deque<std::pair<hrx::v1::StreamRequest, absl::Status>> script;
  std::vector<hrx::v1::StreamReply> replies;
  std::optional<absl::Status> ended;
  int ends = 0;

 private:
  void ReadNext() override { read_wanted = true; }
  bool WriteNext(const hrx::v1::StreamReply& reply) override {
    replies.push_back(reply);
    return !hold_writes;
  }
  void End(const absl::Status& status) override {
    ended = status;
    ++ends;
  }
};

struct Conversation {
  std::shared_ptr<ScriptedEngine> engine = std::make_shared<ScriptedEngine>();
  ScriptedTransport transport{engine};
};

TEST(StreamConversationTest, ABatchHoldsReadingUntilItIsEnqueued) {
  Conversation c;
  c.transport.PushOpen();
  c.transport.PushBatch(2, /*ack=*/true);
  c.transport.PushSync();
  c.transport.DeliverAll();

  ASSERT_EQ(c.transport.replies.size(), 1u);
  EXPECT_EQ(c.transport.replies[0].opened().queue(), kQueue);
  ASSERT_EQ(c.engine->submits.size(), 1u);
  EXPECT_EQ(c.engine->batch_sizes[0], 2);
  // Suspended (say at the staging bound): the sync behind it is not read.
  EXPECT_FALSE(c.transport.read_wanted);
  EXPECT_TRUE(c.engine->syncs.empty());

  c.engine->submits[0](size_t{2});
  ASSERT_EQ(c.transport.replies.size(), 2u);
  EXPECT_EQ(c.transport.replies[1].token(), 2u);
  EXPECT_EQ(c.transport.replies[1].enqueued(), 2u);
  c.transport.DeliverAll();
  EXPECT_EQ(c.engine->syncs.size(), 1u);
}

TEST(StreamConversationTest, ABatchTheEngineCouldNotTakeIsAckedAndDeferred) {
  Conversation c;
  c.transport.PushOpen();
  c.transport.PushBatch(1, /*ack=*/true);
  c.transport.DeliverAll();
  ASSERT_EQ(c.engine->submits.size(), 1u);

  c.engine->submits[0](
      Refusal(Reason::kStreamBusy, "submit: too much parked. Fix: wait."));
  ASSERT_EQ(c.engine->deferred.size(), 1u);
  EXPECT_EQ(ReasonOf(c.engine->deferred[0]), Reason::kStreamBusy);
  // The acknowledgement still comes, with nothing enqueued and no error:
  // the refusal belongs to the next sync point.
  ASSERT_EQ(c.transport.replies.size(), 2u);
  EXPECT_EQ(c.transport.replies[1].code(), 0);
  EXPECT_EQ(c.transport.replies[1].enqueued(), 0u);
  EXPECT_TRUE(c.transport.read_wanted);
}

TEST(StreamConversationTest, RepliesOwedPastTheBoundStopReading) {
  Conversation c;
  c.transport.PushOpen();
  for (int i = 0; i < kMaxPendingReplies + 1; ++i) c.transport.PushSync();
  c.transport.DeliverAll();

  EXPECT_EQ(c.engine->syncs.size(), static_cast<size_t>(kMaxPendingReplies));
  EXPECT_FALSE(c.transport.read_wanted);
  EXPECT_EQ(c.transport.script.size(), 1u);

  c.engine->syncs[0](absl::OkStatus());
  EXPECT_TRUE(c.transport.read_wanted);
  c.transport.DeliverAll();
  EXPECT_EQ(c.engine->syncs.size(),
            static_cast<size_t>(kMaxPendingReplies) + 1);
}

TEST(StreamConversationTest, ReadDataOwedPastTheByteBoundStopsReading) {
  Conversation c;
  c.transport.hold_writes = true;  // the client does not take its replies
  c.transport.PushOpen();
  c.transport.PushRead(kMaxPendingReplyBytes);
  c.transport.PushSync();
  c.transport.Deliver();
  c.transport.TakeHeldWrite();  // the open's reply
  c.transport.DeliverAll();

  ASSERT_EQ(c.engine->reads.size(), 1u);
  EXPECT_FALSE(c.transport.read_wanted) << "a 16 MiB read is owed";
  ScriptedEngine::PendingRead& read = c.engine->reads[0];
  read.out->assign(read.length, 'x');
  read.done(absl::OkStatus());
  // Sent but not taken: the bytes are still unsent, and the reply's budget
  // hold lives until the client takes it.
  EXPECT_FALSE(c.transport.read_wanted);
  ASSERT_EQ(c.engine->holds.size(), 1u);
  EXPECT_FALSE(c.engine->holds[0].expired());

  c.transport.TakeHeldWrite();
  EXPECT_TRUE(c.engine->holds[0].expired());
  EXPECT_TRUE(c.transport.read_wanted);
  ASSERT_EQ(c.transport.replies.size(), 2u);
  EXPECT_EQ(c.transport.replies[1].data().size(), kMaxPendingReplyBytes);
}

TEST(StreamConversationTest, ARefusedReadIsAnsweredAtOnceAndCounted) {
  Conversation c;
  c.engine->read_limit = 10;
  c.transport.PushOpen();
  c.transport.PushRead(11);
  c.transport.DeliverAll();
  ASSERT_EQ(c.transport.replies.size(), 2u);
  EXPECT_EQ(c.transport.replies[1].code(),
            static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_TRUE(c.engine->reads.empty());
  ASSERT_EQ(c.engine->refusals.size(), 1u);
  EXPECT_TRUE(c.transport.read_wanted);
}

TEST(StreamConversationTest, AMalformedFirstRequestEndsTheConversation) {
  Conversation c;
  c.transport.Push(hrx::v1::StreamRequest(),
                   Refusal(Reason::kMalformedRequest, "bad. Fix: good."));
  c.transport.DeliverAll();
  ASSERT_TRUE(c.transport.ended.has_value());
  EXPECT_EQ(ReasonOf(*c.transport.ended), Reason::kMalformedRequest);
  EXPECT_EQ(c.engine->refusals.size(), 1u);
  EXPECT_TRUE(c.engine->destroyed.empty());  // no stream was opened
}

TEST(StreamConversationTest, AMalformedLaterRequestWaitsForTheSyncPoint) {
  Conversation c;
  c.transport.PushOpen();
  c.transport.Push(hrx::v1::StreamRequest(),
                   Refusal(Reason::kMalformedRequest, "bad. Fix: good."));
  c.transport.PushSync();
  c.transport.DeliverAll();
  ASSERT_EQ(c.engine->deferred.size(), 1u);
  EXPECT_EQ(ReasonOf(c.engine->deferred[0]), Reason::kMalformedRequest);
  EXPECT_EQ(c.transport.replies.size(), 1u);  // the open's only
  EXPECT_EQ(c.engine->syncs.size(), 1u);
  EXPECT_FALSE(c.transport.ended.has_value());
}

TEST(StreamConversationTest, OnlyTheFirstMessageOpensAndItMustOpen) {
  Conversation c;
  c.transport.PushSync();
  c.transport.PushOpen();
  c.transport.PushOpen();
  c.transport.DeliverAll();
  ASSERT_EQ(c.transport.replies.size(), 3u);
  EXPECT_NE(c.transport.replies[0].message().find("stream_not_open"),
            std::string::npos);
  EXPECT_EQ(c.transport.replies[1].code(), 0);
  EXPECT_NE(c.transport.replies[2].message().find("stream_already_open"),
            std::string::npos);
  EXPECT_EQ(c.engine->refusals.size(), 2u);
}

TEST(StreamConversationTest, ARefusedOpenAnswersWithTheRefusal) {
  Conversation c;
  c.engine->open_result =
      Refusal(Reason::kBudgetExhausted, "open: no streams left. Fix: close.");
  c.transport.PushOpen();
  c.transport.DeliverAll();
  ASSERT_EQ(c.transport.replies.size(), 1u);
  EXPECT_EQ(c.transport.replies[0].code(),
            static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_FALSE(c.transport.replies[0].has_opened());
  EXPECT_EQ(c.engine->refusals.size(), 1u);  // counted once
  EXPECT_TRUE(c.transport.read_wanted);
}

TEST(StreamConversationTest, TheRequestsEndDrainsTheStreamAndThenEnds) {
  Conversation c;
  c.transport.PushOpen();
  c.transport.PushSync();
  c.transport.DeliverAll();
  ASSERT_EQ(c.engine->syncs.size(), 1u);

  c.transport.RequestsEnd();
  ASSERT_EQ(c.engine->destroyed.size(), 1u);
  EXPECT_EQ(c.engine->destroyed[0], kStream);
  EXPECT_FALSE(c.transport.ended.has_value()) << "a sync is still owed";

  c.engine->syncs[0](absl::OkStatus());
  EXPECT_EQ(c.transport.replies.size(), 2u);  // the sync is still answered
  EXPECT_FALSE(c.transport.ended.has_value()) << "the destroy is still owed";

  c.engine->destroy_done[0](absl::OkStatus());
  ASSERT_TRUE(c.transport.ended.has_value());
  EXPECT_THAT(*c.transport.ended, IsOk());
  EXPECT_EQ(c.transport.ends, 1);
}

TEST(StreamConversationTest, AnUnidentifiedCallerEndsAtOnce) {
  ScriptedTransport transport(
      Refusal(Reason::kUnidentifiedCaller, "who? Fix: connect locally."));
  ASSERT_TRUE(transport.ended.has_value());
  EXPECT_EQ(ReasonOf(*transport.ended), Reason::kUnidentifiedCaller);
  EXPECT_FALSE(transport.read_wanted);
}

TEST(StreamConversationTest, AProfiledLaunchIsAnsweredWithItsNodes) {
  Conversation c;
  c.transport.PushOpen();
  hrx::v1::StreamRequest launch;
  launch.mutable_launch_profiled();
  c.transport.Push(std::move(launch));
  c.transport.DeliverAll();
  ASSERT_EQ(c.transport.replies.size(), 2u);
  ASSERT_EQ(c.transport.replies[1].profile().nodes_size(), 1);
  EXPECT_EQ(c.transport.replies[1].profile().nodes(0).nanoseconds(), 5u);
}

TEST(StreamConversationTest, AProfiledLaunchOfABadExecIsAnsweredAndCounted) {
  Conversation c;
  c.transport.PushOpen();
  hrx::v1::StreamRequest launch;
  launch.mutable_launch_profiled()->mutable_exec()->set_object(99);
  c.transport.Push(std::move(launch));
  c.transport.PushSync();
  c.transport.DeliverAll();
  ASSERT_EQ(c.transport.replies.size(), 2u);
  EXPECT_EQ(c.transport.replies[1].code(),
            static_cast<int>(absl::StatusCode::kUnauthenticated));
  EXPECT_NE(c.transport.replies[1].message().find("forged_handle"),
            std::string::npos);
  EXPECT_FALSE(c.transport.replies[1].has_profile());
  EXPECT_EQ(c.engine->refusals.size(), 1u);
  EXPECT_EQ(c.engine->syncs.size(), 1u) << "reading went on";
}

TEST(StreamConversationTest, APollIsAnsweredAtOnce) {
  Conversation c;
  c.engine->poll_result = false;
  c.transport.PushOpen();
  hrx::v1::StreamRequest poll;
  poll.mutable_poll();
  c.transport.Push(std::move(poll));
  c.transport.DeliverAll();
  ASSERT_EQ(c.transport.replies.size(), 2u);
  EXPECT_TRUE(c.transport.replies[1].has_complete());
  EXPECT_FALSE(c.transport.replies[1].complete());
}

TEST(StreamConversationTest, AnEmptyRequestIsRefusedAtOnce) {
  Conversation c;
  c.transport.PushOpen();
  c.transport.Push(hrx::v1::StreamRequest());
  c.transport.DeliverAll();
  ASSERT_EQ(c.transport.replies.size(), 2u);
  EXPECT_NE(c.transport.replies[1].message().find("empty_request"),
            std::string::npos);
  EXPECT_EQ(c.engine->refusals.size(), 1u);
}

TEST(StreamConversationTest, ABrokenTransportDrainsTheStreamAndEndsWithWhy) {
  Conversation c;
  c.transport.PushOpen();
  c.transport.PushSync();
  c.transport.DeliverAll();
  c.transport.Break(
      Refusal(Reason::kRingBroken, "ring: position went back. Fix: none."));
  EXPECT_EQ(c.engine->refusals.size(), 1u);
  ASSERT_EQ(c.engine->destroyed.size(), 1u);
  // Nothing more reaches the client: the sync's answer is dropped.
  c.engine->syncs[0](absl::OkStatus());
  EXPECT_EQ(c.transport.replies.size(), 1u);
  c.engine->destroy_done[0](absl::OkStatus());
  ASSERT_TRUE(c.transport.ended.has_value());
  EXPECT_EQ(ReasonOf(*c.transport.ended), Reason::kRingBroken);
}

TEST(StreamConversationTest, AStreamLeftAtTheEndIsNotDestroyed) {
  Conversation c;
  c.transport.PushOpen();
  c.transport.DeliverAll();
  c.transport.LeaveStream();
  c.transport.RequestsEnd();
  EXPECT_TRUE(c.engine->destroyed.empty());
  ASSERT_TRUE(c.transport.ended.has_value());
  EXPECT_THAT(*c.transport.ended, IsOk());
}

}  // namespace
}  // namespace hrx::daemon
