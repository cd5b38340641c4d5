# The two commands of the quick start. Both install what is missing first.
.PHONY: run test setup build format

# Extra hrxd flags for `make run`, e.g. make run ARGS=--log-level=debug
ARGS ?=

setup:
	@tools/setup.sh

build: setup
	bazel build //daemon:hrxd //client:hrxctl

run: build
	@bazel-bin/daemon/hrxd --backend=cpu $(ARGS)

test: setup
	@tools/run_tests.sh

# Rewrites C++ sources as .clang-format says (make test checks it).
format: setup
	@tools/checks/format_check.sh --fix
