// graph: record a few commands once as a graph, then replay it many times
// with one command per replay, and compare with sending the commands each
// time.
//
// Run against `make run`'s daemon (in another terminal):
//   bazel run //examples:graph -- 1000     # replays (default 1000)
// A graph's nodes name the nodes they run after; a join node only orders.
// The replay is checked by the daemon once, when the graph is finished.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "example_util.h"
#include "hrx/client.h"

using hrx_examples::Check;

int main(int argc, char** argv) {
  const int replays = argc > 1 ? std::atoi(argv[1]) : 1000;
  if (replays <= 0) {
    std::fprintf(stderr, "usage: %s [replays > 0]\n", argv[0]);
    return 2;
  }
  auto client = Check(hrx::Client::Connect(), "connect");
  auto stream =
      Check(Check(client->OpenDevice(0), "open device").CreateStream(),
            "create stream");
  constexpr uint64_t kBytes = 4096;
  auto a = Check(stream.AllocateZeroed(kBytes), "allocate a");
  auto b = Check(stream.AllocateZeroed(kBytes), "allocate b");
  auto c = Check(stream.AllocateZeroed(kBytes), "allocate c");

  // fill a, fill b (independent), then copy a into c after both.
  hrx::Graph graph = stream.BeginGraph();
  const hrx::Node fill_a = Check(graph.Fill({}, a.Binding(), 0x11), "node");
  const hrx::Node fill_b = Check(graph.Fill({}, b.Binding(), 0x22), "node");
  const hrx::Node both[] = {fill_a, fill_b};
  const hrx::Node joined = Check(graph.Join(both), "join");
  Check(graph.Copy({&joined, 1}, c.Binding(), a.Binding()), "node");
  hrx::GraphExec exec = Check(graph.Finish(), "finish");
  std::printf("graph of %zu nodes (%zu that run)\n", graph.size(),
              exec.node_count());

  const absl::Time replay_start = absl::Now();
  for (int i = 0; i < replays; ++i) Check(stream.Launch(exec), "launch");
  Check(stream.Synchronize(), "synchronize");
  const absl::Duration replay = absl::Now() - replay_start;

  const absl::Time direct_start = absl::Now();
  for (int i = 0; i < replays; ++i) {
    Check(stream.Fill(a.Binding(), 0x11), "fill");
    Check(stream.Fill(b.Binding(), 0x22), "fill");
    Check(stream.Copy(c.Binding(), a.Binding()), "copy");
  }
  Check(stream.Synchronize(), "synchronize");
  const absl::Duration direct = absl::Now() - direct_start;

  std::vector<uint8_t> bytes(kBytes);
  Check(stream.ReadBlocking(c.Binding(), bytes), "read c");
  const bool ok = bytes.front() == 0x11 && bytes.back() == 0x11;
  std::printf(
      "%d replays: %.1f us each; the same commands sent each time: "
      "%.1f us each (%.2fx)\n",
      replays, absl::ToDoubleMicroseconds(replay) / replays,
      absl::ToDoubleMicroseconds(direct) / replays,
      absl::FDivDuration(direct, replay));
  std::printf("graph: %s\n", ok ? "ok" : "WRONG BYTES");
  return ok ? 0 : 1;
}
