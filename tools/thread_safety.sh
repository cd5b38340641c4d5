#!/usr/bin/env bash
# Clang's thread-safety analysis over the project's code: builds //daemon/...,
# //shared/... and //client/... with clang-14 (--config=fuzz, whose flags make
# every -Wthread-safety finding an error), in the clang output base that
# tools/fuzz.sh then reuses. Prints `check-result thread-safety passed`, or
# `... failed` after the findings; exits non-zero on a finding.
#
# usage: tools/thread_safety.sh
set -u
cd "$(dirname "$0")/.."
source tools/lib/clang_output_base.sh
log=$(mktemp /tmp/hrx-thread-safety.XXXXXX)
trap 'rm -f "$log"' EXIT
if bazel --output_base="$clang_output_base" build --config=fuzz --keep_going \
     --output_groups=compilation_outputs \
     //daemon/... //shared/... //client/... >"$log" 2>&1; then
  echo "check-result thread-safety passed"
  exit 0
fi
grep -E -e '-Wthread-safety' -e 'error:' "$log" | sort -u | head -40
grep -q -e '-Wthread-safety' "$log" || tail -20 "$log"
echo "check-result thread-safety failed (see the findings above)"
exit 1
