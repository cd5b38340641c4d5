#!/usr/bin/env bash
# Installs the Debian 12 packages the build needs, only when one is missing.
# Idempotent and fast (one dpkg query) when everything is already present.
set -euo pipefail

packages=(
  bazel-bootstrap bazel-platforms
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
  libsystemd-dev python3 make g++ openssl systemd
  clang-format  # the format check (tools/checks/format_check.sh)
  clang-14 libfuzzer-14-dev libclang-rt-14-dev  # fuzz targets (tools/fuzz.sh)
  libamdhip64-dev  # the HIP backend's AMD build variant
  # Reach (docs/building.md): pkg-config for the installed libhrx's test,
  # the Python package (pybind11, numpy, pytest from Debian), and the
  # Debian packages' checks (dpkg-deb is in the base system; lintian, file).
  pkg-config python3-dev pybind11-dev python3-numpy python3-pytest python3-yaml lintian file
  groff-base
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install ${missing[*]}. Fix: run as root or install sudo." >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
