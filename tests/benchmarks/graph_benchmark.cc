// A 64-node graph of small fills launched through the daemon, against the
// same 64 fills sent as one batch on the stream, and against 64 synchronous
// calls; and a graph of independent nodes against a chained one. All in one
// run, per node, as ratios.
//
//   bazel run -c opt //tests/benchmarks:graph_benchmark
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "hrx/client.h"
#include "tests/subprocess.h"
#include "tests/test_daemon.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kNodes = 64;
constexpr int kRounds = 300;
constexpr uint64_t kFillBytes = 64;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int Fail(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "graph_benchmark: %s: %s\n", what,
               status.ToString().c_str());
  return 1;
}

template <typename F>
double PerNode(F round) {
  for (int i = 0; i < 20; ++i) round();  // warm
  const auto start = Clock::now();
  for (int i = 0; i < kRounds; ++i) round();
  return Seconds(start) / (kRounds * kNodes);
}

}  // namespace

int main() {
  const std::string dir = hrx::testing::MakeShortTempDir();
  const std::string socket_path = dir + "/hrxd.sock";
  hrx::testing::Subprocess daemon = hrx::testing::Subprocess::Start(
      {hrx::testing::RunfilePath("daemon/hrxd"), "--socket=" + socket_path,
       "--backend=cpu", "--log-level=warn"},
      dir);
  if (!hrx::testing::WaitUntilServing(socket_path, &daemon)) return 1;
  auto client = hrx::Client::Connect(socket_path, "graph_benchmark");
  if (!client.ok()) return Fail("connect", client.status());
  auto stream = (*client)->OpenDevice(0)->CreateStream();
  if (!stream.ok()) return Fail("stream", stream.status());
  std::vector<hrx::Buffer> buffers;
  for (int i = 0; i < kNodes; ++i)
    buffers.push_back(*stream->Allocate(kFillBytes));

  hrx::Graph independent = stream->BeginGraph();
  hrx::Graph chained = stream->BeginGraph();
  std::vector<hrx::Node> previous;
  for (int i = 0; i < kNodes; ++i) {
    (void)independent.Fill({}, buffers[i].Binding(), static_cast<uint8_t>(i));
    auto node =
        chained.Fill(previous, buffers[i].Binding(), static_cast<uint8_t>(i));
    previous = {*node};
  }
  auto independent_exec = independent.Finish();
  auto chained_exec = chained.Finish();
  if (!independent_exec.ok()) return Fail("finish", independent_exec.status());
  if (!chained_exec.ok()) return Fail("finish", chained_exec.status());

  bool ok = true;
  const double graph = PerNode([&] {
    ok = ok && stream->Launch(*independent_exec).ok() &&
         stream->Synchronize().ok();
  });
  const double chain = PerNode([&] {
    ok = ok && stream->Launch(*chained_exec).ok() && stream->Synchronize().ok();
  });
  const double batched = PerNode([&] {
    for (int i = 0; i < kNodes; ++i) {
      ok = ok &&
           stream->Fill(buffers[i].Binding(), static_cast<uint8_t>(i)).ok();
    }
    ok = ok && stream->Synchronize().ok();
  });
  const double synchronous = PerNode([&] {
    for (int i = 0; i < kNodes; ++i) {
      ok = ok &&
           stream->Fill(buffers[i].Binding(), static_cast<uint8_t>(i)).ok() &&
           stream->Synchronize().ok();
    }
  });
  if (!ok) return Fail("run", absl::InternalError("a launch or sync failed"));

  std::printf("64 fills of %lu bytes, %d rounds, per node:\n",
              static_cast<unsigned long>(kFillBytes), kRounds);
  std::printf("  graph launch (independent nodes)  %8.3f us  baseline\n",
              graph * 1e6);
  std::printf("  same 64 fills, one batch          %8.3f us  %.2fx graph\n",
              batched * 1e6, batched / graph);
  std::printf("  64 synchronous calls              %8.3f us  %.2fx graph\n",
              synchronous * 1e6, synchronous / graph);
  std::printf(
      "  graph launch (chained nodes)      %8.3f us  %.2fx independent\n",
      chain * 1e6, chain / graph);
  return 0;
}
