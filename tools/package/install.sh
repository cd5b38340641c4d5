#!/usr/bin/env bash
# `make install`: installs hrxd, hrxctl, libhrx (shared and static), its
# headers and hrx.pc, the man pages and the examples under PREFIX (default
# /usr/local), from the tree //deploy:install_tree lays out. System
# integration (systemd units, sysusers, /etc/hrxd) comes with the Debian
# package instead (make deb).
#
#   install.sh INSTALL_TREE.tar PREFIX
set -euo pipefail
tree_tar="$1"
prefix="${2:-/usr/local}"
[ -f "$tree_tar" ] || { echo "install: no $tree_tar. Fix: bazel build //deploy:install_tree first." >&2; exit 1; }
mkdir -p "$prefix"
# Members under usr/ land under PREFIX (usr/bin/hrxd -> PREFIX/bin/hrxd).
tar -C "$prefix" -xf "$tree_tar" --no-same-owner --strip-components=2 ./usr
echo "installed under $prefix; build against it with"
echo "  PKG_CONFIG_PATH=$prefix/lib/x86_64-linux-gnu/pkgconfig pkg-config --cflags --libs hrx"
