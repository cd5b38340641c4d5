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
# Members under usr/ land under PREFIX (usr/bin/hrxd -> PREFIX/bin/hrxd),
# except systemd's sysusers.d and tmpfiles.d entries: systemd reads
# /usr/local/lib too, and installing those is the package's business.
tar -C "$prefix" -xf "$tree_tar" --no-same-owner --strip-components=2 \
  --exclude='./usr/lib/sysusers.d' --exclude='./usr/lib/tmpfiles.d' ./usr
# The Python module where Debian's python3 looks: /usr/lib/python3/
# dist-packages for /usr (as the package has it), PREFIX/lib/python3.11/
# dist-packages elsewhere (/usr/local/lib/python3.11/dist-packages is on
# python3's path).
python_dir="$prefix/lib/python3/dist-packages"
if [ "$(realpath -m "$prefix")" != /usr ]; then
  python_dir="$prefix/lib/python3.11/dist-packages"
  mkdir -p "$python_dir"
  rm -rf "$python_dir/hrx"
  mv "$prefix/lib/python3/dist-packages/hrx" "$python_dir/hrx"
  rmdir -p "$prefix/lib/python3/dist-packages" 2>/dev/null || true
fi
libdir="$prefix/lib/x86_64-linux-gnu"
echo "installed under $prefix:"
echo "  C++:    PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --cflags --libs hrx"
echo "  Python: PYTHONPATH=$python_dir (already on python3's path for /usr/local)"
case "$libdir" in
  /usr/local/lib/x86_64-linux-gnu) echo "  run ldconfig (as root) once, so that programs find libhrx.so.0" ;;
  *) echo "  programs find libhrx.so.0 with LD_LIBRARY_PATH=$libdir" ;;
esac
