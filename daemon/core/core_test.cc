#include "daemon/core/core.h"

#include <unistd.h>

#include <limits>
#include <string>

#include "absl/synchronization/notification.h"
#include "daemon/backend/cpu/cpu_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/status_matchers.h"

namespace hrx::daemon {
namespace {

using ::hrx::shared::IsOk;
using ::hrx::shared::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr uint64_t kDeviceBytes = 64 << 20;

PeerIdentity Me() {
  PeerIdentity me;
  me.uid = getuid();
  me.gid = getgid();
  me.pid = getpid();
  me.connection = 1;
  return me;
}

class CoreTest : public ::testing::Test {
 protected:
  CoreTest()
      : core_(std::make_unique<backend::CpuBackend>(
                  backend::CpuBackendOptions{.memory_bytes = kDeviceBytes}),
              CoreOptions{}) {
    session_ = *core_.OpenSession("test", Me());
    stream_ = core_.commands().CreateStream(session_)->handle;
  }

  uint64_t Allocate(uint64_t bytes) {
    auto buffer = core_.buffers().Allocate(session_, bytes,
                                           AllocationKind::kZeroed, stream_);
    EXPECT_THAT(buffer.status(), IsOk());
    return buffer->handle;
  }

  absl::Status Sync() {
    absl::Notification done;
    absl::Status result;
    core_.commands().Synchronize(session_, stream_, [&](absl::Status status) {
      result = status;
      done.Notify();
    });
    done.WaitForNotification();
    return result;
  }

  absl::StatusOr<std::string> Read(ViewRef view) {
    absl::Notification done;
    absl::Status result;
    std::string out;
    core_.commands().Read(session_, stream_, view, &out,
                          [&](absl::Status status) {
                            result = status;
                            done.Notify();
                          });
    done.WaitForNotification();
    if (!result.ok()) return result;
    return out;
  }

  absl::StatusOr<size_t> SubmitBatch(std::vector<Command> batch) {
    absl::Notification done;
    absl::StatusOr<size_t> result;
    core_.commands().Submit(session_, stream_, std::move(batch),
                            SubmitErrors::kReturn,
                            [&](absl::StatusOr<size_t> enqueued) {
                              result = std::move(enqueued);
                              done.Notify();
                            });
    done.WaitForNotification();
    return result;
  }

  absl::Status SubmitOne(Command command) {
    std::vector<Command> batch;
    batch.push_back(std::move(command));
    return SubmitBatch(std::move(batch)).status();
  }

  Core core_;
  uint64_t session_ = 0;
  uint64_t stream_ = 0;
};

TEST_F(CoreTest, FillCopyUploadAndReadRoundTrip) {
  const uint64_t a = Allocate(256);
  const uint64_t b = Allocate(256);
  std::vector<Command> batch;
  batch.push_back(FillCommand{{a, 0, 256}, 0x11});
  batch.push_back(UploadCommand{{a, 100, 50}, "hello"});
  batch.push_back(CopyCommand{{b, 0, 256}, {a, 0, 256}});
  ASSERT_THAT(SubmitBatch(std::move(batch)).status(), IsOk());
  auto bytes = Read({b, 98, 8});
  ASSERT_THAT(bytes.status(), IsOk());
  EXPECT_EQ(*bytes, std::string("\x11\x11hello\x11"));
  EXPECT_THAT(Sync(), IsOk());
}

TEST_F(CoreTest, BatchWithOneBadCommandEnqueuesNothing) {
  const uint64_t a = Allocate(64);
  std::vector<Command> batch;
  batch.push_back(FillCommand{{a, 0, 64}, 0xff});
  batch.push_back(FillCommand{{a, 60, 8}, 0xee});  // past the end
  EXPECT_THAT(SubmitBatch(std::move(batch)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("view_out_of_range"),
                             HasSubstr("submit command 2 of 2 (fill dst)"))));
  EXPECT_EQ(*Read({a, 0, 4}), std::string(4, '\0'));
  EXPECT_EQ(core_.admin().status().commands_submitted, 0u);
}

TEST_F(CoreTest, RefusesViewsWhoseEndWrapsPast2To64) {
  const uint64_t a = Allocate(4096);
  const uint64_t near_max = std::numeric_limits<uint64_t>::max() - 7;
  EXPECT_THAT(SubmitOne(FillCommand{{a, near_max, 16}, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("view_out_of_range")));
  EXPECT_THAT(Read({a, 16, std::numeric_limits<uint64_t>::max()}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("view_out_of_range")));
}

TEST_F(CoreTest, AcceptsZeroLengthCommandsAsNoOps) {
  const uint64_t a = Allocate(16);
  EXPECT_THAT(SubmitOne(FillCommand{{a, 16, 0}, 1}), IsOk());
  EXPECT_THAT(SubmitOne(CopyCommand{{a, 0, 0}, {a, 0, 0}}), IsOk());
  EXPECT_THAT(SubmitOne(UploadCommand{{a, 3, 0}, ""}), IsOk());
  EXPECT_EQ(*Read({a, 16, 0}), "");
  EXPECT_EQ(*Read({a, 0, 16}), std::string(16, '\0'));
}

TEST_F(CoreTest, ZeroByteAllocationRoundsUpToOne) {
  auto buffer = core_.buffers().Allocate(session_, 0, AllocationKind::kDevice);
  ASSERT_THAT(buffer.status(), IsOk());
  EXPECT_EQ(buffer->bytes, 1u);
}

TEST_F(CoreTest, RefusesUnequalAndOverlappingCopies) {
  const uint64_t a = Allocate(64);
  EXPECT_THAT(SubmitOne(CopyCommand{{a, 0, 8}, {a, 32, 16}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("copy_length_mismatch")));
  EXPECT_THAT(
      SubmitOne(CopyCommand{{a, 0, 16}, {a, 8, 16}}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("copy_overlap")));
  EXPECT_THAT(SubmitOne(CopyCommand{{a, 0, 16}, {a, 16, 16}}), IsOk());
}

TEST_F(CoreTest, RefusesUploadLargerThanItsView) {
  const uint64_t a = Allocate(64);
  EXPECT_THAT(SubmitOne(UploadCommand{{a, 0, 4}, "12345"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("upload_too_large"),
                             HasSubstr("5 bytes"), HasSubstr("4-byte"))));
}

TEST_F(CoreTest, FreedBufferHandleIsStaleAndMemoryOutlivesQueuedWork) {
  const uint64_t a = Allocate(1 << 20);
  ASSERT_THAT(SubmitOne(FillCommand{{a, 0, 1 << 20}, 3}), IsOk());
  ASSERT_THAT(core_.buffers().Free(session_, a), IsOk());
  EXPECT_THAT(SubmitOne(FillCommand{{a, 0, 1}, 3}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("stale_handle")));
  EXPECT_THAT(core_.buffers().Free(session_, a),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("stale_handle")));
  ASSERT_THAT(Sync(), IsOk());
  // The freed 1 MiB now sits in the session's allocation pool, for reuse.
  const CoreStatus status = core_.admin().status();
  EXPECT_EQ(status.allocation_pool.entries, 1u);
  EXPECT_EQ(status.bytes_in_use, uint64_t{1} << 20);
}

TEST_F(CoreTest, ReadLimitIsInclusiveAtEightMiB) {
  const uint64_t a = Allocate(kMaxInlineReadBytes + 1);
  auto at_limit = Read({a, 0, kMaxInlineReadBytes});
  ASSERT_THAT(at_limit.status(), IsOk());
  EXPECT_EQ(at_limit->size(), kMaxInlineReadBytes);
  EXPECT_THAT(Read({a, 0, kMaxInlineReadBytes + 1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("read_too_large")));
}

TEST_F(CoreTest, BatchLimitIsInclusive) {
  const uint64_t a = Allocate(8);
  std::vector<Command> at_limit(kMaxCommandsPerSubmit,
                                FillCommand{{a, 0, 8}, 1});
  EXPECT_THAT(SubmitBatch(at_limit), IsOk());
  std::vector<Command> over(kMaxCommandsPerSubmit + 1,
                            FillCommand{{a, 0, 8}, 1});
  EXPECT_THAT(SubmitBatch(over), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("batch_too_large")));
}

TEST_F(CoreTest, DeviceMemoryLimitIsInclusive) {
  const uint64_t used = core_.admin().status().bytes_in_use;
  auto fits = core_.buffers().Allocate(session_, kDeviceBytes - used,
                                       AllocationKind::kDevice);
  ASSERT_THAT(fits.status(), IsOk());
  EXPECT_THAT(core_.buffers().Allocate(session_, 1, AllocationKind::kDevice),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("device_memory_exhausted")));
}

TEST_F(CoreTest, SessionLimitIsInclusive) {
  for (uint64_t i = 1; i < kMaxSessions; ++i) {
    ASSERT_THAT(core_.OpenSession("more", Me()).status(), IsOk()) << i;
  }
  EXPECT_THAT(core_.OpenSession("one too many", Me()),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("too_many_sessions")));
}

TEST_F(CoreTest, StreamsAreAssignedRoundRobinOverTheQueuePool) {
  // The fixture's stream took queue 0.
  for (uint32_t i = 1; i < kDefaultQueueCount + 2; ++i) {
    auto stream = core_.commands().CreateStream(session_);
    ASSERT_THAT(stream.status(), IsOk());
    EXPECT_EQ(stream->queue, i % kDefaultQueueCount);
  }
  EXPECT_EQ(core_.admin().device_info().queue_count, kDefaultQueueCount);
}

TEST_F(CoreTest, CloseSessionFreesEverythingAndStalesItsHandle) {
  Allocate(1024);
  Allocate(2048);
  absl::Notification done;
  CloseSummary summary;
  core_.CloseSession(session_, [&](absl::StatusOr<CloseSummary> result) {
    ASSERT_THAT(result.status(), IsOk());
    summary = *result;
    done.Notify();
  });
  done.WaitForNotification();
  EXPECT_EQ(summary.freed_buffers, 2u);
  EXPECT_EQ(summary.freed_streams, 1u);
  const CoreStatus status = core_.admin().status();
  EXPECT_EQ(status.sessions, 0u);
  EXPECT_EQ(status.bytes_in_use, 0u);
  EXPECT_THAT(core_.buffers().Allocate(session_, 1, AllocationKind::kDevice),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("stale_handle")));
}

}  // namespace
}  // namespace hrx::daemon
