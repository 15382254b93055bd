"""A short libFuzzer run of every harness in tests/fuzz (proto: the protocol decoder and codecs;
blob: the blob loader, inference and a training step; image: the camera frame input; label: the
learn app's host bytes, frames and labels; record: the params record), each replaying first the
inputs that once crashed it (regressions_TARGET) and its committed corpus; the long run is
tests/fuzz/run.sh all (docs/fuzzing.md)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # libFuzzer runs

FUZZ_DIR = Path(__file__).resolve().parent
TARGETS = sorted(p.stem.removeprefix("fuzz_") for p in FUZZ_DIR.glob("fuzz_*.c"))
RUNS = 10000  # after the committed corpus and the regressions, which run first


@pytest.mark.skipif(shutil.which("clang") is None, reason="clang with libFuzzer is not installed")
@pytest.mark.parametrize("target", TARGETS)
def test_short_fuzz_run(target: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        ["bash", str(FUZZ_DIR / "run.sh"), target, str(RUNS)],
        env={**os.environ, "FUZZ_BUILD": str(tmp_path)},
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert re.search(rf"^Done {RUNS} runs", proc.stderr, re.MULTILINE), proc.stderr[-2000:]
    regressions = FUZZ_DIR / f"regressions_{target}"
    if regressions.is_dir():  # every input that once crashed it ran, and passes now
        count = len(list(regressions.iterdir()))
        assert f"{count} files found in {regressions}" in proc.stderr, proc.stderr[-2000:]
    if (FUZZ_DIR / f"seed_{target}.py").exists():  # started from real inputs, not from nothing
        assert re.search(rf"^seed_{target}.py: [1-9]\d* ", proc.stderr, re.MULTILINE)


@pytest.mark.skipif(shutil.which("clang") is None, reason="clang with libFuzzer is not installed")
def test_jobs_fuzz_in_processes_and_the_figures_count_them_all(tmp_path: Path) -> None:
    """FUZZ_JOBS=2: two libFuzzer processes, seeds 1 and 2, half the runs each, one corpus
    folder; the figures count both."""
    proc = subprocess.run(
        ["bash", str(FUZZ_DIR / "run.sh"), "proto", str(RUNS)],
        env={**os.environ, "FUZZ_BUILD": str(tmp_path), "FUZZ_JOBS": "2"},
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert re.findall(r"^INFO: Seed: (\d+)", proc.stderr, re.MULTILINE) == ["1", "2"]
    assert re.findall(r"^Done (\d+) runs", proc.stderr, re.MULTILINE) == [str(RUNS // 2)] * 2
    runs = re.findall(r"^stat::number_of_executed_units:\s+(\d+)", proc.stderr, re.MULTILINE)
    assert [int(n) for n in runs] == [RUNS // 2] * 2
    # the figures from the run's log (with $FUZZ_FIGURES, run.sh would also rewrite the
    # committed corpus)
    figures = tmp_path / "figures.json"
    subprocess.run([sys.executable, str(FUZZ_DIR / "figures.py"), str(figures), "proto",
                    str(tmp_path / "proto.log"), "7", "0", "abc1234"], check=True)
    assert json.loads(figures.read_text())["proto"]["executions"] == RUNS


def test_run_sh_lists_targets_for_an_unknown_one(tmp_path: Path) -> None:
    proc = subprocess.run(
        ["bash", str(FUZZ_DIR / "run.sh"), "no_such_target", "1"],
        env={**os.environ, "FUZZ_BUILD": str(tmp_path)},
        capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 2
    assert "targets: " in proc.stderr and "proto" in proc.stderr
