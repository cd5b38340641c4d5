#!/usr/bin/env bash
# Builds and runs every test, then prints the per-test-case count last.
set -u
cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/hrx-test-run.XXXXXX)
trap 'rm -rf "$work"' EXIT

# Manual tests need a GPU (tools/gpu_run.sh runs them on one); bazel test
# //... skips them, so they are not counted here.
bazel query 'tests(//...) except attr("tags", "manual", //...)' 2>/dev/null |
  sort > "$work/targets"
bazel test //... --build_event_json_file="$work/bep.json" "$@"
echo
echo "Test cases by target:"
python3 tools/count_results.py "$work/bep.json" "$work/targets"
