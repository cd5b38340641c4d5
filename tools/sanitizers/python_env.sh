# Sourced before running Debian's python3 with an extension module that may
# have been built with --config=asan (make test's second run):
#   hrx_python_sanitizer_env MODULE.so
# exports LD_PRELOAD and ASAN_OPTIONS when MODULE.so needs ASan's runtime.
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

hrx_python_sanitizer_env() {
  if hrx_built_with_asan "$1"; then
    LD_PRELOAD="$(g++ -print-file-name=libasan.so) $(g++ -print-file-name=libstdc++.so.6)"
    export LD_PRELOAD
    # Last, so that it overrides the suite's own ASAN_OPTIONS (.bazelrc).
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
  fi
}
