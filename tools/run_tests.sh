#!/usr/bin/env bash
# Builds and runs every test, then prints the per-test-case count last.
set -u
cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/hrx-test-run.XXXXXX)
trap 'rm -rf "$work"' EXIT

bazel query 'tests(//...)' 2>/dev/null | sort > "$work/targets"
bazel test //... --build_event_json_file="$work/bep.json" "$@"
echo
echo "Test cases by target:"
python3 tools/count_results.py "$work/bep.json" "$work/targets"
