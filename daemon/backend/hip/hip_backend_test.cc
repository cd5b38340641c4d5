// The HIP backend against a real GPU. Needs one: it runs on the device
// machine (tools/gpu_run.sh), not in CI, which has no GPU.
#include "daemon/backend/hip/hip_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "daemon/backend/hip/hip_pinned_pool.h"
#include "daemon/backend/hip/hip_queue.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/status_matchers.h"
#include "tests/subprocess.h"

namespace hrx::backend {
namespace {

using ::hrx::shared::IsOk;
using ::hrx::shared::StatusIs;
using ::testing::HasSubstr;

std::string ReadKernel(const std::string& name) {
  const std::string path =
      hrx::testing::RunfilePath("tests/kernels/gpu/" + name + ".cubin");
  std::string bytes = hrx::testing::ReadFile(path);
  EXPECT_FALSE(bytes.empty()) << path;
  return bytes;
}

class HipBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = HipBackend::Open({});
    ASSERT_THAT(opened.status(), IsOk());
    backend_ = *std::move(opened);
  }
  MemoryRef Allocate(uint64_t bytes, MemoryKind kind = MemoryKind::kDevice) {
    auto memory = backend_->Allocate(bytes, kind, true);
    EXPECT_THAT(memory.status(), IsOk());
    return memory.ok() ? *memory : nullptr;
  }
  std::unique_ptr<HipBackend> backend_;
};

TEST_F(HipBackendTest, ReportsTheGpuAndItsTarget) {
  EXPECT_EQ(backend_->properties().backend, "hip");
  EXPECT_THAT(backend_->properties().target, ::testing::StartsWith("sm_"));
  EXPECT_GT(backend_->properties().memory_bytes, uint64_t{1} << 30);
  RecordProperty("stream_ordered_allocation",
                 backend_->stream_ordered_allocation() ? "yes" : "no");
  std::printf("stream-ordered allocation: %s\n",
              backend_->stream_ordered_allocation() ? "yes" : "no");
}

TEST_F(HipBackendTest, FillsWritesCopiesAndReadsInOrder) {
  auto queue = *backend_->CreateQueue();
  MemoryRef a = Allocate(1 << 20);
  MemoryRef b = Allocate(1 << 20);
  ASSERT_THAT(queue->EnqueueFill(a, 0, 1 << 20, 0x5a).status(), IsOk());
  ASSERT_THAT(
      queue->EnqueueWrite(a, 8, std::make_shared<const std::string>("hrx"))
          .status(),
      IsOk());
  ASSERT_THAT(queue->EnqueueCopy(b, 0, a, 0, 1 << 20).status(), IsOk());
  std::vector<uint8_t> out(1 << 20);
  const Fence fence = *queue->EnqueueRead(b, 0, out.size(), out.data());
  ASSERT_THAT(queue->Wait(fence), IsOk());
  EXPECT_GE(queue->completed(), fence);
  EXPECT_EQ(out[0], 0x5a);
  EXPECT_EQ(std::string(out.begin() + 8, out.begin() + 11), "hrx");
  EXPECT_EQ(out.back(), 0x5a);
}

TEST_F(HipBackendTest, SharedMemoryIsSeenByTheHostAndTheDevice) {
  auto queue = *backend_->CreateQueue();
  MemoryRef shared = Allocate(8192, MemoryKind::kHostCoherent);
  ASSERT_NE(shared->host_address(), nullptr);
  std::memset(shared->host_address(), 7, 8192);
  MemoryRef device = Allocate(8192);
  ASSERT_THAT(queue->EnqueueCopy(device, 0, shared, 0, 8192).status(), IsOk());
  ASSERT_THAT(queue->EnqueueFill(shared, 0, 4096, 9).status(), IsOk());
  std::vector<uint8_t> out(8192);
  const Fence fence = *queue->EnqueueRead(device, 0, 8192, out.data());
  ASSERT_THAT(queue->Wait(fence), IsOk());
  EXPECT_EQ(out[100], 7);
  EXPECT_EQ(shared->host_address()[100], 9);
  EXPECT_EQ(shared->host_address()[5000], 7);
  // Another process's view: a mapping of the exported memfd.
  auto fd = shared->ExportFd(ExportKind::kShm);
  ASSERT_THAT(fd.status(), IsOk());
  void* view = mmap(nullptr, 8192, PROT_READ, MAP_SHARED, *fd, 0);
  ASSERT_NE(view, MAP_FAILED);
  EXPECT_EQ(static_cast<uint8_t*>(view)[0], 9);
  munmap(view, 8192);
  close(*fd);
}

// What an executor does with another executor's shared buffer (hrxd passes
// the memfd over): a second backend registers the same pages, its queue
// fills them, and the maker's host view and queue see it.
TEST_F(HipBackendTest, AnotherBackendImportsSharedMemoryAndSharesItsBytes) {
  MemoryRef shared = Allocate(3 * 4096 + 100, MemoryKind::kHostCoherent);
  std::memset(shared->host_address(), 0x21, shared->size());
  auto other = HipBackend::Open({});
  ASSERT_THAT(other.status(), IsOk());
  auto fd = shared->ExportFd(ExportKind::kShm);
  ASSERT_THAT(fd.status(), IsOk());
  auto imported =
      (*other)->ImportShm(*fd, shared->size(), MemoryKind::kHostCoherent);
  ASSERT_THAT(imported.status(), IsOk());
  // Not charged to the importer: the maker's accounting holds the bytes.
  EXPECT_EQ((*other)->bytes_in_use(), 0u);
  auto other_queue = *(*other)->CreateQueue();
  ASSERT_THAT(
      other_queue->Wait(*other_queue->EnqueueFill(*imported, 4096, 4096, 0x43)),
      IsOk());
  EXPECT_EQ(shared->host_address()[4095], 0x21);
  EXPECT_EQ(shared->host_address()[4096], 0x43);
  EXPECT_EQ(shared->host_address()[8191], 0x43);
  EXPECT_EQ(shared->host_address()[8192], 0x21);
  // The maker's queue reads what the importer's wrote.
  auto queue = *backend_->CreateQueue();
  std::vector<uint8_t> out(shared->size());
  ASSERT_THAT(
      queue->Wait(*queue->EnqueueRead(shared, 0, out.size(), out.data())),
      IsOk());
  EXPECT_EQ(out[5000], 0x43);
  EXPECT_EQ(out.back(), 0x21);
}

TEST_F(HipBackendTest, DeviceMemoryExportsAsDmaBufButNotAsShm) {
  MemoryRef device = Allocate(2 << 20);
  EXPECT_THAT(device->ExportFd(ExportKind::kShm),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("not_host_mappable")));
  auto fd = device->ExportFd(ExportKind::kDmaBuf);
  ASSERT_THAT(fd.status(), IsOk());
  close(*fd);
}

TEST_F(HipBackendTest, AddF32OverSixteenMillionFloatsIsExact) {
  auto kernel = backend_->LoadKernel(ReadKernel("add_f32"), "add_f32");
  ASSERT_THAT(kernel.status(), IsOk());
  EXPECT_EQ((*kernel)->signature().args.size(), 3u);
  constexpr uint32_t kCount = 16 << 20;
  MemoryRef data = Allocate(uint64_t{kCount} * 4);
  auto queue = *backend_->CreateQueue();
  auto dispatch = std::make_shared<DispatchArgs>();
  dispatch->kernel = *kernel;
  dispatch->grid = {kCount / 256, 1, 1};
  dispatch->block = {256, 1, 1};
  const float value = 2.5f;
  dispatch->constants.append(reinterpret_cast<const char*>(&kCount), 4);
  dispatch->constants.append(reinterpret_cast<const char*>(&value), 4);
  dispatch->bindings.push_back({data, 0, uint64_t{kCount} * 4});
  ASSERT_THAT(queue->EnqueueDispatch(dispatch).status(), IsOk());
  ASSERT_THAT(queue->EnqueueDispatch(dispatch).status(), IsOk());
  std::vector<float> out(kCount);
  const Fence fence =
      *queue->EnqueueRead(data, 0, uint64_t{kCount} * 4, out.data());
  ASSERT_THAT(queue->Wait(fence), IsOk());
  for (uint32_t i = 0; i < kCount; ++i) ASSERT_EQ(out[i], 5.0f) << i;
}

TEST_F(HipBackendTest, LoadingRefusesJunkAMissingEntryAndItsInfo) {
  EXPECT_THAT(backend_->LoadKernel("junk", "add_f32"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("bad_kernel"), HasSubstr("Fix:"))));
  EXPECT_THAT(backend_->LoadKernel(ReadKernel("add_f32"), "saxpy"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("exports no saxpy")));
}

TEST_F(HipBackendTest, ADeclarationTheCompiledParametersContradictIsRefused) {
  EXPECT_THAT(
      backend_->LoadKernel(ReadKernel("mismatched_layout"),
                           "mismatched_layout"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("kernel_layout_mismatch"),
                     HasSubstr("parameter 1 is 16 bytes"), HasSubstr("Fix:"))));
}

TEST_F(HipBackendTest, AQueueWaitsForAnotherQueuesFence) {
  auto gate_kernel =
      *backend_->LoadKernel(ReadKernel("wait_flag"), "wait_flag");
  auto first = *backend_->CreateQueue();
  auto second = *backend_->CreateQueue();
  MemoryRef flag = Allocate(4096);
  MemoryRef data = Allocate(4096);
  auto gate = std::make_shared<DispatchArgs>();
  gate->kernel = gate_kernel;
  gate->bindings.push_back({flag, 0, 1});
  // first: wait for the flag, then fill data with 1.
  ASSERT_THAT(first->EnqueueDispatch(gate).status(), IsOk());
  const Fence filled = *first->EnqueueFill(data, 0, 4096, 1);
  // second: after first's fill, copy data into flag's second page... and
  // open the gate from the host-side write on second.
  const Fence waited = *second->EnqueueWaitFor(*first, filled);
  std::vector<uint8_t> out(4096);
  const Fence read = *second->EnqueueRead(data, 0, 4096, out.data());
  EXPECT_LT(first->completed(), filled);
  auto open = *backend_->CreateQueue();
  ASSERT_THAT(open->Wait(*open->EnqueueFill(flag, 0, 1, 1)), IsOk());
  ASSERT_THAT(second->Wait(read), IsOk());
  EXPECT_GE(second->completed(), waited);
  EXPECT_EQ(out[0], 1);
  EXPECT_EQ(out[4095], 1);
}

TEST_F(HipBackendTest, FreesNeverStallCompletionsBehindAnotherQueuesKernel) {
  auto gate_kernel =
      *backend_->LoadKernel(ReadKernel("wait_flag"), "wait_flag");
  auto gated = *backend_->CreateQueue();
  auto other = *backend_->CreateQueue();
  MemoryRef flag = Allocate(4096);
  MemoryRef scratch = Allocate(1 << 20);
  MemoryRef data = Allocate(4096);
  auto gate = std::make_shared<DispatchArgs>();
  gate->kernel = gate_kernel;
  gate->bindings.push_back({flag, 0, 1});
  const Fence gated_fence = *gated->EnqueueDispatch(gate);
  // `other` holds the last reference to `scratch` once it is dropped here;
  // releasing it after the fill (hipFree waits for the device to go idle)
  // must not hold up `other`'s next completion while the gate still runs.
  const Fence first = *other->EnqueueFill(scratch, 0, 1 << 20, 1);
  scratch.reset();
  ASSERT_THAT(other->Wait(first), IsOk());
  ASSERT_THAT(other->Wait(*other->EnqueueFill(data, 0, 4096, 2)), IsOk());
  EXPECT_LT(gated->completed(), gated_fence);
  auto opener = *backend_->CreateQueue();
  ASSERT_THAT(opener->Wait(*opener->EnqueueFill(flag, 0, 1, 1)), IsOk());
  ASSERT_THAT(gated->Wait(gated_fence), IsOk());
}

TEST_F(HipBackendTest, GraphsReplayAndProfiledReplaysTimeEachNode) {
  auto kernel = *backend_->LoadKernel(ReadKernel("add_f32"), "add_f32");
  MemoryRef data = Allocate(1024 * 4);
  MemoryRef copy = Allocate(1024 * 4);
  auto dispatch = std::make_shared<DispatchArgs>();
  dispatch->kernel = kernel;
  dispatch->grid = {4, 1, 1};
  dispatch->block = {256, 1, 1};
  const uint32_t count = 1024;
  const float one = 1.0f;
  dispatch->constants.append(reinterpret_cast<const char*>(&count), 4);
  dispatch->constants.append(reinterpret_cast<const char*>(&one), 4);
  dispatch->bindings.push_back({data, 0, 1024 * 4});
  auto plan = std::make_shared<GraphPlan>();
  plan->nodes.push_back({FillOp{data, 0, 1024 * 4, 0}, {}});
  for (uint32_t i = 0; i < 3; ++i) {
    plan->nodes.push_back({DispatchRef(dispatch), {i}});
  }
  plan->nodes.push_back({CopyOp{copy, 0, data, 0, 1024 * 4}, {3}});
  auto queue = *backend_->CreateQueue();
  ASSERT_THAT(queue->EnqueueGraph(plan, nullptr).status(), IsOk());
  ASSERT_THAT(queue->EnqueueGraph(plan, nullptr).status(), IsOk());
  std::vector<uint64_t> nanoseconds(plan->nodes.size(), 0);
  ASSERT_THAT(queue->EnqueueGraph(plan, &nanoseconds).status(), IsOk());
  std::vector<float> result(1024);
  ASSERT_THAT(queue->Wait(*queue->EnqueueRead(copy, 0, 4096, result.data())),
              IsOk());
  for (float value : result) ASSERT_EQ(value, 3.0f);
  EXPECT_GT(nanoseconds[1], 0u);
}

TEST_F(HipBackendTest, HostCallbacksRunAfterEarlierWork) {
  auto queue = *backend_->CreateQueue();
  MemoryRef data = Allocate(1 << 20);
  ASSERT_THAT(queue->EnqueueFill(data, 0, 1 << 20, 3).status(), IsOk());
  absl::Notification called;
  absl::Status seen = absl::UnknownError("not called");
  const Fence marker = *queue->EnqueueHostCallback([&](absl::Status status) {
    seen = status;
    called.Notify();
  });
  ASSERT_THAT(queue->Wait(marker), IsOk());
  called.WaitForNotification();
  EXPECT_THAT(seen, IsOk());
}

TEST_F(HipBackendTest, FencesCompleteUnaskedOnlyEveryEventStrideCommands) {
  auto queue = *backend_->CreateQueue();
  MemoryRef data = Allocate(4096);
  for (Fence i = 1; i < kEventStride; ++i) {
    ASSERT_THAT(queue->EnqueueFill(data, 0, 4096, 1).status(), IsOk());
  }
  // The fills are long done on the GPU, but no event reports them yet.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(queue->completed(), 0u);
  // The stride-th command records one: completion arrives unasked.
  const Fence stride = *queue->EnqueueFill(data, 0, 4096, 2);
  ASSERT_EQ(stride, kEventStride);
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (queue->completed() < stride &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(queue->completed(), stride);
  // Asking about a fence records what it needs.
  const Fence next = *queue->EnqueueFill(data, 0, 4096, 3);
  ASSERT_THAT(queue->Wait(next), IsOk());
  EXPECT_EQ(queue->completed(), next);
}

TEST_F(HipBackendTest, TheBouncePoolKeepsAtMostItsLimitOfIdleBuffers) {
  auto pool = std::make_shared<HipPinnedPool>(0);
  std::vector<HipPinnedPool::BufferRef> held;
  for (size_t i = 0; i < kMaxIdleBounceBuffers + 2; ++i) {
    auto buffer = pool->Take(4096);
    ASSERT_THAT(buffer.status(), IsOk());
    held.push_back(*buffer);
  }
  EXPECT_EQ(pool->idle_count(), 0u);
  held.resize(kMaxIdleBounceBuffers - 1);
  held.clear();
  EXPECT_EQ(pool->idle_count(), kMaxIdleBounceBuffers);
  // A fitting idle buffer is reused, not allocated.
  auto again = pool->Take(1024);
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_EQ(pool->idle_count(), kMaxIdleBounceBuffers - 1);
}

TEST_F(HipBackendTest, AKernelThatTrapsFailsTheQueueNamingTheKernel) {
  auto kernel = *backend_->LoadKernel(ReadKernel("add_f32"), "add_f32");
  MemoryRef data = Allocate(16);
  auto dispatch = std::make_shared<DispatchArgs>();
  dispatch->kernel = kernel;
  const uint32_t count = 1000;  // more floats than the binding holds
  const float one = 1.0f;
  dispatch->constants.append(reinterpret_cast<const char*>(&count), 4);
  dispatch->constants.append(reinterpret_cast<const char*>(&one), 4);
  dispatch->bindings.push_back({data, 0, 16});
  // The handler an executor ends on: told once, with the fault.
  std::atomic<int> told{0};
  absl::Status told_why;
  backend_->OnDeviceLost([&](const absl::Status& why) {
    told_why = why;
    told.fetch_add(1);
  });
  auto queue = *backend_->CreateQueue();
  const Fence fence = *queue->EnqueueDispatch(dispatch);
  EXPECT_THAT(queue->Wait(fence), StatusIs(absl::StatusCode::kInternal,
                                           AllOf(HasSubstr("kernel_failed"),
                                                 HasSubstr("add_f32"))));
  // The context is lost for the whole device, and the backend says so.
  EXPECT_THAT(backend_->device_status(), StatusIs(absl::StatusCode::kInternal,
                                                  HasSubstr("kernel_failed")));
  // A second queue's failure tells nobody again.
  auto second = backend_->CreateQueue();
  if (second.ok()) {
    auto later = (*second)->EnqueueDispatch(dispatch);
    if (later.ok()) {
      EXPECT_FALSE((*second)->Wait(*later).ok());
    }
  }
  EXPECT_EQ(told.load(), 1);
  EXPECT_THAT(told_why, StatusIs(absl::StatusCode::kInternal,
                                 HasSubstr("kernel_failed")));
}

}  // namespace
}  // namespace hrx::backend
