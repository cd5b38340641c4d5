// End to end: a real hrxd process on a temporary socket, driven by libhrx in
// separate client processes and in this process, and by raw stubs that skip
// the client's own checks.
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hrx/client.h"
#include "hrx/v1/status.grpc.pb.h"
#include "shared/status_matchers.h"
#include "tests/raw_session.h"
#include "tests/subprocess.h"
#include "tests/test_daemon.h"

namespace hrx::testing {
namespace {

using ::hrx::shared::IsOk;
using ::hrx::shared::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

class ClientDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto daemon = TestDaemon::Start();
    ASSERT_THAT(daemon.status(), IsOk());
    daemon_ = *std::move(daemon);
    auto client = Client::Connect(daemon_->socket_path(), "test");
    ASSERT_THAT(client.status(), IsOk());
    client_ = *std::move(client);
    auto device = client_->OpenDevice(0);
    ASSERT_THAT(device.status(), IsOk());
    auto stream = device->CreateStream();
    ASSERT_THAT(stream.status(), IsOk());
    stream_ = std::make_unique<Stream>(*std::move(stream));
  }

  std::unique_ptr<TestDaemon> daemon_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<Stream> stream_;
};

TEST_F(ClientDaemonTest, TwoClientProcessesEachRoundTripTheirOwnBytes) {
  std::vector<Subprocess> workers;
  for (int seed : {11, 22}) {
    workers.push_back(
        Subprocess::Start({RunfilePath("tests/client_worker"),
                           absl::StrCat("--socket=", daemon_->socket_path()),
                           absl::StrCat("--seed=", seed)},
                          daemon_->dir()));
  }
  for (Subprocess& worker : workers) {
    EXPECT_EQ(worker.Wait(), 0) << worker.Stderr();
    EXPECT_THAT(worker.Stdout(), HasSubstr("rounds of 9437197 bytes verified"));
  }
  // Each worker closed its session on exit: only this test's session is left.
  stream_.reset();
  const hrx::v1::GetStatusResponse status = QueryStatus(daemon_->socket_path());
  EXPECT_EQ(status.sessions(), 1u);
  EXPECT_EQ(status.buffers(), 0u);
  EXPECT_EQ(status.bytes_in_use(), 0u);
}

TEST_F(ClientDaemonTest, DeviceReportsTheTestBackend) {
  auto device = client_->OpenDevice(0);
  ASSERT_THAT(device.status(), IsOk());
  EXPECT_EQ(device->info().backend, TestBackend());
  EXPECT_GT(device->info().memory_bytes, 0u);
  EXPECT_EQ(device->info().queue_count, 8u);
  EXPECT_THAT(client_->OpenDevice(1), StatusIs(absl::StatusCode::kNotFound,
                                               HasSubstr("no_such_device")));
}

TEST_F(ClientDaemonTest, OpenDeviceForRefusesAMismatchedTargetNamingTheFound) {
  const std::string found = client_->OpenDevice(0)->target();
  EXPECT_THAT(client_->OpenDeviceFor(0, found).status(), IsOk());
  EXPECT_THAT(client_->OpenDeviceFor(0, "gfx1151-not-here"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("target_mismatch"),
                             HasSubstr("requires gfx1151-not-here"),
                             HasSubstr(absl::StrCat("found ", found)))));
}

TEST_F(ClientDaemonTest, ClientRefusesOutOfRangeAndWrappingSlices) {
  auto buffer = stream_->Allocate(16);
  ASSERT_THAT(buffer.status(), IsOk());
  EXPECT_THAT(buffer->Slice(10, 7),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("view_out_of_range"),
                             HasSubstr("offset 10 + length 7"),
                             HasSubstr("16 bytes"), HasSubstr("Fix:"))));
  EXPECT_THAT(buffer->Slice(kMax - 7, 16),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("view_out_of_range")));
  auto inner = buffer->Slice(8, 8);
  ASSERT_THAT(inner.status(), IsOk());
  EXPECT_THAT(inner->Slice(1, 8), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("view_out_of_range")));
}

TEST_F(ClientDaemonTest, DaemonRefusesOutOfRangeAndWrappingViewsItself) {
  RawSession raw(daemon_->socket_path());
  ASSERT_THAT(raw.open_status, IsOk());
  const hrx::v1::Handle buffer = *raw.Allocate(4096);
  const hrx::v1::Handle stream = *raw.CreateStream();
  EXPECT_THAT(raw.Submit(FillRequest(stream, buffer, kMax - 7, 16, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("view_out_of_range"),
                             HasSubstr(absl::StrCat("offset ", kMax - 7)),
                             HasSubstr("4096 bytes"), HasSubstr("Fix:"))));
  EXPECT_THAT(raw.Submit(FillRequest(stream, buffer, 4000, 97, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("view_out_of_range")));
  EXPECT_THAT(raw.Read(stream, buffer, 16, kMax),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("view_out_of_range: read src")));
  EXPECT_THAT(
      raw.Submit(FillRequest(stream, buffer, 0, 1, 256)),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("fill_value_out_of_range"), HasSubstr("256"))));
}

TEST_F(ClientDaemonTest, RefusedBatchRunsNothingOfIt) {
  RawSession raw(daemon_->socket_path());
  const hrx::v1::Handle buffer = *raw.Allocate(64);
  const hrx::v1::Handle stream = *raw.CreateStream();
  hrx::v1::SubmitRequest batch = FillRequest(stream, buffer, 0, 64, 0xaa);
  *batch.add_commands() =
      FillRequest(stream, buffer, 60, 8, 0xbb).commands(0);  // out of range
  EXPECT_THAT(raw.Submit(batch),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("submit command 2 of 2 (fill dst)")));
  auto bytes = raw.Read(stream, buffer, 0, 64);
  ASSERT_THAT(bytes.status(), IsOk());
  EXPECT_EQ(*bytes, std::string(64, '\0'));
}

TEST_F(ClientDaemonTest, ZeroLengthOperationsAreAcceptedNoOps) {
  auto buffer = stream_->AllocateZeroed(0);
  ASSERT_THAT(buffer.status(), IsOk());
  EXPECT_EQ(buffer->bytes(), 1u);
  auto empty = buffer->Slice(1, 0);
  ASSERT_THAT(empty.status(), IsOk());
  EXPECT_THAT(stream_->Fill(*empty, 7), IsOk());
  EXPECT_THAT(stream_->Copy(*empty, *buffer->Slice(0, 0)), IsOk());
  EXPECT_THAT(stream_->Upload(*empty, {}), IsOk());
  std::vector<uint8_t> none;
  EXPECT_THAT(stream_->ReadBlocking(*empty, none), IsOk());
  auto readback = stream_->Read(*empty);
  ASSERT_THAT(readback.status(), IsOk());
  EXPECT_TRUE(readback->Wait(*stream_)->empty());
  std::vector<uint8_t> one(1, 0xff);
  ASSERT_THAT(stream_->ReadBlocking(buffer->Binding(), one), IsOk());
  EXPECT_EQ(one[0], 0);
}

TEST_F(ClientDaemonTest, FreedBufferIsRefusedAsStale) {
  auto buffer = stream_->Allocate(32);
  ASSERT_THAT(buffer.status(), IsOk());
  const View view = buffer->Binding();
  ASSERT_THAT(buffer->Free(), IsOk());
  EXPECT_THAT(buffer->Free(), IsOk());  // already released: nothing to do
  ASSERT_THAT(stream_->Fill(view, 1), IsOk());  // batched; refused on send
  EXPECT_THAT(stream_->Synchronize(),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("stale_handle"), HasSubstr("freed"),
                             HasSubstr("Fix:"))));
  std::vector<uint8_t> out(32);
  EXPECT_THAT(stream_->ReadBlocking(view, out),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("stale_handle")));
  // The stream stays usable after the refusal.
  auto fresh = stream_->Allocate(32);
  ASSERT_THAT(fresh.status(), IsOk());
  EXPECT_THAT(stream_->Fill(fresh->Binding(), 9), IsOk());
  EXPECT_THAT(stream_->Synchronize(), IsOk());
}

TEST_F(ClientDaemonTest, FreeingWithUnsentCommandsSendsThemFirst) {
  auto a = stream_->AllocateZeroed(1 << 20);
  auto b = stream_->AllocateZeroed(1 << 20);
  ASSERT_THAT(a.status(), IsOk());
  ASSERT_THAT(b.status(), IsOk());
  ASSERT_THAT(stream_->Fill(a->Binding(), 0x42), IsOk());
  ASSERT_THAT(stream_->Copy(b->Binding(), a->Binding()), IsOk());
  ASSERT_THAT(a->Free(), IsOk());  // the fill and copy still run
  std::vector<uint8_t> out(1 << 20);
  ASSERT_THAT(stream_->ReadBlocking(b->Binding(), out), IsOk());
  EXPECT_EQ(out.front(), 0x42);
  EXPECT_EQ(out.back(), 0x42);
}

TEST_F(ClientDaemonTest, ClientRefusesUnequalOverlappingAndOversizedTransfers) {
  auto buffer = stream_->Allocate(64);
  ASSERT_THAT(buffer.status(), IsOk());
  EXPECT_THAT(stream_->Copy(*buffer->Slice(0, 8), *buffer->Slice(8, 16)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("copy_length_mismatch")));
  EXPECT_THAT(
      stream_->Copy(*buffer->Slice(0, 16), *buffer->Slice(8, 16)),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("copy_overlap")));
  std::vector<uint8_t> five(5);
  EXPECT_THAT(stream_->Upload(*buffer->Slice(0, 4), five),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("upload_too_large")));
  std::vector<uint8_t> three(3);
  EXPECT_THAT(stream_->ReadBlocking(*buffer->Slice(0, 4), three),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("read_size_mismatch")));
}

TEST_F(ClientDaemonTest, ViewsOfAnotherClientAreRefusedLocally) {
  auto other = Client::Connect(daemon_->socket_path(), "other");
  ASSERT_THAT(other.status(), IsOk());
  auto other_stream = (*other)->OpenDevice(0)->CreateStream();
  ASSERT_THAT(other_stream.status(), IsOk());
  auto foreign = other_stream->Allocate(8);
  ASSERT_THAT(foreign.status(), IsOk());
  EXPECT_THAT(
      stream_->Fill(foreign->Binding(), 1),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("foreign_view")));
}

TEST_F(ClientDaemonTest, CallsWithoutASessionAreUnauthenticated) {
  auto stub = hrx::v1::Buffers::NewStub(
      client::internal::MakeChannel(daemon_->socket_path()));
  grpc::ClientContext context;
  hrx::v1::AllocateRequest request;
  request.set_bytes(8);
  hrx::v1::AllocateResponse response;
  EXPECT_THAT(
      shared::FromGrpcStatus(stub->Allocate(&context, request, &response)),
      StatusIs(absl::StatusCode::kUnauthenticated,
               AllOf(HasSubstr("no_session"), HasSubstr("Fix:"))));
}

TEST(ClientWithoutDaemonTest, ConnectIsUnavailableNamingTheSocket) {
  const std::string dir = MakeShortTempDir();
  const std::string socket_path = dir + "/nobody-here.sock";
  EXPECT_THAT(Client::Connect(socket_path),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("daemon_unreachable"),
                             HasSubstr(socket_path), HasSubstr("Fix:"))));
}

TEST(DeviceMemoryLimitTest,
     AllocationsUpToTheLimitSucceedAndOneByteMoreIsRefused) {
  // The limit flag belongs to the cpu backend, so this daemon is always cpu.
  auto daemon =
      TestDaemon::Start({"--backend=cpu", "--cpu_memory_bytes=1048576"});
  ASSERT_THAT(daemon.status(), IsOk());
  auto client = Client::Connect((*daemon)->socket_path());
  ASSERT_THAT(client.status(), IsOk());
  auto stream = (*client)->OpenDevice(0)->CreateStream();
  ASSERT_THAT(stream.status(), IsOk());
  auto all = stream->Allocate(1 << 20);
  ASSERT_THAT(all.status(), IsOk());
  EXPECT_THAT(
      stream->Allocate(1),
      StatusIs(absl::StatusCode::kResourceExhausted,
               AllOf(HasSubstr("device_memory_exhausted"),
                     HasSubstr("1048576 + 1 > 1048576"), HasSubstr("Fix:"))));
  ASSERT_THAT(all->Free(), IsOk());
  ASSERT_THAT(stream->Synchronize(), IsOk());
  EXPECT_THAT(stream->Allocate(1 << 20).status(), IsOk());
}

}  // namespace
}  // namespace hrx::testing
