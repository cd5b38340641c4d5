// The shared-memory ring as hostile input: a raw client opens a ring with
// the generated stubs, maps it and writes whatever it likes. Each attack
// ends or stalls only the attacker's own stream; the fixture's libhrx
// client (on its own ring) is the bystander whose bytes are checked.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/internal/fd_channel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/refusal.h"
#include "shared/shm_ring.h"
#include "tests/client_fixture.h"
#include "tests/raw_ring.h"
#include "tests/raw_session.h"

namespace hrx::testing {
namespace {

using shared::IsOk;
using ::testing::Each;
using ::testing::HasSubstr;

// How long a step may hang before the test gives up (a hang limit, never
// a measurement).
constexpr absl::Duration kHangLimit = absl::Seconds(20);

class RingTest : public ClientFixture {
 protected:
  // The bystander: its own stream (a ring, by default) writes and reads
  // back a pattern.
  void ExpectBystanderIntact(uint8_t value) {
    Buffer buffer = Allocate(*stream_, 1 << 16);
    ASSERT_THAT(stream_->Fill(buffer.Binding(), value), IsOk());
    EXPECT_THAT(ReadAll(*stream_, buffer.Binding()), Each(value));
  }
};

TEST_F(RingTest, LibhrxStreamsRunOnTheRingUnlessTheTransportIsGrpc) {
  const char* transport = std::getenv("HRX_TRANSPORT");
  const bool grpc = transport != nullptr && std::string(transport) == "grpc";
  EXPECT_EQ(ProcessMapsRing(), !grpc);
  ExpectBystanderIntact(0x5a);
}

TEST_F(RingTest, ATenantsRingsAreBoundedAndThePastOneIsRefusedWithWhy) {
  // Each ring is a serving thread of hrxd's: a tenant has at most 64.
  RawSession raw(daemon_->socket_path());
  ASSERT_THAT(raw.open_status, IsOk());
  const size_t fixture_rings = ProcessMapsRing() ? 1 : 0;
  std::vector<std::unique_ptr<RawRing>> rings;
  absl::Status refused;
  for (int i = 0; i < 70 && refused.ok(); ++i) {
    auto ring = std::make_unique<RawRing>(raw);
    refused = ring->status();
    if (refused.ok()) rings.push_back(std::move(ring));
  }
  EXPECT_EQ(rings.size() + fixture_rings, 64u);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(refused.message(),
              ::testing::AllOf(HasSubstr("too_many_rings"),
                               HasSubstr("(at most 64)"), HasSubstr("Fix:")));
  // The tenant's own streams still open (libhrx falls back to a call) and
  // the bystander's bytes are intact.
  if (std::getenv("HRX_TRANSPORT") == nullptr) {
    auto more = device_->CreateStream();
    EXPECT_THAT(more.status(), IsOk());
  }
  ExpectBystanderIntact(0x3c);
}

TEST_F(RingTest, ARingCarriesTheSameRefusalsAsTheCall) {
  RawSession raw(daemon_->socket_path());
  ASSERT_THAT(raw.open_status, IsOk());
  RawRing ring(raw);
  ASSERT_THAT(ring.status(), IsOk());
  auto buffer = raw.Allocate(4096);
  ASSERT_TRUE(buffer.ok());
  // A forged buffer handle in a batch: refused at the next sync point.
  hrx::v1::StreamRequest batch;
  hrx::v1::Fill* fill = batch.mutable_batch()->add_commands()->mutable_fill();
  *fill->mutable_dst()->mutable_buffer() = *buffer;
  fill->mutable_dst()->mutable_buffer()->set_tag(buffer->tag() ^ 1);
  fill->mutable_dst()->set_length(16);
  ring.Send(batch);
  ring.Send(Sync(7));
  std::optional<hrx::v1::StreamReply> reply = ring.Receive();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->token(), 7u);
  EXPECT_EQ(reply->code(),
            static_cast<int>(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(reply->message(), HasSubstr("forged_handle"));
  // Bytes that are no StreamRequest: malformed, at the next sync point.
  ring.SendBytes(std::string("\xff\xff\xff\xff\xff", 5));
  ring.Send(Sync(8));
  reply = ring.Receive();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->token(), 8u);
  EXPECT_THAT(reply->message(), HasSubstr("malformed_request"));
  EXPECT_THAT(reply->message(), HasSubstr("Fix:"));
  // The stream goes on: a good sync is answered OK.
  ring.Send(Sync(9));
  reply = ring.Receive();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->code(), 0);
  ExpectBystanderIntact(0x11);
}

TEST_F(RingTest, AnImpossiblePositionEndsOnlyTheScribblersStream) {
  RawSession raw(daemon_->socket_path());
  RawRing ring(raw);
  ASSERT_THAT(ring.status(), IsOk());
  ring.header().submit_written.value.store(ring.header().submit_bytes + 1);
  shared::RingDoorbell(ring.header().daemon_bell);
  EXPECT_EQ(ring.AwaitEnd(), static_cast<int>(absl::StatusCode::kDataLoss));
  ExpectBystanderIntact(0x22);
  // The attacker's session survives: a new ring works.
  RawRing again(raw);
  ASSERT_THAT(again.status(), IsOk());
  again.Send(Sync(1));
  std::optional<hrx::v1::StreamReply> reply = again.Receive();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->code(), 0);
}

TEST_F(RingTest, AMessageLengthPastTheLimitEndsTheRingBeforeAllocating) {
  RawSession raw(daemon_->socket_path());
  RawRing ring(raw);
  ASSERT_THAT(ring.status(), IsOk());
  // A 4 GiB - 1 length prefix and nothing after it.
  shared::PipeWriter writer(
      static_cast<uint8_t*>(static_cast<void*>(&ring.header())) +
          ring.header().submit_offset,
      ring.header().submit_bytes, &ring.header().submit_written,
      &ring.header().submit_read);
  ASSERT_TRUE(writer.Push(std::string(4, '\xff')).ok());
  shared::RingDoorbell(ring.header().daemon_bell);
  EXPECT_EQ(ring.AwaitEnd(),
            static_cast<int>(absl::StatusCode::kResourceExhausted));
  ExpectBystanderIntact(0x33);
}

TEST_F(RingTest, TheRegionCannotBeResizedUnderTheDaemon) {
  RawSession raw(daemon_->socket_path());
  RawRing ring(raw);
  ASSERT_THAT(ring.status(), IsOk());
  EXPECT_NE(ftruncate(ring.fd(), 0), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(ftruncate(ring.fd(), 1 << 30), 0);
  ring.Send(Sync(3));
  std::optional<hrx::v1::StreamReply> reply = ring.Receive();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->code(), 0);
  ExpectBystanderIntact(0x44);
}

TEST_F(RingTest, AClientThatNeverTakesItsRepliesStallsOnlyItself) {
  RawSession raw(daemon_->socket_path());
  RawRing ring(raw);
  ASSERT_THAT(ring.status(), IsOk());
  auto buffer = raw.Allocate(1 << 20);
  ASSERT_TRUE(buffer.ok());
  // Reads of 64 KiB, never taken: the complete pipe (256 KiB) fills, then
  // the daemon stops reading requests (kMaxPendingReplies).
  for (uint64_t token = 1; token <= 200; ++token) {
    hrx::v1::StreamRequest read;
    read.set_token(token);
    *read.mutable_read()->mutable_buffer() = *buffer;
    read.mutable_read()->set_length(1 << 16);
    ring.Send(read);
  }
  ExpectBystanderIntact(0x55);
  // Taking them now lets the rest through: every one, once, whole. Replies
  // are matched by token (docs/protocol.md), not by position: completions
  // reach the ring from more than one thread, and under ASan's timing one
  // has overtaken a few others.
  std::set<uint64_t> tokens;
  for (int i = 0; i < 200; ++i) {
    std::optional<hrx::v1::StreamReply> reply = ring.Receive();
    ASSERT_TRUE(reply.has_value()) << "reply " << i;
    EXPECT_TRUE(tokens.insert(reply->token()).second) << reply->token();
    EXPECT_EQ(reply->data().size(), 1u << 16);
  }
  EXPECT_EQ(tokens.size(), 200u);
  EXPECT_EQ(*tokens.begin(), 1u);
  EXPECT_EQ(*tokens.rbegin(), 200u);
}

TEST_F(RingTest, ARingWithAReplyHalfWrittenStillEndsWithItsSession) {
  auto raw = std::make_unique<RawSession>(daemon_->socket_path());
  RawRing ring(*raw);
  ASSERT_THAT(ring.status(), IsOk());
  auto buffer = raw->Allocate(1 << 20);
  ASSERT_TRUE(buffer.ok());
  // A 1 MiB reply into a 256 KiB pipe nobody reads: hrxd holds it half
  // written.
  hrx::v1::StreamRequest read;
  read.set_token(1);
  *read.mutable_read()->mutable_buffer() = *buffer;
  read.mutable_read()->set_length(1 << 20);
  ring.Send(read);
  ring.Send(Sync(2));
  auto context = raw->Context();
  hrx::v1::CloseSessionRequest request;
  hrx::v1::CloseSessionResponse response;
  ASSERT_TRUE(
      raw->sessions->CloseSession(context.get(), request, &response).ok());
  // The pending reply is dropped and the ring ends; its region's charge
  // goes with it.
  EXPECT_TRUE(ring.AwaitEnd().has_value());
  ExpectBystanderIntact(0x77);
}

TEST_F(RingTest, ARingEndsWithItsSession) {
  auto raw = std::make_unique<RawSession>(daemon_->socket_path());
  auto ring = std::make_unique<RawRing>(*raw);
  ASSERT_THAT(ring->status(), IsOk());
  // The session's end ends the ring: hrxd drains and destroys its stream
  // and marks it finished.
  auto context = raw->Context();
  hrx::v1::CloseSessionRequest request;
  hrx::v1::CloseSessionResponse response;
  ASSERT_TRUE(
      raw->sessions->CloseSession(context.get(), request, &response).ok());
  EXPECT_TRUE(ring->AwaitEnd().has_value());
  ExpectBystanderIntact(0x66);
}

}  // namespace
}  // namespace hrx::testing
