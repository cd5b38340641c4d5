#!/usr/bin/env bash
# libhrx as a program outside this repository sees it: installed into a
# temporary prefix by tools/package/install.sh, its public headers compile
# alone, and examples/hello.cc built with plain g++ and pkg-config, against
# the shared library and against the static archive, runs against a daemon.
set -euo pipefail
runfiles="${TEST_SRCDIR}/${TEST_WORKSPACE}"
source "$runfiles/tests/shell/daemon.sh"
prefix="$HRX_TEST_DIR/prefix"
source "$runfiles/tests/shell/cases.sh"
source "$runfiles/tools/sanitizers/python_env.sh"

"$runfiles/tools/package/install.sh" "$runfiles/deploy/hrx-install-tree.tar" "$prefix"
export PKG_CONFIG_PATH="$prefix/lib/x86_64-linux-gnu/pkgconfig"
libdir="$prefix/lib/x86_64-linux-gnu"

# The library as built here: under --config=asan or tsan it needs the
# sanitizer's runtime, and so does whatever links it.
# shellcheck disable=SC2207
sanitize=($(hrx_sanitize_flags "$libdir/libhrx.so.0"))
if hrx_built_with_tsan "$libdir/libhrx.so.0"; then hrx_tsan_options_env; fi

# Each public header alone, with only the prefix's include directory and the
# system's (Abseil); nothing internal may be named.
headers_compile_alone() {
  for header in "$prefix"/include/hrx/*.h; do
    printf '#include <hrx/%s>\nint main() { return 0; }\n' "$(basename "$header")" |
      g++ -std=c++20 -Wall -Wextra -Werror -fsyntax-only -I"$prefix/include" -x c++ - ||
      { echo "$header does not compile alone"; return 1; }
  done
}
check "every public header compiles alone" headers_compile_alone

only_public_includes() {
  # Quoted includes name only hrx/ and absl/; angle brackets only the
  # standard library (no '/' or '.h': <grpcpp/...> would compile here, where
  # gRPC's headers are installed, and nowhere else).
  local stray
  stray="$(grep -hn '#include' "$prefix"/include/hrx/*.h |
    grep -v -e '#include "hrx/' -e '#include "absl/' -e '#include <[a-z_]*>' -e '#include <stdint.h>' -e '#include <unistd.h>' || true)"
  if [ -n "$stray" ]; then echo "$stray"; return 1; fi
}
check "public headers include only hrx/ and absl/" only_public_includes

check "pkg-config knows hrx" pkg-config --exists --print-errors hrx
check "pkg-config version is the library's" \
  test "$(pkg-config --modversion hrx)" = "$(readlink "$libdir/libhrx.so.0" | sed 's/^libhrx.so.//')"

build_shared() {
  # shellcheck disable=SC2046
  g++ "${sanitize[@]}" "$runfiles/examples/hello.cc" -I"$runfiles/examples" \
    $(pkg-config --cflags --libs hrx) -o "$HRX_TEST_DIR/hello_shared"
}
check "hello builds with g++ \$(pkg-config --cflags --libs hrx)" build_shared

build_static() {
  # The archive in place of -lhrx; --static adds what it needs privately.
  # shellcheck disable=SC2046
  g++ "${sanitize[@]}" "$runfiles/examples/hello.cc" -I"$runfiles/examples" \
    $(pkg-config --cflags hrx) \
    $(pkg-config --static --libs hrx | sed "s|-lhrx|$libdir/libhrx.a|") \
    -o "$HRX_TEST_DIR/hello_static"
}
check "hello builds against libhrx.a" build_static

start_daemon
run_shared() {
  LD_LIBRARY_PATH="$libdir" ldd "$HRX_TEST_DIR/hello_shared" | grep >/dev/null "libhrx.so.0 => $libdir/libhrx.so.0"
  LD_LIBRARY_PATH="$libdir" "$HRX_TEST_DIR/hello_shared" | tee /dev/stderr | grep >/dev/null -x "hello: ok"
}
check "hello (shared libhrx) runs against a daemon" run_shared
run_static() {
  if ldd "$HRX_TEST_DIR/hello_static" | grep libhrx; then return 1; fi
  "$HRX_TEST_DIR/hello_static" | tee /dev/stderr | grep >/dev/null -x "hello: ok"
}
check "hello (static libhrx) runs against a daemon" run_static

# The other examples too: they use kernels, constants, graphs, events,
# grants and mappings, so their links prove those symbols are exported.
other_examples_build_and_run() {
  for name in saxpy share graph; do
    # shellcheck disable=SC2046
    g++ "${sanitize[@]}" "$runfiles/examples/$name.cc" -I"$runfiles/examples" \
      $(pkg-config --cflags --libs hrx) -o "$HRX_TEST_DIR/$name"
  done
  export LD_LIBRARY_PATH="$libdir"
  "$HRX_TEST_DIR/saxpy" "$runfiles/tests/kernels/saxpy.so" | grep >/dev/null -x "saxpy: ok"
  "$HRX_TEST_DIR/share" | grep >/dev/null -x "share: ok"
  "$HRX_TEST_DIR/graph" 10 | grep >/dev/null -x "graph: ok"
}
check "saxpy, share and graph build against it and run" other_examples_build_and_run

exported_api_only() {
  # The shared library exports the public API, not the wire messages or
  # the transports it is built from.
  local exported
  exported="$(nm -D --defined-only "$libdir/libhrx.so.0" | c++filt | cut -d' ' -f3-)"
  grep -q '^hrx::Client::Connect(' <<<"$exported"
  grep -q '^hrx::Constants::FullError(' <<<"$exported"  # Push<T> calls it
  if grep -E '^(hrx::v1::|hrx::shared::|hrx::client::internal::Connection|hrx::Refusal|hrx::ReasonToken|google::|grpc)' <<<"$exported"; then
    return 1
  fi
}
check "libhrx.so exports only the public API" exported_api_only

finish_cases
