"""Record each test file's run time from a JUnit XML report into tests/durations.json, which
conftest.py reads to hand the slowest files to the xdist workers first:

    .venv/bin/python -m pytest -q -n 2 --dist loadfile tests --junitxml=suite.xml
    .venv/bin/python tests/durations.py suite.xml

The figures only order the files; a stale or missing one costs time, never a result."""

from __future__ import annotations

import collections
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

DURATIONS = Path(__file__).resolve().parent / "durations.json"


def file_seconds(report: Path) -> dict[str, int]:
    """Seconds per test file (its path under tests/), summed over its test cases."""
    seconds: collections.Counter = collections.Counter()
    for case in ET.parse(report).iter("testcase"):
        module = case.get("classname", "").split(".")[1:]  # tests.fuzz.test_x[.Class]
        while module and not module[-1].startswith("test_"):
            module.pop()
        if module:
            seconds["/".join(module) + ".py"] += float(case.get("time", 0))
    return {name: round(s) for name, s in sorted(seconds.items())}


if __name__ == "__main__":
    DURATIONS.write_text(json.dumps(file_seconds(Path(sys.argv[1])), indent=1) + "\n")
    print(f"durations.py: {DURATIONS}")
