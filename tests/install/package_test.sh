#!/usr/bin/env bash
# The Debian packages (//deploy:debs, what `make deb` builds): their contents
# and control data, lintian (errors and warnings fail), an install into a
# scratch root with dpkg running the maintainer scripts as on a real system
# (sysusers, tmpfiles, nothing enabled), hrxd.service's ExecStart run from
# that root the way systemd would (socket activation, sd_notify READY=1), the
# installed Python package and pkg-config file used against it, and a purge.
#
# Where systemd is PID 1 (not in CI's containers) the last case also installs
# for real and starts hrxd.socket + hrxd.service; docs/operations.md.
set -euo pipefail
runfiles="${TEST_SRCDIR}/${TEST_WORKSPACE}"
source "$runfiles/tests/shell/daemon.sh"
source "$runfiles/tests/shell/cases.sh"
source "$runfiles/tools/sanitizers/python_env.sh"
debs="$runfiles/deploy/debs"
version="$(basename "$debs"/hrxd_*_amd64.deb | sed 's/^hrxd_\(.*\)_amd64.deb$/\1/')"
multiarch=x86_64-linux-gnu
root="$HRX_TEST_DIR/root"

contents_of() { dpkg-deb -c "$debs/${1}_${version}_amd64.deb" | awk '{print $6}' | sed 's|^\./|/|'; }
field_of() { dpkg-deb -f "$debs/${1}_${version}_amd64.deb" "$2"; }

has_paths() {  # has_paths PACKAGE PATH...
  local package="$1" listing
  shift
  listing="$(contents_of "$package")"
  for path in "$@"; do
    grep -qx -- "$path" <<<"$listing" || { echo "$package lacks $path"; return 1; }
  done
}

check "four packages of one version" \
  test "$(ls "$debs" | sort | tr '\n' ' ')" = \
  "hrxd_${version}_amd64.deb libhrx-dev_${version}_amd64.deb libhrx0_${version}_amd64.deb python3-hrx_${version}_amd64.deb "
check "hrxd holds the daemon, tools, units, system config, man pages" has_paths hrxd \
  /usr/bin/hrxd /usr/bin/hrxctl /usr/bin/hrx-device-plugin \
  /lib/systemd/system/hrxd.service \
  /lib/systemd/system/hrxd.socket /usr/lib/sysusers.d/hrxd.conf \
  /usr/lib/tmpfiles.d/hrxd.conf /etc/hrxd/hrxd.conf \
  /usr/share/man/man8/hrxd.8.gz /usr/share/man/man1/hrxctl.1.gz \
  /usr/share/man/man8/hrx-device-plugin.8.gz /usr/share/doc/hrxd/kubernetes.md \
  /usr/share/hrxd/kubernetes/hrxd-daemonset.yaml \
  /usr/share/hrxd/kubernetes/sample-pod.yaml \
  /usr/share/doc/hrxd/copyright /usr/share/doc/hrxd/changelog.Debian.gz \
  /usr/share/doc/hrxd/operations.md /usr/share/hrxd/grafana/hrxd-dashboard.json \
  /usr/share/hrxd/examples/hello.cc
check "libhrx0 holds the versioned library" has_paths libhrx0 \
  "/usr/lib/$multiarch/libhrx.so.0" "/usr/lib/$multiarch/libhrx.so.${version%-*}"
check "libhrx-dev holds headers, archive, link and hrx.pc" has_paths libhrx-dev \
  /usr/include/hrx/client.h /usr/include/hrx/stream.h /usr/include/hrx/handle.h \
  "/usr/lib/$multiarch/libhrx.a" "/usr/lib/$multiarch/libhrx.so" \
  "/usr/lib/$multiarch/pkgconfig/hrx.pc"
check "python3-hrx holds the module" has_paths python3-hrx \
  /usr/lib/python3/dist-packages/hrx/__init__.py \
  /usr/lib/python3/dist-packages/hrx/_hrx.cpython-311-x86_64-linux-gnu.so
control_is_right() {
  dpkg-deb -I "$debs/hrxd_${version}_amd64.deb" conffiles | grep >/dev/null -x /etc/hrxd/hrxd.conf
  dpkg-deb -I "$debs/libhrx0_${version}_amd64.deb" shlibs | grep >/dev/null -x "libhrx 0 libhrx0 (>= ${version%-*})"
  dpkg-deb -I "$debs/libhrx0_${version}_amd64.deb" triggers | grep >/dev/null -x 'activate-noawait ldconfig'
  field_of libhrx-dev Depends | grep >/dev/null "libhrx0 (= $version)"
  field_of hrxd Depends | grep >/dev/null 'libgrpc++1.51 (>= '
  field_of python3-hrx Depends | grep >/dev/null 'python3-numpy'
  [ "$(field_of libhrx0 Package)" = libhrx0 ] && [ "$(field_of hrxd Architecture)" = amd64 ]
}
check "control data: conffiles, shlibs, ldconfig trigger, computed Depends" control_is_right
binaries_are_stripped() {
  for elf in usr/bin/hrxd usr/bin/hrxctl usr/bin/hrx-device-plugin; do
    dpkg-deb --fsys-tarfile "$debs/hrxd_${version}_amd64.deb" | tar -xO "./$elf" >"$HRX_TEST_DIR/elf"
    ! readelf -S "$HRX_TEST_DIR/elf" | grep >/dev/null '\.debug_info' || { echo "$elf has debug info"; return 1; }
  done
}
check "binaries are stripped" binaries_are_stripped
man_pages_render() {
  for page in usr/share/man/man8/hrxd.8.gz usr/share/man/man1/hrxctl.1.gz \
    usr/share/man/man8/hrx-device-plugin.8.gz; do
    dpkg-deb --fsys-tarfile "$debs/hrxd_${version}_amd64.deb" | tar -xO "./$page" | gunzip >"$HRX_TEST_DIR/page"
    warnings="$(groff -man -ww -z "$HRX_TEST_DIR/page" 2>&1)"
    [ -z "$warnings" ] || { echo "$page: $warnings"; return 1; }
    grep -q '^\.SH SYNOPSIS' "$HRX_TEST_DIR/page"
  done
}
check "man pages render without warnings" man_pages_render
lintian_clean() {
  # Errors and warnings fail; Debian's archive-only tags are overridden in
  # the packages themselves (initial-upload-closes-no-bugs).
  lintian --fail-on error,warning "$debs"/*.deb 2>&1
}
check "lintian finds no errors or warnings" lintian_clean

# A scratch root with its own dpkg database. --force-script-chrootless runs
# the maintainer scripts here with DPKG_ROOT set, as dpkg does for a system
# being bootstrapped; --force-depends since the root holds no other package.
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/etc"
touch "$root/var/lib/dpkg/status" "$root/var/lib/dpkg/available"
: >"$root/etc/passwd"
: >"$root/etc/group"
: >"$root/etc/shadow"
: >"$root/etc/gshadow"
dpkg_root() {
  dpkg --root="$root" --force-script-chrootless --force-depends --force-not-root \
    --log=/dev/null "$@"
}
installs() {
  dpkg_root -i "$debs"/*.deb
  [ "$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Status}' hrxd)" = "install ok installed" ]
  [ -x "$root/usr/bin/hrxd" ] && [ -f "$root/etc/hrxd/hrxd.conf" ]
  [ "$(readlink "$root/usr/lib/$multiarch/libhrx.so.0")" = "libhrx.so.${version%-*}" ]
}
check "dpkg installs all four into a scratch root" installs
postinst_did_its_part() {
  # sysusers.d: user hrxd, group hrx, hrxd in render and video.
  grep -q '^hrxd:' "$root/etc/passwd"
  grep -q '^hrx:' "$root/etc/group"
  grep -q '^render:.*hrxd' "$root/etc/group"
  grep -q '^hrx:.*hrxd' "$root/etc/group"
  # Not enabled: no unit symlinks anywhere under /etc/systemd.
  [ -z "$(find "$root/etc" -path '*systemd*' -name 'hrxd.*' 2>/dev/null)" ]
}
check "postinst made the hrxd user and groups and enabled nothing" postinst_did_its_part

# hrxd.service's command line, from the installed unit, with the installed
# paths: socket activation passes the listening socket (hrxd.socket), and
# NOTIFY_SOCKET receives READY=1 (Type=notify).
exec_start="$(sed -n 's/^ExecStart=//p' "$root/lib/systemd/system/hrxd.service")"
listen="$HRX_TEST_DIR/activated.sock"
notify="$HRX_TEST_DIR/notify.sock"
read -r -a command <<<"$exec_start"
command=("${command[@]/#\/usr\/bin\/hrxd/$root/usr/bin/hrxd}")
command=("${command[@]/#--socket=\/run\/hrxd\/hrxd.sock/--socket=$listen}")
command=("${command[@]/#--config=\/etc\/hrxd\/hrxd.conf/--config=$root/etc/hrxd/hrxd.conf}")
# Started here, not inside a case: the cases below use it (and cases run in
# subshells, tests/shell/cases.sh).
/usr/bin/python3 - "$notify" >"$HRX_TEST_DIR/notified" 2>&1 <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(60)
print(s.recv(4096).decode())
PY
listener=$!
for _ in $(seq 100); do [ -S "$notify" ] && break; sleep 0.1; done
systemd-socket-activate -l "$listen" -E NOTIFY_SOCKET="$notify" \
  "${command[@]/--backend=auto/--backend=cpu}" >"$HRX_TEST_DIR/unit.log" 2>&1 &
HRXD_PID=$!
for _ in $(seq 100); do [ -S "$listen" ] && break; sleep 0.1; done
# As under systemd, the first connection starts the service: hrxctl's.
"$root/usr/bin/hrxctl" --socket="$listen" status --json >"$HRX_TEST_DIR/status.json" 2>&1 || true
wait "$listener" || true
unit_starts() {
  [ "${command[0]}" = "$root/usr/bin/hrxd" ] || { echo "unexpected ExecStart: $exec_start"; return 1; }
  grep -q '^READY=1' "$HRX_TEST_DIR/notified" || { cat "$HRX_TEST_DIR/notified" "$HRX_TEST_DIR/unit.log"; return 1; }
  grep -q "\"version\": \"${version%-*}\"" "$HRX_TEST_DIR/status.json" || { cat "$HRX_TEST_DIR/status.json"; return 1; }
  # It serves on the socket it was given, not one of its own.
  if [ -e /run/hrxd/hrxd.sock ] && [ /run/hrxd/hrxd.sock -nt "$listen" ]; then return 1; fi
  grep -q 'listening on' "$HRX_TEST_DIR/unit.log"
}
check "hrxd.service's ExecStart starts the installed hrxd (activation, READY=1)" unit_starts

# The installed client side against that daemon.
export HRXD_SOCKET="$listen"
installed_python_works() {
  (
  hrx_python_sanitizer_env "$root/usr/lib/python3/dist-packages/hrx/_hrx.cpython-311-x86_64-linux-gnu.so"
  PYTHONPATH="$root/usr/lib/python3/dist-packages" /usr/bin/python3 -c '
import numpy as np, hrx
with hrx.connect() as c, c.device().stream() as s:
    b = s.allocate(4096, shared=True)
    s.fill(b, 7)
    s.synchronize()
    assert b.map().sum() == 7 * 4096
print("python ok")'
  )
}
check "the installed python3-hrx talks to it" installed_python_works
installed_pkg_config_works() {
  local sanitize
  # shellcheck disable=SC2207
  sanitize=($(hrx_sanitize_flags "$root/usr/lib/$multiarch/libhrx.so.0"))
  if hrx_built_with_tsan "$root/usr/lib/$multiarch/libhrx.so.0"; then
    hrx_tsan_options_env
  fi
  # shellcheck disable=SC2046
  PKG_CONFIG_PATH="$root/usr/lib/$multiarch/pkgconfig" \
    g++ "${sanitize[@]}" "$root/usr/share/hrxd/examples/hello.cc" -I"$root/usr/share/hrxd/examples" \
    $(PKG_CONFIG_PATH="$root/usr/lib/$multiarch/pkgconfig" pkg-config --cflags --libs hrx) \
    -o "$HRX_TEST_DIR/hello"
  LD_LIBRARY_PATH="$root/usr/lib/$multiarch" "$HRX_TEST_DIR/hello" | grep >/dev/null -x 'hello: ok'
}
check "hello builds from libhrx-dev with pkg-config and runs against it" installed_pkg_config_works
kill -TERM "$HRXD_PID"
stop_status=0
wait "$HRXD_PID" || stop_status=$?
HRXD_PID=""
stops_on_sigterm() {
  [ "$stop_status" -eq 0 ] || { echo "exit $stop_status"; cat "$HRX_TEST_DIR/unit.log"; return 1; }
}
check "the unit's hrxd stops cleanly on SIGTERM (KillSignal)" stops_on_sigterm

purges() {
  dpkg_root --purge python3-hrx libhrx-dev libhrx0 hrxd
  [ ! -e "$root/usr/bin/hrxd" ] && [ ! -e "$root/etc/hrxd/hrxd.conf" ]
  [ ! -e "$root/usr/lib/$multiarch/libhrx.so.0" ]
  [ -z "$(dpkg-query --admindir="$root/var/lib/dpkg" -W 2>/dev/null)" ] ||
    [ -z "$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Status}\n' | grep -v not-installed)" ]
}
check "purge removes every file, the conffile included" purges

if [ -d /run/systemd/system ] && [ "$(id -u)" = 0 ] && [ -n "${HRX_PACKAGE_TEST_SYSTEM:-}" ]; then
  system_install() {
    dpkg -i "$debs"/*.deb
    systemctl enable --now hrxd.socket
    hrxctl --socket=/run/hrxd/hrxd.sock status | grep >/dev/null backend
    systemctl is-active hrxd.service
    dpkg --purge python3-hrx libhrx-dev libhrx0 hrxd
  }
  check "installed on this system, hrxd.socket activates hrxd.service" system_install
fi
finish_cases
