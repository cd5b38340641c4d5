# Sourced by shell tests made of several cases: `check NAME COMMAND...` runs
# one case, prints PASS or FAIL with the case's output, and records it;
# `finish_cases` writes them as JUnit XML to $XML_OUTPUT_FILE (so make test
# counts each case) and exits 1 when any failed.
#
# A case runs in a subshell with errexit on, outside any `if`, so that every
# failing command in it fails the case (bash ignores `set -e` in the
# condition of an `if`, even inside a subshell). Hence a case cannot set
# variables for later ones, and `! command` in the middle of a case checks
# nothing (bash's errexit ignores negated commands): write
# `if command; then return 1; fi` instead. And under pipefail, end a
# pipeline with `grep >/dev/null PATTERN`, not `grep -q`: -q stops reading
# at the first match, and the writer's SIGPIPE then fails the pipeline.
HRX_CASES_LOG="$(mktemp /tmp/hrx-case.XXXXXX)"
hrx_case_names=()
hrx_case_results=()

check() {
  local name="$1"
  shift
  local status=0 errexit=0
  [[ $- == *e* ]] && errexit=1
  set +e
  (
    set -e
    "$@"
  ) >"$HRX_CASES_LOG" 2>&1
  status=$?
  [ "$errexit" -eq 1 ] && set -e
  if [ "$status" -eq 0 ]; then
    echo "PASS: $name"
    hrx_case_results+=(pass)
  else
    echo "FAIL: $name"
    sed 's/^/    /' "$HRX_CASES_LOG"
    hrx_case_results+=(fail)
  fi
  hrx_case_names+=("$name")
}

finish_cases() {
  local suite="${TEST_TARGET:-shell}" failed=0 i name
  for result in "${hrx_case_results[@]}"; do [ "$result" = pass ] || failed=$((failed + 1)); done
  if [ -n "${XML_OUTPUT_FILE:-}" ]; then
    {
      echo '<?xml version="1.0" encoding="UTF-8"?>'
      echo "<testsuites><testsuite name=\"$suite\" tests=\"${#hrx_case_names[@]}\" failures=\"$failed\">"
      for i in "${!hrx_case_names[@]}"; do
        name="$(sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g' <<<"${hrx_case_names[$i]}")"
        if [ "${hrx_case_results[$i]}" = pass ]; then
          echo "<testcase classname=\"$suite\" name=\"$name\"/>"
        else
          echo "<testcase classname=\"$suite\" name=\"$name\"><failure message=\"failed\"/></testcase>"
        fi
      done
      echo "</testsuite></testsuites>"
    } >"$XML_OUTPUT_FILE"
  fi
  rm -f "$HRX_CASES_LOG"
  echo "${#hrx_case_names[@]} cases, $failed failed"
  [ "$failed" -eq 0 ] && [ "${#hrx_case_names[@]}" -gt 0 ]
}
