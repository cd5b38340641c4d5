#!/bin/bash
# make bench: builds the benchmarks optimised and runs each against the CPU
# backend. Every figure is a ratio to a baseline measured in the same run
# (these machines are shared and noisy). The latency table is also written
# as JSON to ${HRX_BENCH_JSON:-bench.json}. The GPU table comes from
# tools/gpu_run.sh on a GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
json=${HRX_BENCH_JSON:-$PWD/bench.json}
targets=(latency_benchmark scale_benchmark fill_benchmark transfer_benchmark graph_benchmark
         flood_benchmark)
labels=()
for t in "${targets[@]}"; do labels+=("//tests/benchmarks:$t"); done
bazel build -c opt "${labels[@]}"
bin=$(bazel info -c opt bazel-bin)
run() {
  local name=$1; shift
  echo
  echo "=== $name"
  (cd "$bin/tests/benchmarks/$name.runfiles/hrxd" &&
    "$bin/tests/benchmarks/$name" "$@")
}
run latency_benchmark --json="$json"
run scale_benchmark --json="${json%.json}-scale.json"
run fill_benchmark --fills=50000 --unary_fills=500
run transfer_benchmark
run graph_benchmark
# Switches its clients' uids: as root only.
if [ "$(id -u)" = 0 ]; then run flood_benchmark; fi
echo
echo "latency figures written to $json"
