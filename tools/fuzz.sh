#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang-14 (in a Bazel output
# base of their own, so the GCC builds keep their cache) and runs each one
# for SECONDS, starting from its seed corpus. Prints one `figure: fuzz ...`
# line and one `fuzz-result NAME passed|failed` line per target; exits
# non-zero when a target crashed or could not run. A crashing input is kept
# under $HRX_FUZZ_FINDINGS (default /tmp/hrx-fuzz-findings): add it to
# tests/fuzz/corpus/NAME/ once fixed, so the replay test keeps it.
#
# usage: tools/fuzz.sh [SECONDS]        (default 15; `make fuzz` uses 300)
#        HRX_FUZZ_KEEP_CORPUS=1 grows ~/.cache/hrx-fuzz/corpus across runs
#        HRX_FUZZ_JOBS=N runs N targets at a time (default 2)
set -u
cd "$(dirname "$0")/.."
seconds=${1:-15}
targets=(decode_fuzzer config_fuzzer handle_fuzzer launch_fuzzer ring_fuzzer
         executor_frame_fuzzer ticket_fuzzer executor_ring_fuzzer)
findings=${HRX_FUZZ_FINDINGS:-/tmp/hrx-fuzz-findings}
source tools/lib/clang_output_base.sh
bazel_fuzz() { bazel --output_base="$clang_output_base" "$@"; }

labels=()
for t in "${targets[@]}"; do labels+=("//tests/fuzz:$t"); done
if ! bazel_fuzz build --config=fuzz "${labels[@]}"; then
  for t in "${targets[@]}"; do echo "fuzz-result $t failed (build)"; done
  exit 1
fi
bin=$(bazel_fuzz info --config=fuzz bazel-bin 2>/dev/null)
# The clang server is not needed any more; free its memory for the tests.
bazel_fuzz shutdown >/dev/null 2>&1

work=$(mktemp -d /tmp/hrx-fuzz.XXXXXX)
# Background targets ignore SIGINT: a stopped run stops them too.
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
mkdir -p "$findings"
# One target's run: its figure and result lines on stdout.
fuzz_one() {
  local t=$1 corpus log rc runs cov
  if [ "${HRX_FUZZ_KEEP_CORPUS:-0}" = 1 ]; then
    corpus="${HOME:-/root}/.cache/hrx-fuzz/corpus/$t"
  else
    corpus="$work/corpus/$t"
  fi
  mkdir -p "$corpus"
  cp -n tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null
  log="$work/$t.log"
  # -rss_limit_mb: frames may declare 64 MiB; -timeout: one input, seconds.
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
    "$bin/tests/fuzz/$t" "$corpus" -max_total_time="$seconds" \
      -rss_limit_mb=4096 -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$findings/$t-" >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  if [ "$rc" -eq 0 ]; then
    echo "figure: fuzz $t executions=${runs:-0} seconds=$seconds coverage_edges=${cov:-0} corpus=$(ls "$corpus" | wc -l) crashes=0"
    echo "fuzz-result $t passed"
  else
    echo "figure: fuzz $t executions=${runs:-0} seconds=$seconds crashes=1"
    echo "fuzz-result $t failed (exit $rc; input under $findings/$t-*)"
    grep -E "ERROR|fuzz check failed|SUMMARY|#[0-9]+ .* in (hrx|LLVMFuzzer)" "$log" | head -20
  fi
}

# Two targets at a time by default, one per core of the machines make test
# runs on (a target with a ring serves it on a second thread, mostly idle).
jobs_at_once=${HRX_FUZZ_JOBS:-2}
if ! [[ "$jobs_at_once" =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz.sh: HRX_FUZZ_JOBS=$jobs_at_once is not a count of 1 or more. Fix: unset it, or set a positive integer." >&2
  exit 2
fi
for t in "${targets[@]}"; do
  fuzz_one "$t" >"$work/$t.result" &
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_at_once" ]; do wait -n; done
done
wait
status=0
for t in "${targets[@]}"; do
  cat "$work/$t.result"
  grep -q "^fuzz-result $t passed" "$work/$t.result" || status=1
done
exit $status
