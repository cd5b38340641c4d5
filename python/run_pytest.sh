#!/usr/bin/env bash
# Runs the Python package's pytest suite against a real daemon, with Debian's
# python3 (where python3-numpy and python3-pytest are), each case counted in
# the JUnit XML Bazel reads.
#   run_pytest.sh TEST_DIR
set -euo pipefail
runfiles="${TEST_SRCDIR}/${TEST_WORKSPACE}"
source "$runfiles/tests/shell/daemon.sh"
export PYTHONPATH="$runfiles/python"
export HRX_TEST_KERNELS="$runfiles/tests/kernels"
source "$runfiles/tools/sanitizers/python_env.sh"
hrx_python_sanitizer_env "$runfiles/python/hrx/_hrx.so"
start_daemon
cd "$runfiles"
/usr/bin/python3 -m pytest -p no:cacheprovider -v \
  --junitxml="${XML_OUTPUT_FILE:-$HRX_TEST_DIR/pytest.xml}" "$1"
