#!/usr/bin/env bash
# Runs deploy/kubernetes/manifest_test.py against the built
# hrx-device-plugin (its --describe reads the DaemonSet's plugin args).
set -euo pipefail
runfiles="${TEST_SRCDIR}/${TEST_WORKSPACE}"
export HRX_DEVICE_PLUGIN="$runfiles/deviceplugin/hrx-device-plugin"
cd "$runfiles"
/usr/bin/python3 -m pytest -p no:cacheprovider -v \
  --junitxml="${XML_OUTPUT_FILE:-/tmp/manifest_test.xml}" deploy/kubernetes/manifest_test.py
