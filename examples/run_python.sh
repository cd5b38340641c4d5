#!/usr/bin/env bash
# Runs a Python example with Debian's python3 and the hrx package built here
# (bazel run //examples:numpy_tour): the target NAME runs examples/NAME.py;
# arguments that name runfiles are passed as their paths.
set -euo pipefail
runfiles="${RUNFILES_DIR:-$0.runfiles}"
[ -d "$runfiles" ] || runfiles="$(cd "$(dirname "$0")/.." && pwd)"
root="$runfiles/${TEST_WORKSPACE:-hrxd}"
[ -d "$root/python/hrx" ] || root="$runfiles"
script="examples/$(basename "$0").py"
args=()
for arg in "$@"; do [ -e "$root/$arg" ] && args+=("$root/$arg") || args+=("$arg"); done
# A module built with --config=asan (make test's second run) needs the
# sanitizer's runtime loaded first; Python's own allocations are not leaks.
if objdump -p "$root/python/hrx/_hrx.so" 2>/dev/null | grep -q 'NEEDED.*libasan'; then
  export LD_PRELOAD="$(g++ -print-file-name=libasan.so)"
  export ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
fi
PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" exec /usr/bin/python3 "$root/$script" "${args[@]}"
