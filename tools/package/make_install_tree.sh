#!/usr/bin/env bash
# Lays out everything hrx installs, as a filesystem tree under usr/, etc/ and
# lib/, and writes it as one tar (//deploy:install_tree). `make install`
# (tools/package/install.sh) and `make deb` (tools/package/make_deb.sh) both
# start from this tree, so they install the same files.
#
#   make_install_tree.sh OUT.tar KEY=PATH...
# KEYs: hrxd hrxctl device_plugin libhrx_so libhrx_a hrx_pc headers (space-separated
# list) units conf man docs dashboard examples python kubernetes; version
# soversion
# python_suffix epoch.
set -euo pipefail
out="$(realpath -m "$1")"
shift
declare -A in
for pair in "$@"; do in["${pair%%=*}"]="${pair#*=}"; done

tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
chmod 0755 "$tree"
multiarch=x86_64-linux-gnu
lib="$tree/usr/lib/$multiarch"
version="${in[version]}"
soversion="${in[soversion]}"
install -d "$tree/usr/bin" "$lib/pkgconfig" "$tree/usr/include/hrx" \
  "$tree/lib/systemd/system" "$tree/usr/lib/sysusers.d" \
  "$tree/usr/lib/tmpfiles.d" "$tree/etc/hrxd" "$tree/usr/share/man/man1" \
  "$tree/usr/share/man/man8" "$tree/usr/share/doc/hrxd" \
  "$tree/usr/share/hrxd/grafana" "$tree/usr/share/hrxd/examples" \
  "$tree/usr/share/hrxd/kubernetes"

install -m 0755 "${in[hrxd]}" "$tree/usr/bin/hrxd"
install -m 0755 "${in[hrxctl]}" "$tree/usr/bin/hrxctl"
install -m 0755 "${in[device_plugin]}" "$tree/usr/bin/hrx-device-plugin"
install -m 0644 "${in[libhrx_so]}" "$lib/libhrx.so.$version"
ln -s "libhrx.so.$version" "$lib/libhrx.so.$soversion"
ln -s "libhrx.so.$soversion" "$lib/libhrx.so"
install -m 0644 "${in[libhrx_a]}" "$lib/libhrx.a"
install -m 0644 "${in[hrx_pc]}" "$lib/pkgconfig/hrx.pc"
for header in ${in[headers]}; do
  install -m 0644 "$header" "$tree/usr/include/hrx/"
done
for unit in ${in[units]}; do
  case "$unit" in
    *.service | *.socket) install -m 0644 "$unit" "$tree/lib/systemd/system/" ;;
    *.sysusers) install -m 0644 "$unit" "$tree/usr/lib/sysusers.d/hrxd.conf" ;;
    *.tmpfiles) install -m 0644 "$unit" "$tree/usr/lib/tmpfiles.d/hrxd.conf" ;;
  esac
done
install -m 0644 "${in[conf]}" "$tree/etc/hrxd/hrxd.conf"
for page in ${in[man]}; do
  section="${page##*.}"
  gzip -9n <"$page" >"$tree/usr/share/man/man$section/$(basename "$page").gz"
done
for doc in ${in[docs]}; do
  install -m 0644 "$doc" "$tree/usr/share/doc/hrxd/"
done
install -m 0644 "${in[dashboard]}" "$tree/usr/share/hrxd/grafana/"
for example in ${in[examples]}; do
  mode=0644
  [ "${example##*.}" = sh ] && mode=0755
  install -m "$mode" "$example" "$tree/usr/share/hrxd/examples/"
done
for manifest in ${in[kubernetes]}; do
  install -m 0644 "$manifest" "$tree/usr/share/hrxd/kubernetes/"
done
if [ -n "${in[python]:-}" ]; then
  python_dir="$tree/usr/lib/python3/dist-packages/hrx"
  install -d "$python_dir"
  for file in ${in[python]}; do
    name="$(basename "$file")"
    # The extension module under the name Debian's python3 imports.
    [ "$name" = _hrx.so ] && name="_hrx${in[python_suffix]}"
    install -m 0644 "$file" "$python_dir/$name"
  done
fi

# Reproducible: fixed owner, order and times (the release's date).
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@${in[epoch]}" \
  -C "$tree" -cf "$out" .
