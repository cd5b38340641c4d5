# The two commands of the quick start. Both install what is missing first.
.PHONY: run test test-asan test-tsan soak fuzz bench setup build format install deb

# Extra hrxd flags for `make run`, e.g. make run ARGS=--log-level=debug
ARGS ?=

setup:
	@tools/setup.sh

build: setup
	bazel build //daemon:hrxd //client:hrxctl

run: build
	@bazel-bin/daemon/hrxd --backend=cpu $(ARGS)

# The whole suite, in the default build and under ASan+UBSan, plus a bounded
# run of every fuzz target (docs/reliability.md).
test: setup
	@tools/run_tests.sh

# The whole suite under one sanitizer only.
test-asan: setup
	@HRX_TEST_PHASES=asan tools/run_tests.sh

test-tsan: setup
	@HRX_TEST_PHASES=tsan tools/run_tests.sh

# Executor supervision under load (docs/reliability.md): 1,000 executor
# crashes in a row on each transport with hrxd's descriptors and threads
# back where they were, then isolation_test 20 times on each transport.
soak: setup
	bazel test //tests:isolation_test //tests:isolation_test_grpc \
	  --test_filter='*CrashingKernels*' --test_env=HRX_EXECUTOR_CRASHES=1000 \
	  --test_timeout=3600 --cache_test_results=no
	bazel test //tests:isolation_test //tests:isolation_test_grpc \
	  --runs_per_test=20 --cache_test_results=no

# Every fuzz target for FUZZ_SECONDS each (default 300), growing a corpus
# kept in ~/.cache/hrx-fuzz across runs.
FUZZ_SECONDS ?= 300
fuzz: setup
	@HRX_FUZZ_KEEP_CORPUS=1 tools/fuzz.sh $(FUZZ_SECONDS)

# Every benchmark (CPU backend), ratios to baselines from the same run; the
# latency figures also as JSON in bench.json (docs/performance.md).
bench: setup
	@tools/bench.sh

# Rewrites C++ sources as .clang-format says (make test checks it).
format: setup
	@tools/checks/format_check.sh --fix

# hrxd, hrxctl, libhrx (libhrx.so.0, libhrx.a), its headers and hrx.pc, man
# pages and examples under PREFIX (docs/building.md, "Installing libhrx").
PREFIX ?= /usr/local
install: setup
	bazel build -c opt //deploy:install_tree
	@tools/package/install.sh bazel-bin/deploy/hrx-install-tree.tar $(DESTDIR)$(PREFIX)

# The Debian packages (hrxd, libhrx0, libhrx-dev, python3-hrx) in ./dist
# (docs/operations.md, "Installing the Debian packages").
deb: setup
	bazel build -c opt //deploy:debs
	@mkdir -p dist && cp -f bazel-bin/deploy/debs/*.deb dist/ && ls -l dist/*.deb
