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
source "$root/tools/sanitizers/python_env.sh"
hrx_python_sanitizer_env "$root/python/hrx/_hrx.so"
PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" exec /usr/bin/python3 "$root/$script" "${args[@]}"
