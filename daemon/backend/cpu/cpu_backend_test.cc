#include "daemon/backend/cpu/cpu_backend.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "daemon/backend/cpu/object_unloader.h"
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
  EXPECT_THAT(backend.Allocate(96, MemoryKind::kDevice, false).status(),
              IsOk());
}

TEST(CpuBackendTest, QueueRunsCommandsInOrderAndPublishesFences) {
  CpuBackend backend({.memory_bytes = 1 << 20});
  auto queue = *backend.CreateQueue();
  MemoryRef a = *backend.Allocate(64, MemoryKind::kDevice, true);
  MemoryRef b = *backend.Allocate(64, MemoryKind::kDevice, true);
  ASSERT_THAT(queue->EnqueueFill(a, 0, 64, 0x5a).status(), IsOk());
  ASSERT_THAT(
      queue->EnqueueWrite(a, 8, std::make_shared<const std::string>("hrx"))
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
  ASSERT_THAT(queue
                  ->EnqueueHostCallback([&](absl::Status status) {
                    EXPECT_THAT(status, IsOk());
                    seen = raw->completed();
                    done.Notify();
                  })
                  .status(),
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

std::string KernelBytes(const std::string& name) {
  const std::string path = std::string(std::getenv("TEST_SRCDIR")) + "/" +
                           std::getenv("TEST_WORKSPACE") + "/tests/kernels/" +
                           name + ".so";
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

TEST(CpuBackendTest, LoadsAKernelFromBytesAndReadsItsSignature) {
  CpuBackend backend({.memory_bytes = 1 << 20});
  auto kernel =
      backend.LoadKernel(KernelBytes("write_pattern"), "write_pattern");
  ASSERT_THAT(kernel.status(), IsOk());
  const KernelSignature& signature = (*kernel)->signature();
  ASSERT_EQ(signature.args.size(), 3u);
  EXPECT_EQ(signature.args[0], (KernelArg{ArgKind::kScalar, 8}));
  EXPECT_EQ(signature.args[1], (KernelArg{ArgKind::kScalar, 4}));
  EXPECT_EQ(signature.args[2], (KernelArg{ArgKind::kBuffer, 0}));
  EXPECT_EQ(signature.workgroup_size[0], 64u);
}

TEST(CpuBackendTest, RefusesBytesThatAreNotAKernel) {
  CpuBackend backend({.memory_bytes = 1 << 20});
  EXPECT_THAT(backend.LoadKernel("not an elf object", "add_f32"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not a loadable shared object")));
  EXPECT_THAT(backend.LoadKernel(KernelBytes("add_f32"), "no_such_entry"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("exports no no_such_entry")));
}

TEST(CpuBackendTest, DispatchRunsEveryWorkgroupOverThePool) {
  CpuBackend backend({.memory_bytes = 64 << 20});
  auto queue = *backend.CreateQueue();
  constexpr uint32_t kCount = 1000003;  // not a multiple of the block
  MemoryRef data = *backend.Allocate(kCount * 4, MemoryKind::kDevice, true);
  auto dispatch = std::make_shared<DispatchArgs>();
  dispatch->kernel = *backend.LoadKernel(KernelBytes("add_f32"), "add_f32");
  dispatch->grid = {(kCount + 255) / 256, 1, 1};
  dispatch->block = {256, 1, 1};
  const float value = 1.5f;
  dispatch->constants.append(reinterpret_cast<const char*>(&kCount), 4);
  dispatch->constants.append(reinterpret_cast<const char*>(&value), 4);
  dispatch->bindings.push_back({data, 0, kCount * 4});
  ASSERT_THAT(queue->EnqueueDispatch(dispatch).status(), IsOk());
  const Fence fence = *queue->EnqueueDispatch(dispatch);
  ASSERT_THAT(queue->Wait(fence), IsOk());
  std::vector<float> out(kCount);
  std::memcpy(out.data(), data->host_address(), kCount * 4);
  for (uint32_t i = 0; i < kCount; ++i) ASSERT_EQ(out[i], 3.0f) << i;
}

TEST(CpuBackendTest, AKernelObjectStaysMappedWhileAThreadItStartedLives) {
  CpuBackend backend({.memory_bytes = 1 << 20});
  auto queue = *backend.CreateQueue();
  MemoryRef out = *backend.Allocate(16, MemoryKind::kDevice, true);
  const size_t kept_before = ObjectUnloader::Get().kept();
  {
    auto dispatch = std::make_shared<DispatchArgs>();
    dispatch->kernel = *backend.LoadKernel(KernelBytes("linger"), "linger");
    dispatch->bindings.push_back({out, 0, 16});
    ASSERT_THAT(queue->Wait(*queue->EnqueueDispatch(dispatch)), IsOk());
  }  // the kernel's last reference goes
  // Its thread wakes every millisecond in the object's code: were the
  // object unmapped, this process would crash within a few.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(ObjectUnloader::Get().kept(), kept_before + 1);
  // An object loaded after that thread started is unloaded at once (and
  // the lingering one is tried again, and kept).
  {
    auto kernel =
        backend.LoadKernel(KernelBytes("write_pattern"), "write_pattern");
  }
  EXPECT_EQ(ObjectUnloader::Get().kept(), kept_before + 1);
}

TEST(CpuBackendTest, AFailingKernelFaultsItsQueue) {
  CpuBackend backend({.memory_bytes = 1 << 20});
  auto queue = *backend.CreateQueue();
  MemoryRef data = *backend.Allocate(16, MemoryKind::kDevice, true);
  auto dispatch = std::make_shared<DispatchArgs>();
  dispatch->kernel = *backend.LoadKernel(KernelBytes("add_f32"), "add_f32");
  const uint32_t too_many = 1000;  // the binding holds 4 floats
  const float value = 1.0f;
  dispatch->constants.append(reinterpret_cast<const char*>(&too_many), 4);
  dispatch->constants.append(reinterpret_cast<const char*>(&value), 4);
  dispatch->bindings.push_back({data, 0, 16});
  const Fence fence = *queue->EnqueueDispatch(dispatch);
  EXPECT_THAT(queue->Wait(fence), StatusIs(absl::StatusCode::kInternal,
                                           HasSubstr("kernel_failed")));
}

TEST(CpuBackendTest, OnCompleteFiresAtOnceOrWhenTheFenceCompletes) {
  CpuBackend backend({.memory_bytes = 1 << 20});
  auto queue = *backend.CreateQueue();
  bool immediate = false;
  queue->OnComplete(0, [&](absl::Status) { immediate = true; });
  EXPECT_TRUE(immediate);
  absl::Notification gate, done;
  ASSERT_THAT(queue
                  ->EnqueueHostCallback(
                      [&](absl::Status) { gate.WaitForNotification(); })
                  .status(),
              IsOk());
  const Fence later = *queue->EnqueueHostCallback([](absl::Status) {});
  queue->OnComplete(later, [&](absl::Status) { done.Notify(); });
  EXPECT_FALSE(done.HasBeenNotified());
  gate.Notify();
  done.WaitForNotification();
}

TEST(CpuBackendTest, WaitForOrdersOneQueueAfterAnother) {
  CpuBackend backend({.memory_bytes = 1 << 20});
  auto producer = *backend.CreateQueue();
  auto consumer = *backend.CreateQueue();
  MemoryRef a = *backend.Allocate(64, MemoryKind::kDevice, true);
  MemoryRef b = *backend.Allocate(64, MemoryKind::kDevice, true);
  absl::Notification gate;
  ASSERT_THAT(producer
                  ->EnqueueHostCallback(
                      [&](absl::Status) { gate.WaitForNotification(); })
                  .status(),
              IsOk());
  const Fence filled = *producer->EnqueueFill(a, 0, 64, 0x77);
  ASSERT_THAT(consumer->EnqueueWaitFor(*producer, filled).status(), IsOk());
  const Fence copied = *consumer->EnqueueCopy(b, 0, a, 0, 64);
  EXPECT_LT(consumer->completed(), copied);
  gate.Notify();
  ASSERT_THAT(consumer->Wait(copied), IsOk());
  EXPECT_EQ(b->host_address()[63], 0x77);
}

}  // namespace
}  // namespace hrx::backend
