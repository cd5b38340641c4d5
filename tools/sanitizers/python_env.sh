# Sourced before running Debian's python3 with an extension module that may
# have been built with --config=asan (make test's second run):
#   hrx_python_sanitizer_env MODULE.so
# exports LD_PRELOAD and ASAN_OPTIONS when MODULE.so needs ASan's runtime,
# and LD_PRELOAD and TSAN_OPTIONS when it needs TSan's (--config=tsan).
# python3 is not linked with it, so the runtime must be preloaded, and
# libstdc++ with it: ASan resolves the real __cxa_throw when it starts, and
# without libstdc++ loaded by then every C++ exception aborts. Python's own
# allocations are not leaks to report.
#
# (grep without -q: under pipefail, grep -q quitting at the first match can
# kill objdump with SIGPIPE and fail the pipeline, now and then, which left
# the runtime out and aborted python3 with "ASan runtime does not come
# first".)
# True when the ELF file FILE was built with --config=asan (it needs ASan's
# runtime); programs linked against it need -fsanitize=address,undefined.
hrx_built_with_asan() {
  objdump -p "$1" 2>/dev/null | grep >/dev/null 'NEEDED.*libasan'
}

# True when the ELF file FILE was built with --config=tsan.
hrx_built_with_tsan() {
  objdump -p "$1" 2>/dev/null | grep >/dev/null 'NEEDED.*libtsan'
}

# The compiler flags a program linked against the ELF file FILE needs: the
# sanitizer FILE was built with (none for the default build).
hrx_sanitize_flags() {
  if hrx_built_with_asan "$1"; then
    echo -fsanitize=address,undefined
  elif hrx_built_with_tsan "$1"; then
    echo -fsanitize=thread
  fi
}

# Where this file is: tsan.supp is beside it.
hrx_sanitizer_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# For a program built outside Bazel against a --config=tsan library: it has
# no suppressions compiled in (tools/sanitizers/BUILD), so they are given in
# TSAN_OPTIONS, and uninstrumented modules (python3) are not reported.
hrx_tsan_options_env() {
  export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}ignore_noninstrumented_modules=1:suppressions=$hrx_sanitizer_dir/tsan.supp"
}

hrx_python_sanitizer_env() {
  if hrx_built_with_tsan "$1"; then
    # TSan's runtime cannot be loaded with a module after the program has
    # started ("cannot allocate memory in static TLS block"). Started this
    # way it reads no flags or suppressions from the module (those compiled
    # into binaries, tools/sanitizers/BUILD): the same ones, given here.
    LD_PRELOAD="$(g++ -print-file-name=libtsan.so)"
    export LD_PRELOAD
    hrx_tsan_options_env
  fi
  if hrx_built_with_asan "$1"; then
    LD_PRELOAD="$(g++ -print-file-name=libasan.so) $(g++ -print-file-name=libstdc++.so.6)"
    export LD_PRELOAD
    # Last, so that it overrides the suite's own ASAN_OPTIONS (.bazelrc).
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
  fi
}
