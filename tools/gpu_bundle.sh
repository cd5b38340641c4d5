#!/usr/bin/env bash
# Builds what the GPU run needs and packs it, with the shared libraries it
# links (the device machine runs another distribution), into
# gpu-bundle.tar.xz at the repository root. tools/gpu_run.sh unpacks and
# runs it there. Usage: tools/gpu_bundle.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# The integration tests that run against a daemon, parametrized by backend.
SUITE=(client_daemon_test daemon_lifecycle_test generic_client_test
       graph_test hrxctl_test kernel_test operations_test remote_test
       resident_handle_test staging_test stream_ordering_test tenancy_test
       isolation_test deadline_test ring_test executor_ring_test)

targets=(//daemon:hrxd //daemon:hrxd_hip_nvidia //client:hrxctl
         //tests:client_worker //tests:tenant_client //tests/kernels
         //tests/kernels/gpu //daemon/backend/hip:hip_backend_test
         //tests/benchmarks:gpu_benchmark)
for t in "${SUITE[@]}"; do targets+=("//tests:$t"); done
# Project code linked statically into each binary, so they travel alone.
bazel build -c opt --dynamic_mode=off "${targets[@]}"

bin=$(bazel info -c opt --dynamic_mode=off bazel-bin 2>/dev/null)
stage=$(mktemp -d /tmp/hrx-gpu-bundle.XXXXXX)
trap 'rm -rf "$stage"' EXIT
root="$stage/gpu-bundle"
files="$root/runfiles/hrxd"
mkdir -p "$root/bin" "$root/lib" "$files/daemon" "$files/client" \
  "$files/tests/kernels/gpu"

install -m 755 "$bin/daemon/hrxd" "$bin/daemon/hrxd_hip_nvidia" "$files/daemon/"
install -m 755 "$bin/client/hrxctl" "$files/client/"
install -m 755 "$bin/tests/client_worker" "$bin/tests/tenant_client" "$files/tests/"
install -m 644 "$bin"/tests/kernels/*.so "$files/tests/kernels/"
install -m 644 "$bin"/tests/kernels/gpu/*.cubin "$files/tests/kernels/gpu/"
for t in "${SUITE[@]}"; do install -m 755 "$bin/tests/$t" "$root/bin/"; done
install -m 755 "$bin/daemon/backend/hip/hip_backend_test" "$root/bin/"
install -m 755 "$bin/tests/benchmarks/gpu_benchmark" "$root/bin/"

# Every shared library the binaries link, but the C runtime itself, which
# the device machine's newer glibc and libstdc++ provide.
find "$root" -type f -perm -u+x | xargs ldd 2>/dev/null |
  awk '/=> \// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$root/lib/"; done
find "$root" -type f \( -perm -u+x -o -name '*.so*' \) -exec strip --strip-debug {} + 2>/dev/null || true

tar -C "$stage" -cJf gpu-bundle.tar.xz gpu-bundle
echo "gpu-bundle.tar.xz: $(du -h gpu-bundle.tar.xz | cut -f1)"
