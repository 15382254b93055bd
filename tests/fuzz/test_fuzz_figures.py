"""The committed figures of the long fuzz run (tests/fuzz/figures.json, written by run.sh all):
one entry per harness, read by tinyprop.faults.fuzz for `tinyprop bench --only faults`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tinyprop.errors import TinypropError
from tinyprop.faults import fuzz

FUZZ_DIR = Path(__file__).resolve().parent
TARGETS = sorted(p.stem.removeprefix("fuzz_") for p in FUZZ_DIR.glob("fuzz_*.c"))


def test_every_target_has_figures_of_a_run() -> None:
    table = json.loads((FUZZ_DIR / "figures.json").read_text())
    assert sorted(table) == TARGETS, "run tests/fuzz/run.sh for the targets missing"
    for target, run in table.items():
        assert run["executions"] > 0 and run["seconds"] > 0, target
        assert set(run) == {"executions", "crashes", "seconds", "exec_per_s", "date", "commit"}


def test_figures_for_the_bench() -> None:
    got = fuzz.figures()
    table = json.loads(fuzz.FIGURES.read_text())
    assert got["fuzz_execs"] == {t: r["executions"] for t, r in table.items()}
    assert got["fuzz_crashes"] == {t: r["crashes"] for t, r in table.items()}


def test_no_figures_file_says_how_to_make_it(tmp_path: Path) -> None:
    with pytest.raises(TinypropError, match=r"no fuzzing figures; run tests/fuzz/run.sh all"):
        fuzz.figures(tmp_path / "figures.json")


def test_every_regression_folder_belongs_to_a_target() -> None:
    folders = sorted(p.name.removeprefix("regressions_") for p in FUZZ_DIR.glob("regressions_*"))
    assert set(folders) <= set(TARGETS)
