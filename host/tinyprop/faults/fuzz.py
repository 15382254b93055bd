"""The fuzzing figures: what the last long run of every libFuzzer target made,
as `tests/fuzz/run.sh all 10000000` records them in tests/fuzz/figures.json (docs/fuzzing.md).
The file is committed with the repository; an installed package without the tests has none."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import TinypropError

FIGURES = Path(__file__).resolve().parents[3] / "tests" / "fuzz" / "figures.json"


def figures(path: Path = FIGURES) -> dict:
    """{"fuzz_execs": {target: executions}, "fuzz_crashes": {target: crashes},
    "fuzz_runs": {target: the whole record (seconds, exec/s, date, commit)}} of the last long
    run."""
    if not path.is_file():
        raise TinypropError(f"{path}: no fuzzing figures; run tests/fuzz/run.sh all 10000000 "
                            "from a clone of the repository to make them")
    table = json.loads(path.read_text())
    return {"fuzz_execs": {t: r["executions"] for t, r in table.items()},
            "fuzz_crashes": {t: r["crashes"] for t, r in table.items()},
            "fuzz_runs": table}
