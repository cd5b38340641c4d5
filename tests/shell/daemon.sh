# Sourced by shell tests: starts a real hrxd (CPU backend) on a socket of its
# own and stops it when the test's shell exits.
#
#   source tests/shell/daemon.sh
#   start_daemon [hrxd flags...]   # exports HRXD_SOCKET; $HRXD_PID, $HRXD_LOG
#
# Paths are runfiles paths: the test's data must include //daemon:hrxd and
# //client:hrxctl.
runfiles="${TEST_SRCDIR:-$PWD/..}/${TEST_WORKSPACE:-main}"
HRXD_BIN="${HRXD_BIN:-$runfiles/daemon/hrxd}"
HRXCTL_BIN="${HRXCTL_BIN:-$runfiles/client/hrxctl}"
# Unix socket paths are short (108 bytes): not under the sandbox's TMPDIR.
HRX_TEST_DIR="$(mktemp -d /tmp/hrx-sh.XXXXXX)"

stop_daemon() {
  if [ -n "${HRXD_PID:-}" ] && kill -0 "$HRXD_PID" 2>/dev/null; then
    kill -TERM "$HRXD_PID" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$HRXD_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$HRXD_PID" 2>/dev/null || true
  fi
  HRXD_PID=""
}

cleanup_daemon() {
  stop_daemon
  rm -rf "$HRX_TEST_DIR"
}
trap cleanup_daemon EXIT

start_daemon() {
  export HRXD_SOCKET="$HRX_TEST_DIR/hrxd.sock"
  HRXD_LOG="$HRX_TEST_DIR/hrxd.log"
  "$HRXD_BIN" --backend=cpu --socket="$HRXD_SOCKET" "$@" >"$HRXD_LOG" 2>&1 &
  HRXD_PID=$!
  # Ready when hrxctl gets an answer; give up after 30 s with the log.
  for _ in $(seq 300); do
    if "$HRXCTL_BIN" --socket="$HRXD_SOCKET" status >/dev/null 2>&1; then
      return 0
    fi
    kill -0 "$HRXD_PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "start_daemon: hrxd did not answer on $HRXD_SOCKET; its log:" >&2
  cat "$HRXD_LOG" >&2
  return 1
}
