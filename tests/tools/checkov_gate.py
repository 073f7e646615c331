#!/usr/bin/env python3
"""Pass/fail gate over checkov's JSON report.

    checkov -d DIR --framework cloudformation --skip-download -o json | checkov_gate.py
    checkov_gate.py report.json

checkov's `-o json` output is one object, or a list with one object per framework.
This script runs nothing itself. It exits 1 when, in any framework:

* summary.failed > 0 (a check failed);
* summary.parsing_errors > 0 (checkov exits 0 on a file it cannot parse, e.g. a
  broken *.tf.json, so its exit code alone is not enough);
* passed + failed + skipped == 0 (nothing was scanned: wrong framework or empty input);

and also when the input is empty or not checkov JSON. Failed checks are printed as
`CHECK_ID resource file`, and skipped checks with their suppression comments, so the
CI log shows what is suppressed and why. Exit 0 otherwise.
"""

import argparse
import json
import sys

SUMMARY_KEYS = ("passed", "failed", "skipped", "parsing_errors")


def reports_from(data):
    """Normalise checkov output to a list of (framework, summary, results) triples."""
    items = data if isinstance(data, list) else [data]
    reports = []
    for item in items:
        if not isinstance(item, dict):
            raise ValueError(f"unexpected element in checkov output: {item!r:.200}")
        if "summary" in item:
            summary, results = item["summary"], item.get("results") or {}
        elif all(k in item for k in ("passed", "failed")):
            # When no file matches the framework checkov prints a bare summary object
            # without check_type or results.
            summary, results = item, {}
        else:
            raise ValueError(f"not a checkov report (no summary): {json.dumps(item)[:200]}")
        reports.append((item.get("check_type", "(no framework)"), summary, results))
    return reports


def describe(check):
    resource = check.get("resource") or "?"
    path = check.get("file_path") or check.get("repo_file_path") or "?"
    return f"{check.get('check_id', '?')} {resource} {path}"


def gate(data, out=sys.stdout):
    """Print the report and return the exit status (0 pass, 1 fail)."""
    try:
        reports = reports_from(data)
    except ValueError as exc:
        print(f"checkov gate: error: {exc}", file=out)
        return 1
    if not reports:
        print("checkov gate: error: empty report list: nothing was scanned", file=out)
        return 1

    failing = []
    for framework, summary, results in reports:
        counts = {k: int(summary.get(k) or 0) for k in SUMMARY_KEYS}
        print(
            f"{framework}: passed {counts['passed']}, failed {counts['failed']}, "
            f"skipped {counts['skipped']}, parsing errors {counts['parsing_errors']}, "
            f"resources {summary.get('resource_count', '?')}",
            file=out,
        )
        for check in results.get("failed_checks") or []:
            print(f"  FAILED  {describe(check)}  ({check.get('check_name', '')})", file=out)
        for check in results.get("skipped_checks") or []:
            comment = (check.get("check_result") or {}).get("suppress_comment") or "no comment given"
            print(f"  SKIPPED {describe(check)}  suppressed: {comment}", file=out)
        for path in results.get("parsing_errors") or []:
            print(f"  PARSE ERROR {path}", file=out)

        reasons = []
        if counts["failed"]:
            reasons.append(f"{counts['failed']} failed check(s)")
        if counts["parsing_errors"]:
            reasons.append(f"{counts['parsing_errors']} file(s) checkov could not parse")
        if counts["passed"] + counts["failed"] + counts["skipped"] == 0:
            reasons.append("no checks were evaluated (nothing was scanned)")
        if reasons:
            failing.append(f"{framework}: {', '.join(reasons)}")

    if failing:
        for line in failing:
            print(f"checkov gate: FAIL {line}", file=out)
        return 1
    print(f"checkov gate: ok ({len(reports)} framework report(s))", file=out)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", nargs="?", default="-", help="checkov JSON file (default: stdin)")
    args = parser.parse_args(argv)
    if args.report == "-":
        text = sys.stdin.read()
    else:
        with open(args.report, encoding="utf-8") as fh:
            text = fh.read()
    if not text.strip():
        print("checkov gate: error: empty input (did checkov crash? run it without -o json to see)")
        return 1
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        print(f"checkov gate: error: input is not JSON ({exc}); it starts with: {text[:300]!r}")
        return 1
    return gate(data)


if __name__ == "__main__":
    sys.exit(main())
