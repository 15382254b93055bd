"""The arena planner: golden cases and a property test that live buffers never overlap."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tinyprop.compile.budget import parse_budget
from tinyprop.compile.planner import Buffer, check_plan, plan_memory
from tinyprop.compile.report import breakdown, report_rows
from tinyprop.compile.scheme import LayerUpdate, bias_only, last_k
from tinyprop.compile.train_plan import build_program
from tinyprop.errors import TinypropError
from tinyprop.frontend.tflite_reader import read_tflite


def test_tflm_greedy_golden_case():
    # TFLite Micro's greedy_memory_planner_test "TestGreedyBasics": two buffers of 10 and 20
    # bytes live at disjoint times share offset 0
    bufs = [Buffer("a", 10, 0, 1), Buffer("b", 20, 2, 3)]
    offsets, total = plan_memory(bufs)
    assert offsets == [0, 0] and total == 24  # 8-byte alignment of 20


def test_overlapping_lifetimes_stack():
    bufs = [Buffer("a", 100, 0, 2), Buffer("b", 50, 1, 3), Buffer("c", 30, 3, 4)]
    offsets, total = plan_memory(bufs)
    check_plan(bufs, offsets, total)
    # a and b overlap in time: 104 + 56; c can reuse a's bytes after step 2
    assert total == 104 + 56


def test_pinned_buffer_stays_put():
    bufs = [Buffer("in", 64, 0, 1, pinned=0), Buffer("x", 256, 1, 2), Buffer("y", 16, 2, 3)]
    offsets, total = plan_memory(bufs)
    assert offsets[0] == 0
    check_plan(bufs, offsets, total)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4000), st.integers(0, 30), st.integers(0, 10)),
                min_size=1, max_size=40))
def test_random_lifetimes_never_overlap(spec):
    bufs = [Buffer(f"b{i}", size, first, first + span) for i, (size, first, span) in
            enumerate(spec)]
    offsets, total = plan_memory(bufs)
    check_plan(bufs, offsets, total)
    peak_live = max(sum(b.size for b in bufs if b.first <= t <= b.last) for t in range(41))
    assert total >= peak_live


# ---- the training program's plan, the budget and the report on the real VWW model ----

TINYPROP = Path(sys.executable).parent / "tinyprop"


@pytest.fixture(scope="module")
def vww_graph(vww_model_path):
    return read_tflite(vww_model_path)


def _convert(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(TINYPROP), "convert", *args], capture_output=True, text=True,
                          timeout=300, check=False)


def test_report_rows_account_for_every_buffer_and_parameter(vww_graph):
    sch = bias_only(vww_graph, 2)
    sch.layers[25] = LayerUpdate(25, True, list(range(0, 256, 8)))  # depthwise, 32 channels
    prog = build_program(vww_graph, sch)
    check_plan(prog.buffers, prog.buffer_offsets, prog.arena_bytes)
    rows = {r["op"]: r for r in report_rows(prog)}
    assert rows[25]["channels"] == 32 and rows[25]["out_channels"] == 256
    assert rows[25]["trainable_bytes"] == 4 * 256 + 32 * 9  # bias + held taps, not the tensor
    assert rows[29]["trainable_bytes"] == 4 * 2 + 2 * 256
    assert sum(r["trainable_bytes"] for r in rows.values()) == prog.params_bytes
    listed = [b for r in rows.values() for b in r["buffers"]]
    assert sorted(b["name"] for b in listed) == sorted(str(b.name) for b in prog.buffers)
    for b in listed:
        assert b["offset"] + b["bytes"] <= prog.arena_bytes and b["first"] <= b["last"]
    # op 25's input is saved for its weight gradient: it lives into the backward steps
    saved = [b for b in listed if b["kind"] == "saved"]
    assert saved and all(b["last"] > prog.logits + 1 for b in saved)
    parts = breakdown(prog)
    assert 0 < sum(parts.values()) <= prog.arena_bytes and parts["gradients"] >= 0


def test_row_only_storage_holds_a_fraction_of_the_tensor(vww_graph):
    full = build_program(vww_graph, last_k(vww_graph, 2))
    sch = last_k(vww_graph, 2)
    sch.layers[26].channels = list(range(0, 256, 4))  # a quarter of op 26's rows
    quarter = build_program(vww_graph, sch)
    assert full.params_bytes - quarter.params_bytes == 192 * 256


@pytest.mark.slow
def test_64kb_budget_refusal_names_the_parts_and_reserve_makes_it_fit(vww_model_path, tmp_path):
    """Whole tensors (--patch none): the classifier alone does not fit 64 KB with the default
    reserve, and the error says by how much and what to change; a smaller reserve fits."""
    out = tmp_path / "v.tpb"
    r = _convert(str(vww_model_path), "-o", str(out), "--scheme", "auto", "--budget", "64KB",
                 "--patch", "none")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    for words in ("classifier alone", "activations 55,296 B", "trainable 520 B",
                  "reserve 24,576 B", "14,856 B over", "--reserve"):
        assert words in r.stderr, (words, r.stderr)
    js = tmp_path / "v.json"
    r = _convert(str(vww_model_path), "-o", str(out), "--scheme", "auto", "--budget", "64KB",
                 "--reserve", "8KB", "--report", "--report-json", str(js), "--patch", "none")
    assert r.returncode == 0, r.stderr
    fig = json.loads(js.read_text())
    assert fig["arena_peak"] + fig["trainable_bytes"] <= 64 * 1024 - 8 * 1024
    assert fig["inference_arena"] == 55_296 and fig["flash_bytes"] == out.stat().st_size
    assert fig["scheme"].startswith("auto@64KB") and fig["trainable_bytes"] > 520
    assert {"op", "bias", "channels", "trainable_bytes", "buffers"} <= set(fig["layers"][0])
    assert "saved" in r.stdout and "totals: arena_peak" in r.stdout


@pytest.mark.slow
def test_64kb_budget_fits_with_the_first_ops_tiled(vww_model_path, tmp_path):
    """By default (--patch auto) the 64 KB budget that whole tensors miss is met by running the
    first ops tile by tile: the inference arena falls below the whole-tensor 55,296 B."""
    out, js = tmp_path / "v.tpb", tmp_path / "v.json"
    r = _convert(str(vww_model_path), "-o", str(out), "--scheme", "auto", "--budget", "64KB",
                 "--report", "--report-json", str(js))
    assert r.returncode == 0, r.stderr
    fig = json.loads(js.read_text())
    assert fig["total"] <= 64 * 1024 - 24 * 1024 and fig["inference_arena"] < 55_296
    stage = fig["layout"]["stage"]
    assert stage and stage["extra_macs"] > 0 and "tiled stage: ops 0.." in r.stdout


def test_a_fixed_scheme_over_the_budget_is_refused(vww_model_path, tmp_path):
    r = _convert(str(vww_model_path), "-o", str(tmp_path / "v.tpb"), "--scheme", "bias-only",
                 "--grad", "float32", "--budget", "128KB")
    assert r.returncode == 2 and "scheme bias-only" in r.stderr
    # bias-only saves no activations, but float gradients down to op 0 fill its arena
    assert "masks 9,216 B, gradients 221,184 B" in r.stderr and "135,368 B over" in r.stderr


def test_budget_and_reserve_parse():
    assert parse_budget("64KB") == 65536 and parse_budget("1000") == 1000
    with pytest.raises(TinypropError, match="--reserve 8 parsecs"):
        parse_budget("8 parsecs", "--reserve")


@pytest.mark.slow  # calibration and a greedy search on VWW
def test_auto_calibrated_on_a_new_camera_reaches_early_biases(vww_graph, vww_data_dir):
    """With gradient norms from shifted samples, auto spends the 256 KB on biases deep in the
    network (any layer is a candidate) and weights only of the last 12 weighted layers."""
    from tinyprop.compile.auto import auto_scheme
    from tinyprop.compile.budget import DEFAULT_RESERVE
    from tinyprop.data.datasets import load_split

    t_in = vww_graph.input
    xs, ys, _ = load_split(vww_data_dir, "train", t_in.s, t_in.zp, shift="haze")
    samples = [(xs[i], int(ys[i])) for i in (0, 70, 140, 210)]
    sch, prog = auto_scheme(vww_graph, 256 * 1024, samples)
    assert prog.arena_bytes + prog.params_bytes <= 256 * 1024 - DEFAULT_RESERVE
    weighted = [op.index for op in vww_graph.weighted_ops()]
    last12 = set(weighted[-13:])  # the classifier and the 12 layers before it
    assert any(lu.bias and i not in last12 for i, lu in sch.layers.items())
    assert all(i in last12 for i, lu in sch.layers.items() if lu.weights)
