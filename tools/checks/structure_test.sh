#!/usr/bin/env bash
# Runs structure_check.py on the source tree this test's runfile links to.
# Tagged "external" and "local": it reads files the build does not list, so
# it must neither be cached nor sandboxed.
set -euo pipefail
here="$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")"
exec python3 "$here/structure_check.py" "$here/../.."
