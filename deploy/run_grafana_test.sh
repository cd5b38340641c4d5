#!/usr/bin/env bash
# Starts hrxd with its metrics endpoint, makes traffic (a session holding a
# buffer, one refusal), then runs deploy/grafana_test.py against it.
set -euo pipefail
runfiles="${TEST_SRCDIR}/${TEST_WORKSPACE}"
source "$runfiles/tests/shell/daemon.sh"
port="$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
export HRX_METRICS="127.0.0.1:$port"
start_daemon --metrics_listen="$HRX_METRICS" --metrics_tenants
"$runfiles/examples/hello" >/dev/null
# A refusal the daemon counts: a budget for a tenant that does not exist.
"$HRXCTL_BIN" --socket="$HRXD_SOCKET" budget set nosuch device_bytes=1 >/dev/null 2>&1 || true
cd "$runfiles"
/usr/bin/python3 -m pytest -p no:cacheprovider -v \
  --junitxml="${XML_OUTPUT_FILE:-$HRX_TEST_DIR/pytest.xml}" deploy/grafana_test.py
