"""The kernels' scratch plan (tinyprop.compile.kernels, the blob's SCRA section): what the loader
accepts, what `convert --target ... --report` says and writes, and what a tight budget does
(an op left without its scratch runs the reference kernel, and the report says so)."""

from __future__ import annotations

import json
import struct
import zlib

import pytest
from tinyprop.cli import main
from tinyprop.compile.blob import HEADER, SECTION, pack_blob, read_blob
from tinyprop.compile.blobfile import load_blob
from tinyprop.compile.kernels import (
    NONE32,
    SCRA_HEADER,
    SCRA_OP,
    plan_scratch,
    read_scratch_plan,
)
from tinyprop.compile.memory import plan_inference
from tinyprop.compile.scheme import parse_scheme
from tinyprop.compile.train_plan import build_program
from tinyprop.engines.native import blob_status
from tinyprop.frontend.tflite_reader import read_tflite


@pytest.fixture(scope="module")
def vww_graph(vww_model_path):
    return read_tflite(vww_model_path)


def _section(raw: bytes, sid: bytes) -> int:
    n = HEADER.unpack_from(raw)[5]
    for i in range(n):
        s, off, _ = SECTION.unpack_from(raw, HEADER.size + i * SECTION.size)
        if s == sid:
            return off
    raise KeyError(sid)


def _patched(raw: bytes, op: int, field: int, value: int) -> bytes:
    """The blob with field `field` (0 infer offset, 1 size, 2 train offset, 3 size) of op `op`'s
    SCRA record set, CRC fixed."""
    b = bytearray(raw)
    at = _section(raw, b"SCRA") + SCRA_HEADER.size + op * SCRA_OP.size + 4 * field
    struct.pack_into("<I", b, at, value)
    struct.pack_into("<I", b, len(b) - 4, zlib.crc32(bytes(b[:-4])))
    return bytes(b)


def test_the_loader_checks_the_scratch_plan(vww_graph):
    prog = build_program(vww_graph, parse_scheme(vww_graph, "last:2"))
    plan = plan_scratch(vww_graph, "cortex-m4", prog, prog.region_bytes)
    raw = pack_blob(vww_graph, 1, train=prog, scratch=plan)
    info = read_blob(raw)
    assert blob_status(raw) == "TP_OK"
    recs = read_scratch_plan(info.sections["SCRA"])
    assert len(recs) == len(vww_graph.ops)
    (off, size), (toff, tsize) = recs[1]  # the first depthwise: scratch in both plans
    assert size and tsize and off % 8 == 0 and off + size <= info.arena_bytes
    bad = {
        "misaligned": _patched(raw, 1, 0, off + 4),
        "past the inference arena": _patched(raw, 1, 0, info.arena_bytes - size + 8),
        "past the training arena": _patched(raw, 1, 2, info.train_arena_bytes),
        "size without an offset": _patched(raw, 1, 0, NONE32),
        "an offset without a size": _patched(_patched(raw, 1, 1, 0), 1, 0, 0),
    }
    got = {k: blob_status(v) for k, v in bad.items()}
    assert got == {"misaligned": "TP_ERR_BLOB_INVALID",
                   "past the inference arena": "TP_ERR_BLOB_BOUNDS",
                   "past the training arena": "TP_ERR_BLOB_BOUNDS",
                   "size without an offset": "TP_ERR_BLOB_BOUNDS",
                   "an offset without a size": "TP_ERR_BLOB_INVALID"}
    # training scratch in a blob that does not train
    infer_only = pack_blob(vww_graph, 1, scratch=plan_scratch(vww_graph, "cortex-m4"))
    assert blob_status(infer_only) == "TP_OK"
    assert blob_status(_patched(_patched(infer_only, 1, 3, 8), 1, 2, 0)) == "TP_ERR_BLOB_BOUNDS"


def test_reference_target_blob_is_the_plain_blob(vww_graph):
    """`--target ref` plans nothing: the blob is byte for byte the one without a plan."""
    plain = pack_blob(vww_graph, 7)
    assert pack_blob(vww_graph, 7, scratch=plan_scratch(vww_graph, "ref")) == plain
    assert "SCRA" not in read_blob(plain).sections


def test_convert_reports_each_ops_kernel_and_the_arena_growth(vww_model_path, tmp_path, capsys):
    out = tmp_path / "vww.tpb"
    fig_path = tmp_path / "fig.json"
    assert main(["convert", str(vww_model_path), "-o", str(out), "--report",
                 "--report-json", str(fig_path)]) == 0
    text = capsys.readouterr().out
    assert "kernels for cortex-m4 (Cortex-M DSP)" in text
    assert " 0 CONV_2D           dsp 3x3 rgb" in text
    assert " 1 DEPTHWISE_CONV_2D dsp depthwise 3x3" in text
    assert "29 FULLY_CONNECTED   reference" in text
    fig = json.loads(fig_path.read_text())
    sc = fig["scratch"]
    base = plan_inference(read_tflite(vww_model_path), "none").arena
    assert sc["inference_arena_without"] == base == 55_296
    # the inference arena grows by the scratch that does not fit beside the activations: at
    # the peak (the first pointwise op) only that op's own
    grown = fig["inference_arena"] - base
    assert 0 < grown <= next(r["scratch_infer"] for r in sc["ops"] if r["op"] == 2)
    assert f"inference arena 55,296 -> {fig['inference_arena']:,} B (+{grown:,})" in text
    info = read_blob(out.read_bytes())
    assert info.arena_bytes == fig["inference_arena"]
    # the blob names its target, so `train` rebuilds it byte for byte
    assert load_blob(out, vww_model_path).blob == out.read_bytes()
    assert main(["convert", str(vww_model_path), "-o", str(tmp_path / "ref.tpb"),
                 "--target", "ref"]) == 0
    assert "SCRA" not in read_blob((tmp_path / "ref.tpb").read_bytes()).sections


def test_a_tight_budget_leaves_ops_to_the_reference_kernel(vww_model_path, tmp_path, capsys):
    """auto at 64 KB with an 8 KB reserve, whole tensors, plans 57,272 of the 57,344 B it may:
    no room for the first pointwise op's scratch at the inference peak, so that op runs the
    reference kernel (the report says why), and the device's memory stays within the budget."""
    out = tmp_path / "tight.tpb"
    fig_path = tmp_path / "fig.json"
    assert main(["convert", str(vww_model_path), "-o", str(out), "--scheme", "auto",
                 "--budget", "64KB", "--reserve", "8KB", "--report",
                 "--report-json", str(fig_path), "--patch", "none"]) == 0
    text = capsys.readouterr().out
    fig = json.loads(fig_path.read_text())
    op2 = next(r for r in fig["scratch"]["ops"] if r["op"] == 2)
    assert op2["kernel_infer"] == "reference" and "no room" in op2["note"]
    assert "no room for its scratch under the budget" in text
    info = read_blob(out.read_bytes())
    limit = 64 * 1024 - 8 * 1024
    assert max(info.arena_bytes, info.train_arena_bytes) + info.params_bytes <= limit
    assert fig["scratch"]["limit"] == limit
    assert sum(r["kernel_infer"] != "reference" for r in fig["scratch"]["ops"]) >= 20
    assert load_blob(out, vww_model_path).blob == out.read_bytes()
