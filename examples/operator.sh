#!/usr/bin/env bash
# operator: what an operator's script does with `hrxctl --json`: a health
# line, each tenant's use against its budget, the sessions that hold the
# most memory, and the executors. Parses JSON with python3 (no jq needed).
#
# Run against `make run`'s daemon (in another terminal):
#   bazel run //examples:operator
# or with any hrxctl and daemon:
#   HRXCTL=/usr/bin/hrxctl HRXD_SOCKET=/run/hrxd/hrxd.sock examples/operator.sh
# Exits 1 when a tenant uses 90 % or more of a byte budget, so it can serve
# as a monitoring check.
set -euo pipefail

hrxctl="${HRXCTL:-$(dirname "$0")/../client/hrxctl}"
[ -x "$hrxctl" ] || hrxctl="$(command -v hrxctl || true)"
[ -n "$hrxctl" ] || { echo "operator: no hrxctl. Fix: set HRXCTL=/path/to/hrxctl." >&2; exit 2; }
target=()
[ -n "${HRXD_SOCKET:-}" ] && target=(--socket="$HRXD_SOCKET")

status_json="$("$hrxctl" "${target[@]}" status --json)"
tenants_json="$("$hrxctl" "${target[@]}" tenants --json)"
sessions_json="$("$hrxctl" "${target[@]}" sessions --json)"
executors_json="$("$hrxctl" "${target[@]}" executors --json)"

STATUS="$status_json" TENANTS="$tenants_json" SESSIONS="$sessions_json" \
  EXECUTORS="$executors_json" python3 - <<'PY'
import json, os, sys

status = json.loads(os.environ["STATUS"])
tenants = json.loads(os.environ["TENANTS"])
sessions = json.loads(os.environ["SESSIONS"])
executors = json.loads(os.environ["EXECUTORS"])

gib = 1 << 30
print(f"hrxd {status['version']} (pid {status['pid']}, up {status['uptime_seconds']} s): "
      f"{status['backend']} backend, {status['device']}, "
      f"{status['bytes_in_use'] / gib:.2f} of {status['device_memory_bytes'] / gib:.2f} GiB in use, "
      f"{status['sessions']} sessions, {status['streams']} streams")

# A budget field of null is unlimited.
over = []
print(f"{'tenant':<16} {'role':<12} {'sessions':>8} {'device bytes':>24} {'shared bytes':>24}")
for tenant in tenants:
    cells = []
    for field in ("device_bytes", "shared_bytes"):
        used, limit = tenant["usage"][field], tenant["budget"][field]
        cells.append(f"{used} / {'unlimited' if limit is None else limit}")
        if limit and used >= 0.9 * limit:
            over.append(f"{tenant['name']} uses {used} of {limit} {field}")
    print(f"{tenant['name']:<16} {tenant['role'].removeprefix('ROLE_').lower():<12} "
          f"{tenant['sessions']:>8} {cells[0]:>24} {cells[1]:>24}")

top = sorted(sessions, key=lambda s: s["buffer_bytes"], reverse=True)[:5]
print(f"{len(sessions)} sessions" + (", largest first:" if top else ""))
for session in top:
    print(f"  session {session['id']} of {session['tenant']} "
          f"(client {session['client'] or '-'}, uid {session['uid']}, pid {session['pid']}): "
          f"{session['buffer_bytes']} bytes in {session['buffers']} buffers, "
          f"{session['streams']} streams")

for executor in executors:
    state = "running" if executor["running"] else "stopped"
    print(f"executor {executor['name']}: {state}, pid {executor['pid']}, "
          f"{executor['restarts']} restarts"
          + (f", last loss: {executor['last_loss']}" if executor["last_loss"] else ""))

for line in over:
    print(f"WARNING: {line}")
sys.exit(1 if over else 0)
PY
