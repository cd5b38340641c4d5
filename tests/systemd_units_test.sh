#!/usr/bin/env bash
# systemd-analyze verify deploy/hrxd.service deploy/hrxd.socket, offline: a
# scratch root holds the system's units, the built daemon at the unit's
# ExecStart path, and kill (ExecReload).
set -euo pipefail
runfiles="${TEST_SRCDIR}/${TEST_WORKSPACE}"
root="$(mktemp -d /tmp/hrx-units.XXXXXX)"
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/bin" "$root/bin" "$root/usr/lib/systemd" "$root/etc/systemd/system"
cp -r /lib/systemd/system "$root/usr/lib/systemd/system"
cp "$runfiles/daemon/hrxd" "$root/usr/bin/hrxd"
cp /bin/kill "$root/bin/kill"
cp "$runfiles/deploy/hrxd.service" "$runfiles/deploy/hrxd.socket" "$root/etc/systemd/system/"
systemd-analyze verify --man=no --root="$root" \
  "$root/etc/systemd/system/hrxd.service" "$root/etc/systemd/system/hrxd.socket"
echo "systemd-analyze verify: OK"
exposure="$(systemd-analyze security --offline=true --root="$root" \
  "$root/etc/systemd/system/hrxd.service" 2>&1 | tail -1)"
echo "$exposure"
# The hardening must stay in place: exposure at most 2.0 ("OK").
level="$(sed -n 's/.*exposure level for hrxd.service: \([0-9.]*\).*/\1/p' <<<"$exposure")"
awk -v level="$level" 'BEGIN { exit !(level != "" && level <= 2.0) }'
