#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: unpacks gpu-bundle.tar.xz (made by
# tools/gpu_bundle.sh), runs the HIP backend's own test, the integration
# suite with HRX_TEST_BACKEND=hip against hrxd_hip_nvidia, then the GPU
# benchmark. Logs and test XML go to $OUT (default ./gpu-out); the last line
# is `N passed, N failed` over every test case.
# Usage: [GPU_BENCH_RUNS=N] tools/gpu_run.sh [test binary names...]
set -u
cd "$(dirname "$0")/.."
out="${OUT:-$PWD/gpu-out}"
mkdir -p "$out/xml" "$out/logs"
work=$(mktemp -d /tmp/hrx-gpu.XXXXXX)
tar -C "$work" -xJf gpu-bundle.tar.xz
root="$work/gpu-bundle"

export LD_LIBRARY_PATH="$root/lib"
export TEST_SRCDIR="$root/runfiles" TEST_WORKSPACE=hrxd
export HRX_TEST_BACKEND=hip HRX_TEST_DAEMON=daemon/hrxd_hip_nvidia

{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } \
  > "$out/device.txt" 2>&1
cat "$out/device.txt"

if [ $# -gt 0 ]; then tests=("$@"); else
  tests=(hip_backend_test $(cd "$root/bin" && ls *_test | grep -v '^hip_backend_test$'))
fi
# Each test runs over both stream transports: libhrx's default (the
# shared-memory ring) and the gRPC stream (HRX_TRANSPORT=grpc).
run_one() {
  local name=${1%:*} transport=${1#*:}
  local tmp; tmp=$(mktemp -d /tmp/hrx-t.XXXXXX)
  # TEST_TMPDIR as Bazel gives one; each binary runs its cases in order.
  local filter=()
  # The AMD variant and its runtime are not carried to the NVIDIA machine;
  # CI runs that test.
  [ "$name" = daemon_lifecycle_test ] &&
    filter=(--gtest_filter=-DaemonLifecycleTest.TheAmdVariant*)
  local label=$name
  [ "$transport" = grpc ] && label=${name}_grpc
  HRX_TRANSPORT=$transport TEST_TMPDIR="$tmp" HRX_MUTEX_DEADLOCK_DETECTION=1 \
    timeout 420 "$root/bin/$name" \
    "${filter[@]}" --gtest_output="xml:$out/xml/$label.xml" \
    > "$out/logs/$label.log" 2>&1
  echo "$label exit $?"
  rm -rf "$tmp"
}
export -f run_one
export root out
runs=()
for name in "${tests[@]}"; do
  runs+=("$name:auto")
  # Not transport tests (tests/BUILD): the backend's own, and the rings
  # executors serve (a ring by definition).
  case $name in
    hip_backend_test | executor_ring_test) ;;
    *) runs+=("$name:grpc") ;;
  esac
done
printf '%s\n' "${runs[@]}" | xargs -P 4 -I{} bash -c 'run_one {}'

pairs=()
for run in "${runs[@]}"; do
  name=${run%:*}
  [ "${run#*:}" = grpc ] && name=${name}_grpc
  pairs+=("$name=$out/xml/$name.xml")
done
python3 tools/count_results.py --xml "${pairs[@]}" > "$out/summary.txt"

if [ $# -eq 0 ]; then
  # GPU_BENCH_RUNS runs of the benchmark (default 1), one after another.
  : > "$out/gpu_benchmark.txt"
  for run in $(seq "${GPU_BENCH_RUNS:-1}"); do
    timeout 240 "$root/bin/gpu_benchmark" >> "$out/gpu_benchmark.txt" 2>&1
    echo "gpu_benchmark run $run exit $?"
  done
  # Once more with the queues inside hrxd: what the executors cost.
  GPU_BENCH_DAEMON_FLAGS=--executors=false timeout 240 \
    "$root/bin/gpu_benchmark" >> "$out/gpu_benchmark.txt" 2>&1
  echo "gpu_benchmark without executors exit $?"
  cat "$out/gpu_benchmark.txt"
fi
cat "$out/summary.txt"
# Few files come back from the device machine: the logs travel as one.
tar -C "$out" -czf "$out/logs.tar.gz" logs xml && rm -rf "$out/logs" "$out/xml"
rm -rf "$work"
