"""The bench's TFLite Micro measurement: the smallest arena its interpreter runs VWW in, found by
bisection, is the README's baseline, and tinyprop's planned inference arena is well under it."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tinyprop.bench.figures import tflm_arena
from tinyprop.compile.memory import plan_inference
from tinyprop.frontend.tflite_reader import read_tflite


@pytest.mark.slow  # a bisection of TFLite Micro interpreters
def test_tflm_smallest_arena_for_vww(vww_model_path, capfd):
    tflm = tflm_arena(vww_model_path)
    assert 100_000 < tflm < 110_000  # 103,672 B with tflite-micro's x86-64 Python interpreter
    # the arenas tried too small make TFLite Micro's C++ print to fd 2: not to the user
    assert "Failed to" not in capfd.readouterr().err
    ours = plan_inference(read_tflite(vww_model_path), "none").arena
    assert ours == 55_296 and ours < 0.55 * tflm


def test_frontier_png_and_the_bench_sections(tmp_path):
    """bench --only frontier draws its table as a PNG; step, grads and frontier are sections of
    the CLI."""
    from tinyprop.bench.figures import SECTIONS, draw_frontier

    fig = {"shift": "haze", "grad": "int8", "tflm_inference_arena": 103_672,
           "rows": [{"budget_kb": 48, "planned_bytes": 47_000, "accuracy_after": 0.70},
                    {"budget_kb": 96, "planned_bytes": 95_000, "accuracy_after": 0.78},
                    # three seeds alike: their mean a hair below them (no negative error bar)
                    {"budget_kb": 64, "planned_bytes": 65_000,
                     "accuracy_after": float(np.mean([60 / 121] * 3)),
                     "accuracy_range": [60 / 121, 60 / 121]}]}
    png = draw_frontier(fig, tmp_path / "f.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert {"step", "grads", "frontier"} <= set(SECTIONS)


def test_the_fleet_section_measures_what_travels_and_the_board_cost(tmp_path):
    """bench --only fleet on the host board: the bytes a board sends a round are the blob's
    trainable parameters (what a fleet round pulls from the board), a fraction of the model's;
    a fleet round's steps take the memory tinyprop train's take. (On qemu-m4 the
    instructions a step are compared too: docs/fleet.md.)"""
    from tinyprop.cli import main

    assert main(["bench", "--only", "fleet", "--board", "host", "--out", str(tmp_path)]) == 0
    fig = json.loads((tmp_path / "bench.json").read_text())["fleet"]
    assert fig["trainable_bytes"] == fig["fleet_round"]["pulled_bytes"] == 67_080
    assert fig["model_parameter_bytes"] == 219_064
    assert fig["compared"] == ["memory"] and fig["board_cost_unchanged"] is True
    assert fig["train"]["memory"]["arena_peak"] == fig["fleet_round"]["memory"]["arena_peak"] > 0
