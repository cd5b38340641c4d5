#!/usr/bin/env bash
# `make deb`: splits the install tree (//deploy:install_tree) into Debian
# packages as Debian's policy splits such a project, and builds each with
# dpkg-deb:
#   hrxd         the daemon, hrxctl, hrx-device-plugin, units, sysusers/tmpfiles, /etc/hrxd,
#                man pages, the Grafana dashboard, examples
#   libhrx0      libhrx.so.0 (with shlibs and an ldconfig trigger)
#   libhrx-dev   headers, libhrx.a, the libhrx.so link, hrx.pc
#   python3-hrx  the Python module hrx
# Depends are computed from each package's ELF files' NEEDED entries and
# the installed packages that provide them (what dpkg-shlibdeps does).
#
#   make_deb.sh OUT_DIR INSTALL_TREE.tar DEBIAN_DIR VERSION RELEASE_EPOCH
# RELEASE_EPOCH (seconds) dates every file and the changelog entry, so the
# packages are reproducible.
set -euo pipefail
out_dir="$(realpath -m "$1")"
tree_tar="$(realpath "$2")"
debian="$(realpath "$3")"
version="$4-1"  # upstream version, Debian revision 1
epoch="$5"
date="$(date -u -R -d "@$epoch")"
arch=amd64
multiarch=x86_64-linux-gnu

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/tree" "$out_dir"
tar -C "$work/tree" -xf "$tree_tar"

# Path patterns (relative to the tree) of each package, first match wins.
package_of() {
  case "$1" in
    usr/lib/$multiarch/libhrx.so.*) echo libhrx0 ;;
    usr/lib/$multiarch/libhrx.so | usr/lib/$multiarch/libhrx.a | \
      usr/lib/$multiarch/pkgconfig/* | usr/include/*) echo libhrx-dev ;;
    usr/lib/python3/*) echo python3-hrx ;;
    *) echo hrxd ;;
  esac
}

packages=(hrxd libhrx0 libhrx-dev python3-hrx)
for package in "${packages[@]}"; do mkdir -p "$work/$package/DEBIAN"; done
(cd "$work/tree" && find . -mindepth 1 \( -type f -o -type l \) -printf '%P\n') |
  while read -r path; do
    package="$(package_of "$path")"
    mkdir -p "$work/$package/$(dirname "$path")"
    cp -a "$work/tree/$path" "$work/$package/$path"
  done

# Release builds are stripped (debugging symbols are not shipped).
strip_elf() {
  local file="$1"
  case "$(file -b "$file")" in
    *"current ar archive"*) strip --strip-debug --enable-deterministic-archives "$file" ;;
    *ELF*"shared object"* | *ELF*executable*)
      strip --remove-section=.comment --remove-section=.note --strip-unneeded "$file" ;;
  esac
}

# "pkg (>= upstream version)" for each library the ELF files need, from the
# package that installed it; libhrx itself maps to libhrx0 of this version.
depends_of() {
  local dir="$1" needed lib path pkg ver
  needed="$(find "$dir" -type f \( -name '*.so*' -o -perm -u+x \) -print0 |
    xargs -0 -r objdump -p 2>/dev/null | awk '/^ *NEEDED/ {print $2}' | sort -u)"
  for lib in $needed; do
    if [ "$lib" = libhrx.so.0 ]; then echo "libhrx0 (= $version)"; continue; fi
    path="$(ldconfig -p | awk -v lib="$lib" '$1 == lib && /x86-64/ {print $NF; exit}')"
    [ -n "$path" ] || { echo "make_deb: no installed $lib" >&2; exit 1; }
    pkg="$(dpkg -S "$(realpath "$path")" 2>/dev/null | head -1 | cut -d: -f1)" ||
      pkg="$(dpkg -S "$path" | head -1 | cut -d: -f1)"
    # One line per installed architecture of a Multi-Arch package: the first.
    # The epoch stays (it orders versions); the Debian revision goes, as
    # dpkg-shlibdeps' shlibs entries do.
    ver="$(dpkg-query -W -f='${Version}\n' "$pkg" | head -1 | sed -e 's/-[^-]*$//')"
    echo "$pkg (>= $ver)"
  done | sort -u | paste -sd, | sed 's/,/, /g'
}

for package in "${packages[@]}"; do
  root="$work/$package"
  [ -n "$(find "$root" -mindepth 1 -not -path "$root/DEBIAN*" -print -quit)" ] ||
    { echo "make_deb: nothing for $package" >&2; exit 1; }
  find "$root" -type f -not -path "$root/DEBIAN/*" | while read -r file; do strip_elf "$file"; done
  doc="$root/usr/share/doc/$package"
  mkdir -p "$doc"
  install -m 0644 "$debian/copyright" "$doc/copyright"
  sed -e "s/@VERSION@/$version/" -e "s/@DATE@/$date/" "$debian/changelog.in" |
    gzip -9n >"$doc/changelog.Debian.gz"
  # Not uploaded to Debian: no ITP bug for the first entry to close.
  mkdir -p "$root/usr/share/lintian/overrides"
  echo "$package: initial-upload-closes-no-bugs" \
    >"$root/usr/share/lintian/overrides/$package"
  for script in postinst prerm postrm; do
    [ -f "$debian/$package.$script" ] && install -m 0755 "$debian/$package.$script" "$root/DEBIAN/$script"
  done
  for meta in conffiles triggers; do
    [ -f "$debian/$package.$meta" ] && install -m 0644 "$debian/$package.$meta" "$root/DEBIAN/$meta"
  done
  if [ "$package" = libhrx0 ]; then
    echo "libhrx 0 libhrx0 (>= ${version%-*})" >"$root/DEBIAN/shlibs"
    chmod 0644 "$root/DEBIAN/shlibs"
  fi
  # Directories 0755, files 0644 unless executable (dpkg-deb keeps modes).
  find "$root" -type d -exec chmod 0755 {} +
  (cd "$root" && find . -type f -not -path './DEBIAN/*' -printf '%P\0' |
    xargs -0 md5sum >DEBIAN/md5sums)
  chmod 0644 "$root/DEBIAN/md5sums"
  find "$root" -exec touch -h -d "@$epoch" {} +
  size="$(du -sk --apparent-size --exclude=DEBIAN "$root" | cut -f1)"
  depends="$(depends_of "$root")"
  sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" \
    -e "s/@INSTALLED_SIZE@/$size/" -e "s/@DEPENDS@/$depends/" \
    -e 's/^Depends: , /Depends: /' -e '/^Depends: *$/d' \
    "$debian/$package.control.in" >"$root/DEBIAN/control"
  SOURCE_DATE_EPOCH="$epoch" dpkg-deb --root-owner-group -Zxz --build "$root" \
    "$out_dir/${package}_${version}_${arch}.deb" >/dev/null
done
ls "$out_dir"
