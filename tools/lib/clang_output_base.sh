# Sourced by tools/fuzz.sh and tools/thread_safety.sh: the Bazel output base
# of the clang-14 builds (--config=fuzz), one per checkout, apart from the
# GCC builds' so that switching compilers keeps both caches.
clang_output_base="${HOME:-/root}/.cache/bazel/hrx-fuzz-$(printf %s "$PWD" | md5sum | cut -c1-8)"
