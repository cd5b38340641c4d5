#!/usr/bin/env bash
# Fails, naming the files, when C++ sources are not as clang-format (the
# repository's .clang-format) writes them. `tools/checks/format_check.sh
# --fix` rewrites them in place. Run by //tools/checks:format_test.
set -euo pipefail
root="$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.."
cd "$root"
command -v clang-format >/dev/null || {
  echo "format: clang-format is missing. Fix: run tools/setup.sh." >&2
  exit 1
}
mapfile -t files < <(find client daemon shared tests tools examples \
  -type f \( -name '*.h' -o -name '*.cc' -o -name '*.c' \) 2>/dev/null | sort)
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for file in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$file" >/dev/null 2>&1; then
    bad+=("$file")
  fi
done
if [ ${#bad[@]} -ne 0 ]; then
  printf 'format: %d of %d files differ from clang-format:\n' \
    "${#bad[@]}" "${#files[@]}" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "Fix: run tools/checks/format_check.sh --fix (or make format)." >&2
  exit 1
fi
echo "format: ${#files[@]} files ok"
