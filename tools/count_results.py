#!/usr/bin/env python3
"""Counts test cases from a Bazel run and prints `N passed, N failed` last.

Reads the build event protocol file of the run (--build_event_json_file) for
each test target's result and its test.xml, so every count comes from this
run's real results. A test target with no result (it failed to build, or the
run was cut short) counts as one failure; so does a target that failed
without a failing test case in its XML (a crash or a timeout).

usage: count_results.py BEP_JSON TEST_TARGETS_FILE
       count_results.py --xml NAME=XML_PATH...   (runs outside Bazel, such as
           tools/gpu_run.sh's: a missing or unreadable XML counts as one
           failure)
"""
import json
import sys
import urllib.parse
import xml.etree.ElementTree as ElementTree


def read_results(bep_path):
    results = {}
    with open(bep_path, encoding="utf-8") as bep:
        for line in bep:
            event = json.loads(line)
            test_result = event.get("testResult")
            if test_result is None:
                continue
            label = event["id"]["testResult"]["label"]
            xml_path = None
            for output in test_result.get("testActionOutput", []):
                if output.get("name") == "test.xml":
                    uri = output.get("uri", "")
                    if uri.startswith("file://"):
                        xml_path = urllib.parse.unquote(uri[len("file://"):])
            results[label] = (test_result.get("status", "NO_STATUS"), xml_path)
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


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--xml":
        return main_xml(sys.argv[2:])
    bep_path, targets_path = sys.argv[1], sys.argv[2]
    with open(targets_path, encoding="utf-8") as targets_file:
        targets = [t.strip() for t in targets_file if t.strip()]
    try:
        results = read_results(bep_path)
    except OSError:
        results = {}
    total_passed = total_failed = 0
    for target in targets:
        status, xml_path = results.get(target, ("NOT_RUN", None))
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
        total_passed += passed
        total_failed += failed
        print(f"  {target}: {passed} passed, {failed} failed"
              + (f"  [{'; '.join(failures)}]" if failures else ""))
    print(f"{total_passed} passed, {total_failed} failed")
    return 0 if total_failed == 0 and total_passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
