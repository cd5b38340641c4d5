#!/usr/bin/env python3
"""Counts test cases from a Bazel run and prints `N passed, N failed` last.

Reads the build event protocol file of the run (--build_event_json_file) for
each test target's result and its test.xml, so every count comes from this
run's real results. A test target with no result (it failed to build, or the
run was cut short) counts as one failure; so does a target that failed
without a failing test case in its XML (a crash or a timeout).

usage: count_results.py BEP_JSON TEST_TARGETS_FILE
       count_results.py [--phase NAME BEP_JSON TEST_TARGETS_FILE]...
                        [--check CHECK_OUTPUT] [--fuzz FUZZ_OUTPUT]
           (make test: one phase per build configuration, each counted on
           its own; FUZZ_OUTPUT holds tools/fuzz.sh's `fuzz-result NAME
           passed|failed ...` lines, one case per target; CHECK_OUTPUT
           tools/thread_safety.sh's `check-result NAME passed|failed ...`. Lines starting
           with `figure:` in the first phase's test logs and in FUZZ_OUTPUT
           are printed before the count.)
       count_results.py --xml NAME=XML_PATH...   (runs outside Bazel, such as
           tools/gpu_run.sh's: a missing or unreadable XML counts as one
           failure)
"""
import json
import sys
import urllib.parse
import xml.etree.ElementTree as ElementTree


def read_results(bep_path):
    """label -> (status, test.xml, test.log, failed earlier attempts)."""
    results = {}
    with open(bep_path, encoding="utf-8") as bep:
        for line in bep:
            event = json.loads(line)
            test_result = event.get("testResult")
            if test_result is None:
                continue
            label = event["id"]["testResult"]["label"]
            paths = {}
            for output in test_result.get("testActionOutput", []):
                uri = output.get("uri", "")
                if uri.startswith("file://"):
                    paths[output.get("name")] = urllib.parse.unquote(
                        uri[len("file://"):])
            status = test_result.get("status", "NO_STATUS")
            # With --flaky_test_attempts each attempt reports; the last one
            # counts, and earlier failures are named in the output.
            earlier = results.get(label)
            failed_before = (earlier[3] if earlier else 0) + (
                1 if earlier and earlier[0] != "PASSED" else 0)
            results[label] = (status, paths.get("test.xml"),
                              paths.get("test.log"), failed_before)
    return results


def count_cases(xml_path):
    passed = failed = 0
    failures = []
    root = ElementTree.parse(xml_path).getroot()
    for case in root.iter("testcase"):
        name = f'{case.get("classname", "")}.{case.get("name", "")}'
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
            failures.append(name)
        elif case.get("status") == "notrun" or case.find("skipped") is not None:
            failed += 1  # a skipped check is not a pass
            failures.append(name + " (skipped)")
        else:
            passed += 1
    return passed, failed, failures


def main_xml(pairs):
    total_passed = total_failed = 0
    for pair in pairs:
        name, _, xml_path = pair.partition("=")
        try:
            passed, failed, failures = count_cases(xml_path)
        except (OSError, ElementTree.ParseError):
            passed, failed, failures = 0, 1, ["no test.xml (crash or timeout)"]
        total_passed += passed
        total_failed += failed
        print(f"  {name}: {passed} passed, {failed} failed"
              + (f"  [{'; '.join(failures)}]" if failures else ""))
    print(f"{total_passed} passed, {total_failed} failed")
    return 0 if total_failed == 0 and total_passed > 0 else 1


def count_phase(name, bep_path, targets_path):
    """Prints one line per target; returns (passed, failed, log paths)."""
    with open(targets_path, encoding="utf-8") as targets_file:
        targets = [t.strip() for t in targets_file if t.strip()]
    try:
        results = read_results(bep_path)
    except OSError:
        results = {}
    total_passed = total_failed = 0
    logs = []
    if name:
        print(f"[{name}]")
    for target in targets:
        status, xml_path, log_path, retried = results.get(
            target, ("NOT_RUN", None, None, 0))
        if log_path:
            logs.append(log_path)
        passed = failed = 0
        failures = []
        if xml_path is not None:
            try:
                passed, failed, failures = count_cases(xml_path)
            except (OSError, ElementTree.ParseError):
                pass
        if status != "PASSED" and failed == 0:
            failed = 1
            failures.append(f"target {status}")
        if retried and status == "PASSED":
            failures.append(f"FLAKY: passed after {retried} failed attempt(s)")
        total_passed += passed
        total_failed += failed
        print(f"  {target}: {passed} passed, {failed} failed"
              + (f"  [{'; '.join(failures)}]" if failures else ""))
    return total_passed, total_failed, logs


def figures(paths):
    lines = []
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as log:
                lines += [line.rstrip() for line in log
                          if line.startswith("figure:")]
        except OSError:
            pass
    return lines


def count_result_lines(kind, lines):
    """Counts `KIND-result NAME passed|failed [why]` lines (tools/fuzz.sh,
    tools/thread_safety.sh): one case each; none at all is a failure."""
    results = [l for l in lines if l.startswith(f"{kind}-result ")]
    print(f"[{kind}]")
    if not results:
        results = [f"{kind}-result {kind} failed (no result)"]
    passed = failed = 0
    for line in results:
        parts = line.split(" ", 2)
        ok = len(parts) > 2 and parts[2] == "passed"
        passed += 1 if ok else 0
        failed += 0 if ok else 1
        print(f"  {parts[1]}: {1 if ok else 0} passed, "
              f"{0 if ok else 1} failed"
              + ("" if ok else f"  [{parts[2] if len(parts) > 2 else ''}]"))
    return passed, failed


def main_phases(argv):
    total_passed = total_failed = 0
    figure_logs = None
    fuzz_lines = []
    i = 0
    while i < len(argv):
        if argv[i] == "--phase" and i + 3 < len(argv) + 1:
            passed, failed, logs = count_phase(argv[i + 1], argv[i + 2],
                                               argv[i + 3])
            if figure_logs is None:
                figure_logs = logs
            total_passed += passed
            total_failed += failed
            i += 4
        elif argv[i] in ("--fuzz", "--check") and i + 1 < len(argv):
            kind = argv[i][2:]
            try:
                with open(argv[i + 1], encoding="utf-8") as results_file:
                    lines = [line.rstrip() for line in results_file]
            except OSError:
                lines = []
            if kind == "fuzz":
                fuzz_lines = lines
            passed, failed = count_result_lines(kind, lines)
            total_passed += passed
            total_failed += failed
            i += 2
        else:
            print(f"count_results: unexpected argument {argv[i]!r}",
                  file=sys.stderr)
            return 2
    shown = figures(figure_logs or []) + [
        l for l in fuzz_lines if l.startswith("figure:")]
    if shown:
        print("Figures:")
        for line in shown:
            print("  " + line)
    print(f"{total_passed} passed, {total_failed} failed")
    return 0 if total_failed == 0 and total_passed > 0 else 1


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--xml":
        return main_xml(sys.argv[2:])
    if len(sys.argv) > 1 and sys.argv[1] in ("--phase", "--fuzz", "--check"):
        return main_phases(sys.argv[1:])
    passed, failed, _ = count_phase("", sys.argv[1], sys.argv[2])
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
