#!/usr/bin/env bash
# examples/operator.sh against a real daemon: with a client holding memory it
# prints the daemon's health line, the tenant that client belongs to and its
# session; with a tenant at 90 % of its byte budget it exits 1 and says why.
set -euo pipefail
runfiles="${TEST_SRCDIR}/${TEST_WORKSPACE}"
source "$runfiles/tests/shell/daemon.sh"
export HRXCTL="$runfiles/client/hrxctl"

start_daemon
out="$HRX_TEST_DIR/out"
"$runfiles/examples/operator.sh" >"$out"
cat "$out"
grep -q '^hrxd [0-9.]* (pid [0-9]*, up [0-9]* s): cpu backend' "$out"
grep -q '^local  *admin ' "$out"
grep -q '^executor shared: running' "$out"

# A tenant at its byte budget: the script is a monitoring check that fails.
# The graph example holds three 4096-byte buffers while it replays.
stop_daemon
cat >"$HRX_TEST_DIR/hrxd.conf" <<CONF
tenants {
  name: "small"
  uids: $(id -u)
  role: ROLE_ADMIN
  budget { device_bytes: 12288 }
}
CONF
start_daemon --config="$HRX_TEST_DIR/hrxd.conf"
"$runfiles/examples/operator.sh" >"$out" ||
  { cat "$out"; echo "FAIL: an idle tenant must not fail the check"; exit 1; }
"$runfiles/examples/graph" 100000000 >"$HRX_TEST_DIR/holder.log" 2>&1 &
holder=$!
status=0
for _ in $(seq 300); do
  status=0
  "$runfiles/examples/operator.sh" >"$out" || status=$?
  [ "$status" -ne 0 ] && break
  sleep 0.1
done
kill "$holder" 2>/dev/null || true
cat "$HRX_TEST_DIR/holder.log"
cat "$out"
[ "$status" -eq 1 ] || { echo "FAIL: exit $status with a tenant at its budget"; exit 1; }
grep -q '^WARNING: small uses 12288 of 12288 device_bytes$' "$out"
grep -q '^  session [0-9a-f]* of small (client -, uid [0-9]*, pid [0-9]*): 12288 bytes in 3 buffers, 1 streams$' "$out"
echo "PASS"
