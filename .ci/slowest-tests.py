#!/usr/bin/env python3
"""Prints the ten slowest test classes of the last build (unit and integration), with the share of
the total each takes: where to look first when the test command gets slow (issue 26, point 3).
Reads the JUnit XML reports Surefire and Failsafe write under target/."""
import glob
import sys
import xml.etree.ElementTree as ET

def classes(pattern):
    for path in glob.glob(pattern):
        try:
            suite = ET.parse(path).getroot()
        except ET.ParseError:
            continue
        yield suite.get("name", path), float(suite.get("time") or 0), int(suite.get("tests") or 0)

def main(root="target", count=10):
    for kind, folder in (("unit", "surefire-reports"), ("integration", "failsafe-reports")):
        rows = sorted(classes(f"{root}/{folder}/TEST-*.xml"), key=lambda r: -r[1])
        total = sum(r[1] for r in rows)
        if not rows:
            print(f"{kind} tests: no reports under {root}/{folder}")
            continue
        print(f"{kind} tests: {len(rows)} classes, {total:.0f} s in all; the {min(count, len(rows))} slowest:")
        for name, secs, tests in rows[:count]:
            print(f"  {secs:7.1f} s  {100 * secs / total:4.1f} %  {tests:3d} tests  {name.rsplit('.', 1)[-1]}")

if __name__ == "__main__":
    main(*(sys.argv[1:2] or ["target"]))
