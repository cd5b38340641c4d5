// Deadlines in libhrx: every wait ends by its deadline with DEADLINE_EXCEEDED
// naming what it waited for, whether the work is stuck (a kernel that holds
// its queue) or the daemon itself stops answering (SIGSTOP); the stream
// stays usable afterwards, and a stream's destructor returns.
#include <signal.h>

#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hrx/client.h"
#include "shared/refusal.h"
#include "shared/status_matchers.h"
#include "tests/client_fixture.h"

namespace hrx::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr absl::Duration kShortWait = absl::Milliseconds(300);

void ExpectDeadlineExceeded(const absl::Status& status, const char* what) {
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_EQ(ReasonToken(status), "deadline_exceeded") << status;
  EXPECT_THAT(status.message(), AllOf(HasSubstr(what), HasSubstr("Fix:")));
}

class DeadlineTest : public ClientFixture {
 protected:
  // A client of its own whose default timeout is `timeout`.
  std::unique_ptr<Client> ClientWithTimeout(absl::Duration timeout) {
    ConnectOptions options;
    options.socket_path = daemon_->socket_path();
    options.client_name = "deadlines";
    options.default_timeout = timeout;
    auto client = Client::Connect(options);
    EXPECT_THAT(client.status(), shared::IsOk());
    return client.ok() ? *std::move(client) : nullptr;
  }

  // Sets `flag` from another stream, letting a held queue go.
  void Release(const Buffer& flag) {
    Stream releaser = NewStream();
    ASSERT_THAT(releaser.Fill(flag.Binding(), 1), shared::IsOk());
    ASSERT_THAT(releaser.Synchronize(), shared::IsOk());
  }
};

TEST_F(DeadlineTest,
       WaitsOnStuckWorkEndByTheirDeadlineAndTheStreamStaysUsable) {
  auto flag = stream_->AllocateZeroed(1);
  ASSERT_THAT(flag.status(), shared::IsOk());
  Buffer data = Allocate(*stream_, 4096);
  HoldQueue(*stream_, *flag);
  ASSERT_THAT(stream_->Fill(data.Binding(), 0x5a), shared::IsOk());

  ExpectDeadlineExceeded(stream_->Synchronize(absl::Now() + kShortWait),
                         "synchronize");
  auto event = stream_->RecordEvent();
  ASSERT_THAT(event.status(), shared::IsOk());
  ExpectDeadlineExceeded(event->Synchronize(absl::Now() + kShortWait), "event");
  std::vector<uint8_t> bytes(4096);
  ExpectDeadlineExceeded(
      stream_->ReadBlocking(data.Binding(), bytes, absl::Now() + kShortWait),
      "read");
  auto idle = stream_->IsIdle();
  ASSERT_THAT(idle.status(), shared::IsOk());
  EXPECT_FALSE(*idle) << "the held kernel still runs";

  // The work was never lost: once the queue goes, everything runs in order
  // and the stream answers as before.
  Release(*flag);
  ASSERT_THAT(stream_->Synchronize(), shared::IsOk());
  EXPECT_THAT(event->Synchronize(), shared::IsOk());
  EXPECT_EQ(ReadAll(*stream_, data.Binding()),
            std::vector<uint8_t>(4096, 0x5a));
}

TEST_F(DeadlineTest, AStreamDestructorOverStuckWorkReturns) {
  std::unique_ptr<Client> client = ClientWithTimeout(absl::Milliseconds(500));
  ASSERT_NE(client, nullptr);
  auto device = client->OpenDevice(0);
  ASSERT_THAT(device.status(), shared::IsOk());
  {
    auto held = device->CreateStream();
    ASSERT_THAT(held.status(), shared::IsOk());
    auto flag = held->AllocateZeroed(1);
    ASSERT_THAT(flag.status(), shared::IsOk());
    HoldQueue(*held, *flag);
    // Leaving the scope destroys the stream over work that cannot finish
    // (nothing sets the flag): the destructor waits default_timeout, then
    // gives up on the call.
  }
  // The daemon still drains that stream; the connection stays usable.
  auto other = device->CreateStream();
  ASSERT_THAT(other.status(), shared::IsOk());
  auto buffer = other->Allocate(64);
  ASSERT_THAT(buffer.status(), shared::IsOk());
  EXPECT_THAT(other->Fill(buffer->Binding(), 7), shared::IsOk());
  std::vector<uint8_t> bytes(64);
  ASSERT_THAT(other->ReadBlocking(buffer->Binding(), bytes), shared::IsOk());
  EXPECT_EQ(bytes, std::vector<uint8_t>(64, 7));
}

TEST_F(DeadlineTest, AStoppedDaemonEndsEveryWaitByItsDeadline) {
  std::unique_ptr<Client> client = ClientWithTimeout(absl::Seconds(1));
  ASSERT_NE(client, nullptr);
  auto device = client->OpenDevice(0);
  ASSERT_THAT(device.status(), shared::IsOk());
  auto stream = device->CreateStream();
  ASSERT_THAT(stream.status(), shared::IsOk());
  auto buffer = stream->Allocate(256);
  ASSERT_THAT(buffer.status(), shared::IsOk());

  daemon_->process().Signal(SIGSTOP);
  ASSERT_THAT(stream->Fill(buffer->Binding(), 3), shared::IsOk());
  ExpectDeadlineExceeded(stream->Synchronize(absl::Now() + kShortWait),
                         "synchronize");
  // Unary calls end by the client's default timeout.
  ExpectDeadlineExceeded(stream->Allocate(64).status(), "hrxd");
  // Opening a stream waits by the default timeout too.
  ExpectDeadlineExceeded(device->CreateStream().status(), "open");
  daemon_->process().Signal(SIGCONT);

  // Nothing was lost: the fill ran and the stream answers again.
  std::vector<uint8_t> bytes(256);
  ASSERT_THAT(stream->ReadBlocking(buffer->Binding(), bytes), shared::IsOk());
  EXPECT_EQ(bytes, std::vector<uint8_t>(256, 3));
}

TEST_F(DeadlineTest, ConnectRefusesATimeoutThatIsNotPositive) {
  ConnectOptions options;
  options.socket_path = daemon_->socket_path();
  options.default_timeout = absl::ZeroDuration();
  const auto client = Client::Connect(options);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReasonToken(client.status()), "bad_timeout");
  EXPECT_THAT(client.status().message(),
              AllOf(HasSubstr("0"), HasSubstr("Fix:")));
}

}  // namespace
}  // namespace hrx::testing
