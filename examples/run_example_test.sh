#!/usr/bin/env bash
# Runs one example against a daemon of its own and checks that it says
# "NAME: ok" and exits 0, as its header comment promises.
#   run_example_test.sh NAME COMMAND [ARGS...]
set -euo pipefail
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tests/shell/daemon.sh"
name="$1"
shift
start_daemon
output="$HRX_TEST_DIR/output"
status=0
"$@" >"$output" 2>&1 || status=$?
cat "$output"
if [ "$status" -ne 0 ] || ! grep -qx "$name: ok" "$output"; then
  echo "FAIL: $name exited $status without \"$name: ok\"; hrxd's log:"
  cat "$HRXD_LOG"
  exit 1
fi
echo "PASS: $name"
