#include "daemon/backend/cpu/cpu_backend.h"

#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/status_matchers.h"

namespace hrx::backend {
namespace {

using ::hrx::shared::IsOk;
using ::hrx::shared::StatusIs;
using ::testing::HasSubstr;

TEST(CpuBackendTest, ReportsCpuBackendAndConfiguredMemory) {
  CpuBackend backend({.memory_bytes = 1 << 20});
  EXPECT_EQ(backend.properties().backend, "cpu");
  EXPECT_EQ(backend.properties().memory_bytes, 1u << 20);
  EXPECT_FALSE(backend.properties().target.empty());
}

TEST(CpuBackendTest, AllocatesUpToTheLimitAndRefusesOneByteMore) {
  CpuBackend backend({.memory_bytes = 4096});
  auto first = backend.Allocate(4000, MemoryKind::kDevice, true);
  ASSERT_THAT(first.status(), IsOk());
  auto rest = backend.Allocate(96, MemoryKind::kDevice, false);
  ASSERT_THAT(rest.status(), IsOk());
  EXPECT_EQ(backend.bytes_in_use(), 4096u);
  EXPECT_THAT(backend.Allocate(1, MemoryKind::kDevice, false),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("device_memory_exhausted")));
  rest->reset();
  EXPECT_EQ(backend.bytes_in_use(), 4000u);
  EXPECT_THAT(backend.Allocate(96, MemoryKind::kDevice, false).status(), IsOk());
}

TEST(CpuBackendTest, QueueRunsCommandsInOrderAndPublishesFences) {
  CpuBackend backend({.memory_bytes = 1 << 20});
  auto queue = *backend.CreateQueue();
  MemoryRef a = *backend.Allocate(64, MemoryKind::kDevice, true);
  MemoryRef b = *backend.Allocate(64, MemoryKind::kDevice, true);
  ASSERT_THAT(queue->EnqueueFill(a, 0, 64, 0x5a).status(), IsOk());
  ASSERT_THAT(queue->EnqueueWrite(a, 8, std::make_shared<const std::string>("hrx"))
                  .status(),
              IsOk());
  ASSERT_THAT(queue->EnqueueCopy(b, 0, a, 0, 64).status(), IsOk());
  std::vector<uint8_t> out(64);
  const Fence fence = *queue->EnqueueRead(b, 0, 64, out.data());
  ASSERT_THAT(queue->Wait(fence), IsOk());
  EXPECT_GE(queue->completed(), fence);
  EXPECT_EQ(out[0], 0x5a);
  EXPECT_EQ(std::string(out.begin() + 8, out.begin() + 11), "hrx");
  EXPECT_EQ(out[63], 0x5a);
}

TEST(CpuBackendTest, HostCallbackRunsAfterEarlierWork) {
  CpuBackend backend({.memory_bytes = 1 << 20});
  auto queue = *backend.CreateQueue();
  MemoryRef a = *backend.Allocate(1 << 16, MemoryKind::kDevice, false);
  ASSERT_THAT(queue->EnqueueFill(a, 0, 1 << 16, 7).status(), IsOk());
  absl::Notification done;
  Fence seen = 0;
  Queue* raw = queue.get();
  ASSERT_THAT(queue->EnqueueHostCallback([&](absl::Status status) {
                    EXPECT_THAT(status, IsOk());
                    seen = raw->completed();
                    done.Notify();
                  }).status(),
              IsOk());
  done.WaitForNotification();
  EXPECT_GE(seen, 1u);
}

TEST(CpuBackendTest, QueuedCommandKeepsFreedMemoryAlive) {
  CpuBackend backend({.memory_bytes = 1 << 20});
  auto queue = *backend.CreateQueue();
  MemoryRef a = *backend.Allocate(4096, MemoryKind::kDevice, false);
  std::vector<uint8_t> out(4096);
  ASSERT_THAT(queue->EnqueueFill(a, 0, 4096, 9).status(), IsOk());
  const Fence fence = *queue->EnqueueRead(a, 0, 4096, out.data());
  a.reset();  // the client freed it; the queue still holds it
  ASSERT_THAT(queue->Wait(fence), IsOk());
  EXPECT_EQ(out[4095], 9);
  EXPECT_EQ(backend.bytes_in_use(), 0u);
}

}  // namespace
}  // namespace hrx::backend
