// Rings served by the executor (--executor_rings): a tenant whose work runs
// in an executor has its stream's ring served there, against copies of its
// session's tables, with hrxd off the per-command path and still the
// authority on every handle: refusals are hrxd's own, a freed buffer is
// revoked before its free is answered, and a session's end reaches the
// executor. The fixture's libhrx client (a ring of its own) is the
// bystander whose bytes are checked.
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "hrx/v1/admin.grpc.pb.h"
#include "hrx/v1/buffer.grpc.pb.h"
#include "hrx/v1/session.grpc.pb.h"
#include "shared/refusal.h"
#include "tests/client_fixture.h"
#include "tests/raw_ring.h"
#include "tests/raw_session.h"

namespace hrx::testing {
namespace {

using shared::IsOk;
using ::testing::Each;
using ::testing::HasSubstr;

hrx::v1::StreamRequest FillRequest(const hrx::v1::Handle& buffer,
                                   uint64_t length, uint32_t value) {
  hrx::v1::StreamRequest request;
  hrx::v1::Fill* fill = request.mutable_batch()->add_commands()->mutable_fill();
  *fill->mutable_dst()->mutable_buffer() = buffer;
  fill->mutable_dst()->set_length(length);
  fill->set_value(value);
  return request;
}

hrx::v1::StreamRequest ReadRequest(uint64_t token,
                                   const hrx::v1::Handle& buffer,
                                   uint64_t length) {
  hrx::v1::StreamRequest request;
  request.set_token(token);
  *request.mutable_read()->mutable_buffer() = buffer;
  request.mutable_read()->set_length(length);
  return request;
}

class ExecutorRingTest : public ClientFixture {
 protected:
  std::vector<std::string> DaemonFlags() const override {
    return {"--executor_rings"};
  }

  void ExpectBystanderIntact(uint8_t value) {
    Buffer buffer = Allocate(*stream_, 1 << 16);
    ASSERT_THAT(stream_->Fill(buffer.Binding(), value), IsOk());
    EXPECT_THAT(ReadAll(*stream_, buffer.Binding()), Each(value));
  }

  // The fixture's tenant as hrxd lists it (the local uid administers).
  hrx::v1::TenantInfo LocalTenant() {
    auto admin = hrx::v1::Admin::NewStub(grpc::CreateChannel(
        "unix:" + daemon_->socket_path(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    hrx::v1::ListTenantsResponse response;
    const grpc::Status listed =
        admin->ListTenants(&context, hrx::v1::ListTenantsRequest(), &response);
    EXPECT_TRUE(listed.ok()) << listed.error_message();
    for (const auto& tenant : response.tenants()) {
      if (tenant.name() == "local") return tenant;
    }
    ADD_FAILURE() << "no tenant \"local\" listed";
    return {};
  }

  absl::Status Free(RawSession& raw, const hrx::v1::Handle& buffer) {
    auto context = raw.Context();
    hrx::v1::FreeRequest request;
    *request.mutable_buffer() = buffer;
    hrx::v1::FreeResponse response;
    return shared::FromGrpcStatus(
        raw.buffers->Free(context.get(), request, &response));
  }
};

TEST_F(ExecutorRingTest, TheExecutorServesTheRingAndHrxdSeesNoCommand) {
  ASSERT_TRUE(ProcessMapsRing());
  const pid_t hrxd = daemon_->process().pid();
  ExpectBystanderIntact(0x5a);
  // Rings served by the executor cost hrxd no thread of their own: eight
  // more streams, each with work, add fewer than eight (a call lane may
  // start one for the allocations).
  const size_t threads_before = ProcEntriesSteady(hrxd, "task");
  const hrx::v1::GetStatusResponse before = QueryStatus(daemon_->socket_path());
  std::vector<Stream> streams;
  for (int i = 0; i < 8; ++i) streams.push_back(NewStream());
  for (size_t i = 0; i < streams.size(); ++i) {
    Buffer buffer = Allocate(streams[i], 4096);
    ASSERT_THAT(streams[i].Fill(buffer.Binding(), static_cast<uint8_t>(i)),
                IsOk());
    EXPECT_THAT(ReadAll(streams[i], buffer.Binding()),
                Each(static_cast<uint8_t>(i)));
  }
  EXPECT_LT(ProcEntriesSteady(hrxd, "task"), threads_before + streams.size());
  // hrxd enqueued none of those commands: the executor did (it reports its
  // count with each ping's answer, every 250 ms).
  hrx::v1::GetStatusResponse after = QueryStatus(daemon_->socket_path());
  for (int i = 0; i < 250 && after.executor_commands() <
                                 before.executor_commands() + streams.size();
       ++i) {
    absl::SleepFor(absl::Milliseconds(20));
    after = QueryStatus(daemon_->socket_path());
  }
  EXPECT_GE(after.executor_commands(),
            before.executor_commands() + streams.size());
  EXPECT_EQ(after.commands_submitted() - after.executor_commands(),
            before.commands_submitted() - before.executor_commands());
  // The stream's statistics come from where its queue is: the executor.
  auto stats = stream_->GetStats();
  ASSERT_THAT(stats.status(), IsOk());
  EXPECT_GT(stats->published_fence, 0u);
}

TEST_F(ExecutorRingTest, RefusalsAreHrxdsOwn) {
  RawSession raw(daemon_->socket_path());
  ASSERT_THAT(raw.open_status, IsOk());
  RawRing ring(raw);
  ASSERT_THAT(ring.status(), IsOk());
  auto buffer = raw.Allocate(4096);
  ASSERT_TRUE(buffer.ok());
  // A forged tag: the executor holds no such handle and hrxd says why.
  hrx::v1::Handle forged = *buffer;
  forged.set_tag(forged.tag() ^ 1);
  ring.Send(FillRequest(forged, 16, 1));
  ring.Send(Sync(7));
  std::optional<hrx::v1::StreamReply> reply = ring.Receive();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->token(), 7u);
  EXPECT_EQ(reply->code(),
            static_cast<int>(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(reply->message(), HasSubstr("forged_handle"));
  // Another session's buffer (the fixture's): foreign, as from hrxd.
  Buffer theirs = Allocate(*stream_, 4096);
  hrx::v1::Handle foreign;
  client::internal::ToProto(theirs.handle(), &foreign);
  ring.Send(FillRequest(foreign, 16, 1));
  ring.Send(Sync(8));
  reply = ring.Receive();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->code(),
            static_cast<int>(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(reply->message(), HasSubstr("foreign_handle"));
  // A span past the buffer: the planner's refusal, in the executor.
  ring.Send(FillRequest(*buffer, 4097, 1));
  ring.Send(Sync(9));
  reply = ring.Receive();
  ASSERT_TRUE(reply.has_value());
  EXPECT_THAT(reply->message(), HasSubstr("view_out_of_range"));
  EXPECT_THAT(reply->message(), HasSubstr("Fix:"));
  // The stream goes on.
  ring.Send(FillRequest(*buffer, 4096, 0x42));
  ring.Send(ReadRequest(10, *buffer, 4096));
  reply = ring.Receive();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->code(), 0) << reply->message();
  EXPECT_EQ(reply->data(), std::string(4096, '\x42'));
  ExpectBystanderIntact(0x11);
}

TEST_F(ExecutorRingTest, AFreedBufferIsRevokedBeforeTheFreeIsAnswered) {
  RawSession raw(daemon_->socket_path());
  RawRing ring(raw);
  ASSERT_THAT(ring.status(), IsOk());
  auto buffer = raw.Allocate(4096);
  ASSERT_TRUE(buffer.ok());
  // Used once: the executor installs it.
  ring.Send(FillRequest(*buffer, 4096, 3));
  ring.Send(Sync(1));
  std::optional<hrx::v1::StreamReply> reply = ring.Receive();
  ASSERT_TRUE(reply.has_value());
  ASSERT_EQ(reply->code(), 0) << reply->message();
  // Freed through hrxd: once that is answered, the executor's ring refuses
  // the handle as stale, exactly as hrxd would.
  ASSERT_THAT(Free(raw, *buffer), IsOk());
  ring.Send(FillRequest(*buffer, 16, 4));
  ring.Send(Sync(2));
  reply = ring.Receive();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->code(), static_cast<int>(absl::StatusCode::kNotFound));
  EXPECT_THAT(reply->message(), HasSubstr("stale_handle"));
  ExpectBystanderIntact(0x22);
}

TEST_F(ExecutorRingTest, AKernelRunsFromTheExecutorsRing) {
  auto pattern =
      stream_->LoadKernelFile(KernelPath("write_pattern"), "write_pattern");
  ASSERT_THAT(pattern.status(), IsOk());
  constexpr uint64_t kBytes = 64 * 8;
  constexpr uint32_t kSeed = 7;
  Buffer out = Allocate(*stream_, kBytes);
  const View binding = out.Binding();
  Constants constants;
  ASSERT_THAT(constants.Push(kBytes), IsOk());
  ASSERT_THAT(constants.Push(kSeed), IsOk());
  ASSERT_THAT(stream_->Dispatch(*pattern, {8, 1, 1}, {64, 1, 1}, constants,
                                {&binding, 1}),
              IsOk());
  const std::vector<uint8_t> bytes = ReadAll(*stream_, binding);
  ASSERT_EQ(bytes.size(), kBytes);
  for (uint64_t i = 0; i < kBytes; ++i) {
    ASSERT_EQ(bytes[i], static_cast<uint8_t>(i * 31 + kSeed)) << i;
  }
  // Its dispatch cache is the executor's, and the stream's statistics say so.
  auto stats = stream_->GetStats();
  ASSERT_THAT(stats.status(), IsOk());
  EXPECT_EQ(stats->dispatch_cache.misses, 1u);
}

TEST_F(ExecutorRingTest, EventsRecordedOnTheRingAnswerCallsToHrxd) {
  // Recorded on a ring the executor serves, so known only there: hrxd puts
  // the client's query, synchronize and release to the executor.
  Buffer buffer = Allocate(*stream_, 1 << 20);
  ASSERT_THAT(stream_->Fill(buffer.Binding(), 9), IsOk());
  auto event = stream_->RecordEvent();
  ASSERT_THAT(event.status(), IsOk());
  EXPECT_THAT(event->Synchronize(), IsOk());
  auto complete = event->IsComplete();
  ASSERT_THAT(complete.status(), IsOk());
  EXPECT_TRUE(*complete);
  // Another stream waits on it, in the executor.
  Stream other = NewStream();
  ASSERT_THAT(other.WaitEvent(*event), IsOk());
  EXPECT_THAT(ReadAll(other, buffer.Binding()), Each(9));
  ExpectBystanderIntact(0x44);
}

TEST_F(ExecutorRingTest, ARingWhoseExecutorIsLostEndsWithWhy) {
  RawSession raw(daemon_->socket_path());
  RawRing ring(raw);
  ASSERT_THAT(ring.status(), IsOk());
  ring.Send(Sync(1));
  std::optional<hrx::v1::StreamReply> reply = ring.Receive();
  ASSERT_TRUE(reply.has_value());
  ASSERT_EQ(reply->code(), 0);
  // The executor serving the ring dies with it: nothing of the executor's
  // is left to tell the client, so hrxd ends the ring, saying why.
  const pid_t executor = ExecutorPid(daemon_->process().pid(), "local");
  ASSERT_GT(executor, 0);
  ASSERT_EQ(kill(executor, SIGKILL), 0);
  const std::optional<int> code = ring.AwaitEnd();
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, static_cast<int>(absl::StatusCode::kUnavailable));
  // A new client's ring is served by the executor that replaces it (once
  // its restart's backoff has passed: executor_restarting until then).
  auto client = Client::Connect(daemon_->socket_path(), "after");
  ASSERT_THAT(client.status(), IsOk());
  absl::StatusOr<Stream> stream = absl::UnavailableError("not yet");
  const absl::Time limit = absl::Now() + kRawRingHangLimit;
  while (!stream.ok() && absl::Now() < limit) {
    stream = (*client)->OpenDevice(0)->CreateStream();
    if (!stream.ok()) absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_THAT(stream.status(), IsOk());
  Buffer buffer = Allocate(*stream, 4096);
  ASSERT_THAT(stream->Fill(buffer.Binding(), 0x77), IsOk());
  EXPECT_THAT(ReadAll(*stream, buffer.Binding()), Each(0x77));
}

TEST_F(ExecutorRingTest, ARingEndsWithItsSession) {
  auto raw = std::make_unique<RawSession>(daemon_->socket_path());
  RawRing ring(*raw);
  ASSERT_THAT(ring.status(), IsOk());
  ring.Send(Sync(1));
  ASSERT_TRUE(ring.Receive().has_value());
  // The session closes in hrxd: the executor's ring ends with it.
  auto context = raw->Context();
  hrx::v1::CloseSessionRequest request;
  hrx::v1::CloseSessionResponse response;
  ASSERT_TRUE(
      raw->sessions->CloseSession(context.get(), request, &response).ok());
  EXPECT_TRUE(ring.AwaitEnd().has_value());
  ExpectBystanderIntact(0x33);
}

TEST_F(ExecutorRingTest, WorkTheExecutorHoldsShowsInTheTenantsUsage) {
  // A command held in flight on a ring the executor serves: hrxd charges
  // nothing for it, and lists it from the executor's report (its pong).
  Stream held = NewStream();
  Stream other = NewStream();
  ASSERT_NE(held.queue(), other.queue());
  auto flag = held.AllocateZeroed(1);
  ASSERT_THAT(flag.status(), IsOk());
  HoldQueue(held, *flag);
  uint64_t inflight = 0;
  for (int i = 0; i < 250 && inflight == 0; ++i) {
    inflight = LocalTenant().usage().inflight_commands();
    if (inflight == 0) absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_GT(inflight, 0u);
  // Released, the work ends and the report says so.
  ASSERT_THAT(other.Fill(flag->Binding(), 1), IsOk());
  ASSERT_THAT(other.Synchronize(), IsOk());
  ASSERT_THAT(held.Synchronize(), IsOk());
  for (int i = 0; i < 250 && inflight != 0; ++i) {
    inflight = LocalTenant().usage().inflight_commands();
    if (inflight != 0) absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(inflight, 0u);
}

TEST_F(ExecutorRingTest, AClosedSessionsMemoryIsBackWhenTheCloseReturns) {
  const uint64_t before = QueryStatus(daemon_->socket_path()).bytes_in_use();
  auto raw = std::make_unique<RawSession>(daemon_->socket_path());
  RawRing ring(*raw);
  ASSERT_THAT(ring.status(), IsOk());
  auto buffer = raw->Allocate(1 << 20);
  ASSERT_TRUE(buffer.ok());
  // Installed in the executor and used there: hrxd keeps the memory until
  // the executor has run the session's work, and the close waits for that.
  ring.Send(FillRequest(*buffer, 1 << 20, 5));
  ring.Send(Sync(1));
  std::optional<hrx::v1::StreamReply> reply = ring.Receive();
  ASSERT_TRUE(reply.has_value());
  ASSERT_EQ(reply->code(), 0) << reply->message();
  ASSERT_GT(QueryStatus(daemon_->socket_path()).bytes_in_use(), before);
  auto context = raw->Context();
  hrx::v1::CloseSessionRequest request;
  hrx::v1::CloseSessionResponse response;
  ASSERT_TRUE(
      raw->sessions->CloseSession(context.get(), request, &response).ok());
  EXPECT_EQ(QueryStatus(daemon_->socket_path()).bytes_in_use(), before);
  ExpectBystanderIntact(0x66);
}

}  // namespace
}  // namespace hrx::testing
