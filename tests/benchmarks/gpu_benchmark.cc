// The HIP backend on a real GPU, through the daemon against in-process use
// of the same backend, in one run (the machine is shared: only ratios taken
// in the same run mean anything):
//   1. small dispatches (add_f32 over 256 floats), batched on a stream,
//      against the same dispatches on an in-process HipQueue;
//   2. a 64-node graph of small dispatches launched through the daemon,
//      against the same graph launched in-process;
//   3. a 1-byte fill and its wait, and batched 64-byte fills, through the
//      daemon and on an in-process HipQueue, against the runtime's own
//      memset on a stream (hipMemsetD8Async, cudaMemsetAsync on NVIDIA)
//      and its stream synchronize;
//   4. host-to-device bandwidth from a shared buffer (client-mapped memfd)
//      through the daemon, against the runtime's pinned copy
//      (hipHostMalloc + hipMemcpyAsync) and an in-process registered memfd.
//
// Runs where a GPU is: tools/gpu_run.sh runs it on the device machine.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "daemon/backend/hip/hip_backend.h"
#include "daemon/backend/hip/hip_kernel.h"
#include "daemon/backend/hip/hip_memory.h"
#include "daemon/backend/hip/hip_platform.h"
#include "daemon/backend/hip/hip_status.h"
#include "daemon/mutex_checks.h"
#include "hrx/client.h"
#include "tests/benchmarks/median.h"
#include "tests/subprocess.h"
#include "tests/test_daemon.h"

namespace {

using Clock = std::chrono::steady_clock;
using hrx::backend::DispatchArgs;
using hrx::backend::GraphNode;
using hrx::backend::GraphPlan;
using hrx::backend::MemoryKind;
using hrx::backend::MemoryRef;

constexpr int kDispatches = 2000;  // per batched round
constexpr int kGraphNodes = 64;
constexpr int kGraphLaunches = 300;
constexpr uint32_t kSmallFloats = 256;
constexpr uint64_t kTransferBytes = 256ull << 20;
constexpr int kTransfers = 10;
constexpr int kBatchedFills = 20000;  // per batched round
constexpr uint64_t kFillBytes = 64;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int Fail(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "gpu_benchmark: %s: %s\n", what,
               status.ToString().c_str());
  return 1;
}

// Best of `repeats` timings of `round`, after one warm-up round.
template <typename F>
double Best(int repeats, F round) {
  round();
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    round();
    best = std::min(best, Seconds(start));
  }
  return best;
}

std::string AddConstants(uint32_t n, float value) {
  std::string packed(8, '\0');
  std::memcpy(packed.data(), &n, 4);
  std::memcpy(packed.data() + 4, &value, 4);
  return packed;
}

}  // namespace

int main() {
  // The in-process baseline runs as hrxd does (daemon/mutex_checks.h).
  hrx::daemon::ConfigureMutexChecks();
  using hrx::testing::RunfilePath;
  const std::string cubin =
      hrx::testing::ReadFile(RunfilePath("tests/kernels/gpu/add_f32.cubin"));
  bool ok = true;
  auto check = [&ok](const absl::Status& status) {
    if (!status.ok() && ok) {
      std::fprintf(stderr, "gpu_benchmark: %s\n", status.ToString().c_str());
    }
    ok = ok && status.ok();
  };

  // --- In-process: the same backend the daemon runs. -----------------------
  double raw_dispatch = 0, local_dispatch = 0, local_graph = 0, pinned_copy = 0,
         local_registered = 0;
  std::string device_name;
  {
    auto backend = hrx::backend::HipBackend::Open({});
    if (!backend.ok()) return Fail("open the GPU", backend.status());
    device_name = (*backend)->properties().name;
    auto kernel = *(*backend)->LoadKernel(cubin, "add_f32");
    auto queue = *(*backend)->CreateQueue();
    MemoryRef small =
        *(*backend)->Allocate(kSmallFloats * 4, MemoryKind::kDevice, true);
    auto dispatch = std::make_shared<DispatchArgs>();
    dispatch->kernel = kernel;
    dispatch->block = {kSmallFloats, 1, 1};
    dispatch->constants = AddConstants(kSmallFloats, 1.0f);
    dispatch->bindings.push_back({small, 0, kSmallFloats * 4});
    // Launched again and again, as hrxd's dispatch cache replays one.
    dispatch->cached = true;
    // The runtime's floor: the same launches straight on a stream.
    {
      const auto& hip_kernel =
          static_cast<const hrx::backend::HipKernel&>(*kernel);
      hrx::backend::PackedParams packed = hip_kernel.Pack(*dispatch);
      hipStream_t raw_stream = nullptr;
      (void)hipStreamCreateWithFlags(&raw_stream, hipStreamNonBlocking);
      raw_dispatch =
          Best(5,
               [&] {
                 for (int i = 0; i < kDispatches; ++i) {
                   (void)hipModuleLaunchKernel(
                       hip_kernel.function(), 1, 1, 1, kSmallFloats, 1, 1, 0,
                       raw_stream, packed.pointers.data(), nullptr);
                 }
                 (void)hipStreamSynchronize(raw_stream);
               }) /
          kDispatches;
      (void)hipStreamDestroy(raw_stream);
    }
    local_dispatch = Best(5,
                          [&] {
                            hrx::backend::Fence last = 0;
                            for (int i = 0; i < kDispatches; ++i)
                              last = *queue->EnqueueDispatch(dispatch);
                            check(queue->Wait(last));
                          }) /
                     kDispatches;

    auto plan = std::make_shared<GraphPlan>();
    std::vector<MemoryRef> node_buffers;
    for (int i = 0; i < kGraphNodes; ++i) {
      node_buffers.push_back(
          *(*backend)->Allocate(kSmallFloats * 4, MemoryKind::kDevice, true));
      auto node_dispatch = std::make_shared<DispatchArgs>(*dispatch);
      node_dispatch->bindings = {{node_buffers.back(), 0, kSmallFloats * 4}};
      GraphNode node;
      node.op = hrx::backend::DispatchRef(node_dispatch);
      plan->nodes.push_back(node);
    }
    local_graph = Best(5,
                       [&] {
                         hrx::backend::Fence last = 0;
                         for (int i = 0; i < kGraphLaunches; ++i)
                           last = *queue->EnqueueGraph(plan, nullptr);
                         check(queue->Wait(last));
                       }) /
                  kGraphLaunches;

    MemoryRef target =
        *(*backend)->Allocate(kTransferBytes, MemoryKind::kDevice, false);
    void* pinned = nullptr;
    check(hrx::backend::HipStatus(hipHostMalloc(&pinned, kTransferBytes, 0),
                                  "pinned", "hipHostMalloc", "-"));
    std::memset(pinned, 1, kTransferBytes);
    hipStream_t stream = nullptr;
    (void)hipStreamCreateWithFlags(&stream, hipStreamNonBlocking);
    void* device = hrx::backend::DeviceAddress(*target, 0);
    pinned_copy = Best(kTransfers, [&] {
      (void)hipMemcpyAsync(device, pinned, kTransferBytes, hipMemcpyDefault,
                           stream);
      (void)hipStreamSynchronize(stream);
    });
    (void)hipStreamDestroy(stream);
    (void)hipHostFree(pinned);
    MemoryRef registered =
        *(*backend)->Allocate(kTransferBytes, MemoryKind::kHostCoherent, false);
    std::memset(registered->host_address(), 1, kTransferBytes);
    local_registered = Best(kTransfers, [&] {
      check(queue->Wait(
          *queue->EnqueueCopy(target, 0, registered, 0, kTransferBytes)));
    });
  }
  if (!ok) return 1;

  // --- Synchronous round trips: a 1-byte fill and its wait; batched fills.
  constexpr int kRoundTrips = 3000;
  double local_fill_sync = 0, raw_fill_sync = 0, local_fills = 0, raw_fills = 0;
  {
    auto backend = hrx::backend::HipBackend::Open({});
    if (!backend.ok()) return Fail("open the GPU", backend.status());
    auto queue = *(*backend)->CreateQueue();
    MemoryRef one = *(*backend)->Allocate(64, MemoryKind::kDevice, true);
    auto median = hrx::bench::MedianMicros(kRoundTrips, [&] {
      auto fence = queue->EnqueueFill(one, 0, 1, 1);
      if (!fence.ok()) return fence.status();
      return queue->Wait(*fence);
    });
    if (!median.ok()) return Fail("in-process fill", median.status());
    local_fill_sync = *median;
    local_fills = Best(5,
                       [&] {
                         hrx::backend::Fence last = 0;
                         for (int i = 0; i < kBatchedFills; ++i)
                           last = *queue->EnqueueFill(one, 0, kFillBytes, 1);
                         check(queue->Wait(last));
                       }) /
                  kBatchedFills;
    // The runtime's floor: its memset and stream synchronize, no queue.
    hipStream_t raw_stream = nullptr;
    (void)hipStreamCreateWithFlags(&raw_stream, hipStreamNonBlocking);
    void* address = hrx::backend::DeviceAddress(*one, 0);
    auto raw = hrx::bench::MedianMicros(kRoundTrips, [&] {
      return hrx::backend::HipStatus(
          hipMemsetD8Async(address, 1, 1, raw_stream) == hipSuccess
              ? hipStreamSynchronize(raw_stream)
              : hipErrorInvalidValue,
          "raw fill", "hipMemsetD8Async", "-");
    });
    if (!raw.ok()) return Fail("raw fill", raw.status());
    raw_fill_sync = *raw;
    raw_fills =
        Best(5,
             [&] {
               for (int i = 0; i < kBatchedFills; ++i)
                 (void)hipMemsetD8Async(address, 1, kFillBytes, raw_stream);
               (void)hipStreamSynchronize(raw_stream);
             }) /
        kBatchedFills;
    (void)hipStreamDestroy(raw_stream);
  }

  // --- Through the daemon. -------------------------------------------------
  const std::string dir = hrx::testing::MakeShortTempDir();
  const std::string socket_path = dir + "/hrxd.sock";
  std::vector<std::string> daemon_argv = {RunfilePath("daemon/hrxd_hip_nvidia"),
                                          "--socket=" + socket_path,
                                          "--backend=hip", "--log-level=warn"};
  // e.g. GPU_BENCH_DAEMON_FLAGS=--executors=false, to price the executors.
  const char* extra_flag = std::getenv("GPU_BENCH_DAEMON_FLAGS");
  if (extra_flag != nullptr && extra_flag[0] != '\0') {
    daemon_argv.push_back(extra_flag);
    std::printf("hrxd flags: %s\n", extra_flag);
  }
  hrx::testing::Subprocess daemon =
      hrx::testing::Subprocess::Start(daemon_argv, dir);
  if (!hrx::testing::WaitUntilServing(socket_path, &daemon)) return 1;
  auto client = hrx::Client::Connect(socket_path, "gpu_benchmark");
  if (!client.ok()) return Fail("connect", client.status());
  auto stream = (*client)->OpenDevice(0)->CreateStream();
  if (!stream.ok()) return Fail("stream", stream.status());
  auto kernel = stream->LoadKernel(
      {reinterpret_cast<const uint8_t*>(cubin.data()), cubin.size()},
      "add_f32");
  if (!kernel.ok()) return Fail("load", kernel.status());
  hrx::Constants constants;
  check(constants.Push(kSmallFloats));
  check(constants.Push(1.0f));
  hrx::Buffer small = *stream->Allocate(kSmallFloats * 4);
  const hrx::View small_view = small.Binding();
  const double daemon_dispatch =
      Best(5,
           [&] {
             for (int i = 0; i < kDispatches; ++i) {
               check(stream->Dispatch(*kernel, {1, 1, 1}, {kSmallFloats, 1, 1},
                                      constants, {&small_view, 1}));
             }
             check(stream->Synchronize());
           }) /
      kDispatches;

  hrx::Graph graph = stream->BeginGraph();
  std::vector<hrx::Buffer> node_buffers;
  for (int i = 0; i < kGraphNodes; ++i) {
    node_buffers.push_back(*stream->Allocate(kSmallFloats * 4));
    const hrx::View view = node_buffers.back().Binding();
    check(graph
              .Dispatch({}, *kernel, {1, 1, 1}, {kSmallFloats, 1, 1}, constants,
                        {&view, 1})
              .status());
  }
  auto exec = graph.Finish();
  if (!exec.ok()) return Fail("finish", exec.status());
  const double daemon_graph = Best(5,
                                   [&] {
                                     for (int i = 0; i < kGraphLaunches; ++i)
                                       check(stream->Launch(*exec));
                                     check(stream->Synchronize());
                                   }) /
                              kGraphLaunches;

  hrx::Buffer fill_target = *stream->Allocate(kFillBytes);
  const double daemon_fills =
      Best(5,
           [&] {
             for (int i = 0; i < kBatchedFills; ++i)
               check(stream->Fill(fill_target.Binding(), 1));
             check(stream->Synchronize());
           }) /
      kBatchedFills;

  hrx::Buffer shared = *stream->AllocateShared(kTransferBytes);
  auto mapping = shared.Map();
  if (!mapping.ok()) return Fail("map", mapping.status());
  std::memset(mapping->bytes().data(), 1, kTransferBytes);
  hrx::Buffer target = *stream->Allocate(kTransferBytes);
  const double daemon_copy = Best(kTransfers, [&] {
    check(stream->Copy(target.Binding(), shared.Binding()));
    check(stream->Synchronize());
  });
  // The same round trip through hrxd over each transport, and an 8-byte
  // ReadBlocking and a poll on the ring.
  struct Trips {
    double fill_sync = 0, read8 = 0, poll = 0;
  };
  auto trips = [&](hrx::Transport transport) -> absl::StatusOr<Trips> {
    hrx::ConnectOptions options;
    options.socket_path = socket_path;
    options.client_name = "gpu_benchmark";
    options.transport = transport;
    auto other = hrx::Client::Connect(options);
    if (!other.ok()) return other.status();
    auto on = (*other)->OpenDevice(0)->CreateStream();
    if (!on.ok()) return on.status();
    auto buffer = on->Allocate(64);
    if (!buffer.ok()) return buffer.status();
    const hrx::View one = *buffer->Slice(0, 1);
    const hrx::View eight = *buffer->Slice(0, 8);
    Trips measured;
    auto fill_sync = hrx::bench::MedianMicros(kRoundTrips, [&] {
      if (absl::Status s = on->Fill(one, 1); !s.ok()) return s;
      return on->Synchronize();
    });
    if (!fill_sync.ok()) return fill_sync.status();
    measured.fill_sync = *fill_sync;
    uint8_t bytes[8];
    auto read8 = hrx::bench::MedianMicros(kRoundTrips, [&] {
      return on->ReadBlocking(eight, std::span<uint8_t>(bytes, 8));
    });
    if (!read8.ok()) return read8.status();
    measured.read8 = *read8;
    auto poll = hrx::bench::MedianMicros(kRoundTrips,
                                         [&] { return on->IsIdle().status(); });
    if (!poll.ok()) return poll.status();
    measured.poll = *poll;
    return measured;
  };
  auto ring_trips = trips(hrx::Transport::kRing);
  auto grpc_trips = trips(hrx::Transport::kGrpc);
  if (!ring_trips.ok()) return Fail("ring round trips", ring_trips.status());
  if (!grpc_trips.ok()) return Fail("gRPC round trips", grpc_trips.status());
  if (!ok) return 1;

  const double gb = kTransferBytes / 1e9;
  std::printf("hrxd GPU benchmark on %s\n", device_name.c_str());
  std::printf("1-byte fill and wait (p50 of %d):\n", kRoundTrips);
  std::printf("  raw memset + stream sync     %8.2f us  baseline\n",
              raw_fill_sync);
  std::printf("  in-process HipQueue          %8.2f us  %.2fx raw\n",
              local_fill_sync, local_fill_sync / raw_fill_sync);
  std::printf("  daemon, shared-memory ring   %8.2f us  %.2fx raw\n",
              ring_trips->fill_sync, ring_trips->fill_sync / raw_fill_sync);
  std::printf("  daemon, gRPC stream          %8.2f us  %.2fx raw\n",
              grpc_trips->fill_sync, grpc_trips->fill_sync / raw_fill_sync);
  std::printf("%llu-byte fills, %d batched, per fill:\n",
              static_cast<unsigned long long>(kFillBytes), kBatchedFills);
  std::printf("  raw memset on a stream       %8.2f us  baseline\n",
              raw_fills * 1e6);
  std::printf("  in-process HipQueue          %8.2f us  %.2fx raw\n",
              local_fills * 1e6, local_fills / raw_fills);
  std::printf("  through the daemon           %8.2f us  %.2fx raw\n",
              daemon_fills * 1e6, daemon_fills / raw_fills);
  std::printf("8-byte ReadBlocking, p50: ring %.2f us, gRPC %.2f us\n",
              ring_trips->read8, grpc_trips->read8);
  std::printf("poll (IsIdle), p50: ring %.2f us, gRPC %.2f us\n",
              ring_trips->poll, grpc_trips->poll);
  std::printf(
      "small dispatch (add_f32, %u floats), %d batched, per dispatch:\n",
      kSmallFloats, kDispatches);
  std::printf("  in-process HipQueue          %8.2f us  baseline\n",
              local_dispatch * 1e6);
  std::printf("  through the daemon           %8.2f us  %.2fx in-process\n",
              daemon_dispatch * 1e6, daemon_dispatch / local_dispatch);
  std::printf("  (raw hipModuleLaunchKernel   %8.2f us  %.2fx in-process)\n",
              raw_dispatch * 1e6, raw_dispatch / local_dispatch);
  std::printf("%d-node graph of small dispatches, %d launches, per launch:\n",
              kGraphNodes, kGraphLaunches);
  std::printf("  in-process graph launch      %8.2f us  baseline\n",
              local_graph * 1e6);
  std::printf("  through the daemon           %8.2f us  %.2fx in-process\n",
              daemon_graph * 1e6, daemon_graph / local_graph);
  std::printf("host to device, %llu MiB, best of %d:\n",
              static_cast<unsigned long long>(kTransferBytes >> 20),
              kTransfers);
  std::printf("  runtime pinned copy          %8.2f GB/s  baseline\n",
              gb / pinned_copy);
  std::printf("  in-process registered memfd  %8.2f GB/s  %.2fx pinned\n",
              gb / local_registered, pinned_copy / local_registered);
  std::printf("  shared buffer via the daemon %8.2f GB/s  %.2fx pinned\n",
              gb / daemon_copy, pinned_copy / daemon_copy);
  return 0;
}
