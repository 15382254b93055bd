"""Patch-based execution of the first ops and in-place depthwise convolutions
(compile/patch.py, compile/memory.py, firmware/core/tp_patch.c and tp_exec.c): the C core run
tile by tile, or in place, gives the bits the NumPy reference gives on whole tensors.

The graphs are opgen.stage_case's random chains (CONV_2D from 1x1 to 7x7, DEPTHWISE_CONV_2D
with multipliers 1 and 2, PAD, AVERAGE_POOL_2D, MobileNetV2 residual blocks with ADD; strides 1
and 2, SAME and VALID) over every split the planner allows and several grids.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from opgen import random_input, stage_case
from tinyprop.compile.blob import HEADER, SECTION, pack_blob
from tinyprop.compile.blobfile import TrainingBlob
from tinyprop.compile.memory import (
    inference_layout,
    inplace_ok,
    plan_inference,
    stage_inplace_ok,
)
from tinyprop.compile.patch import plan_stage, run_stage, stage_splits
from tinyprop.compile.planner import check_plan
from tinyprop.compile.scheme import LayerUpdate, SparseScheme
from tinyprop.compile.train_plan import build_program
from tinyprop.device.firmware import build_program as build_c_program
from tinyprop.engines import BlobModel, HParams
from tinyprop.engines.native import NativeEngine, blob_status
from tinyprop.reference.backward import ReferenceTrainer
from tinyprop.reference.forward import Forward
from tinyprop.status import status_code

SEEDS = 30
GRIDS = ((2, 2), (3, 2), (1, 3), (4, 4))


def stages(g, inplace: bool = True, input_rows: bool = False):
    """Every (split, grid) of GRIDS the planner can tile, with the stage's in-place ops."""
    for n in stage_splits(g):
        for grid in GRIDS:
            st = plan_stage(g, n, grid, input_rows)
            if st is None:
                continue
            if inplace:
                st.inplace = {k for k in range(n) if stage_inplace_ok(st, k)}
            yield st


@pytest.mark.slow  # (5 s) the C tiles below are checked against whole tensors in the fast lane
def test_numpy_tiles_equal_whole_tensors():
    """The tile geometry: each op of each tile on its windows with the tile's padding (the
    reference kernels) assembles exactly the whole-tensor stage output."""
    checked = 0
    for seed in range(SEEDS):
        case = stage_case(seed)
        x = random_input(case.graph, np.random.default_rng(seed))
        whole = Forward(case.graph).run(x, keep=True)
        for st in stages(case.graph, inplace=False):
            assert np.array_equal(run_stage(st, x), whole[st.output]), (case.name, st.describe())
            checked += 1
    assert checked > 200


def _whole_inplace(g, st):
    """Every op outside the stage that may run in place under the plan with `st`."""
    base = inference_layout(g, st)
    return frozenset(k for k in range(len(g.ops)) if inplace_ok(g, base, k))


def test_c_tiles_equal_numpy_whole_tensors():
    """The C core runs the stage tile by tile (in place where the stage allows it, and the
    depthwise ops after it in place where they may): the model's output equals the NumPy
    reference's whole-tensor run, the loader accepts every plan, and the arena's high-water
    mark is the plan's."""
    checked = inplace = 0
    for seed in range(SEEDS):
        case = stage_case(seed)
        g = case.graph
        f = Forward(g)
        rng = np.random.default_rng(seed)
        xs = [random_input(g, rng) for _ in range(2)]
        want = [f.run(x) for x in xs]
        for st in stages(g):
            lay = inference_layout(g, st, _whole_inplace(g, st))
            check_plan(lay.buffers, lay.offsets, lay.arena)
            blob = pack_blob(g, seed, infer=lay)
            assert blob_status(blob) == "TP_OK", (case.name, st.describe())
            eng = NativeEngine(BlobModel(case.name, blob, g))
            for x, y in zip(xs, want, strict=True):
                got = eng.infer(x)
                assert np.array_equal(got, y), (case.name, st.describe(), sorted(lay.inplace))
                assert lay.arena - 8 < eng.last_result.arena_peak <= lay.arena
            checked += 1
            inplace += len(st.inplace) + len(lay.inplace)
    assert checked > 200 and inplace > 50


def test_inplace_depthwise_on_whole_tensors():
    """A depthwise convolution (multiplier 1, any kernel, stride, padding) whose output
    overwrites its input channel by channel equals the reference."""
    checked = 0
    for seed in range(40):
        case = stage_case(seed)
        g = case.graph
        base = inference_layout(g)
        for k in range(len(g.ops)):
            if not inplace_ok(g, base, k):
                continue
            lay = inference_layout(g, None, frozenset({k}))
            assert lay.tensor_offset(g.ops[k].inputs[0]) == lay.tensor_offset(g.ops[k].outputs[0])
            eng = NativeEngine(BlobModel(case.name, pack_blob(g, seed, infer=lay), g))
            x = random_input(g, np.random.default_rng(seed))
            assert np.array_equal(eng.infer(x), Forward(g).run(x)), (case.name, k)
            checked += 1
    assert checked > 10


def test_input_in_row_bands_reads_each_row_once_in_order():
    """--input-rows: the input is not in the arena (tp_input is NULL); the first tile row's
    ops ask the row source for rows, in order, each once; the output is the reference's."""
    checked = 0
    for seed in range(SEEDS):
        case = stage_case(seed)
        g = case.graph
        for st in stages(g, input_rows=True):
            lay = inference_layout(g, st)
            blob = pack_blob(g, seed, infer=lay)
            assert blob_status(blob) == "TP_OK"
            eng = NativeEngine(BlobModel(case.name, blob, g))
            x = random_input(g, np.random.default_rng(seed))
            assert np.array_equal(eng.infer(x), Forward(g).run(x)), (case.name, st.describe())
            rows = [r for a, n in eng.rows_read for r in range(a, a + n)]
            assert rows == sorted(set(rows)) and rows[-1] < g.input.shape[1]
            checked += 1
    assert checked > 100


def test_row_bands_hold_less_than_the_input():
    """Reading the input in bands, the planner's smallest arena holds less than the whole
    input's plan does (the MLPerf-like first layers of a stage case)."""
    g = stage_case(3).graph
    whole = plan_inference(g, "min")
    bands = plan_inference(g, "min", input_rows=True)
    assert bands.arena < whole.arena and bands.stage.input_rows


def test_training_with_a_tiled_stage_is_bit_exact():
    """A training blob whose frozen first ops run tile by tile (its training forward too):
    parameters, losses and predictions equal the NumPy reference's over several steps, and
    the step's high-water mark is the training plan's arena."""
    checked = 0
    for seed in range(12):
        case = stage_case(seed)
        g = case.graph
        head = len(g.ops) - 2  # the 1x1 conv before MEAN
        scheme = SparseScheme("test", {head: LayerUpdate(head, True, list(range(
            g.tensors[g.ops[head].inputs[1]].shape[0])))})
        for st in list(stages(g))[:3]:
            prog = build_program(g, scheme, patch=st)
            assert prog.layout.stage is st
            blob = pack_blob(g, seed, train=prog)
            assert blob_status(blob) == "TP_OK"
            tb = TrainingBlob(g, prog, blob, source=Path(case.name))
            ours = NativeEngine(tb, HParams(lr=0.05, seed=seed))
            theirs = ReferenceTrainer(prog, lr=0.05, seed=seed)
            rng = np.random.default_rng(seed)
            for _ in range(3):
                x, label = random_input(g, rng), int(rng.integers(2))
                a, b = ours.train(x, label), theirs.train_step(x, label)
                assert (a.loss, a.prediction) == (b.loss, b.prediction), case.name
                assert a.memory["arena_peak"] <= prog.arena_bytes
            assert ours.params() == theirs.params_bytes(), (case.name, st.describe())
            checked += 1
    assert checked > 15


def _section(raw: bytes, sid: bytes) -> tuple[int, int] | None:
    """(offset, size) of section `sid` from the blob's section table."""
    n_sec = struct.unpack_from("<H", raw, 16)[0]
    for k in range(n_sec):
        name, off, size = SECTION.unpack_from(raw, HEADER.size + k * SECTION.size)
        if name == sid:
            return off, size
    return None


def test_tile_and_inpl_corruption_is_refused_or_runs_safely(tmp_path):
    """Bytes of the TILE and INPL sections corrupted, the CRC recomputed: the loader refuses the
    blob with a blob status, or it infers under ASan and UBSan without a fault."""
    from test_blob import DRIVER, byte_corrupted, refused_or_safe, run_driver

    raws = []
    for seed in range(SEEDS):
        g = stage_case(seed).graph
        for st in stages(g):
            lay = inference_layout(g, st, _whole_inplace(g, st))
            if st.inplace or lay.inplace:
                raws.append(pack_blob(g, seed, infer=lay))
                break
        if len(raws) == 4:
            break
    assert len(raws) == 4
    rng = np.random.default_rng(5)
    blobs = []
    for i in range(240):
        raw = raws[i % len(raws)]
        where = _section(raw, b"TILE" if i % 3 else b"INPL") or _section(raw, b"TILE")
        blobs.append(byte_corrupted(raw, where, rng, i))
    rows = run_driver(build_c_program(DRIVER, sanitize=True), blobs, tmp_path)
    assert status_code("TP_ERR_BLOB_INVALID") in refused_or_safe(rows)


@pytest.mark.slow  # builds the qemu-m4 firmware with the blob
def test_row_band_input_trains_on_qemu_m4_through_bulk_samples():
    """A blob that reads its input in row bands on the emulated board: the device loop gives
    the core the bulk file's rows as the first tiles ask (never the whole sample), and two
    steps equal the NumPy reference."""
    from tinyprop.engines import open_engine

    g = stage_case(3).graph
    head = len(g.ops) - 2
    scheme = SparseScheme("test", {head: LayerUpdate(head, True, list(range(
        g.tensors[g.ops[head].inputs[1]].shape[0])))})
    st = next(stages(g, inplace=False, input_rows=True))
    prog = build_program(g, scheme, patch=st)
    assert prog.layout.stage.input_rows
    tb = TrainingBlob(g, prog, pack_blob(g, 3, train=prog), source=Path("rows"))
    rng = np.random.default_rng(3)
    xs = np.stack([random_input(g, rng) for _ in range(2)])
    ys = np.array([0, 1])
    ref = ReferenceTrainer(prog, lr=0.05, seed=3)
    with open_engine("qemu-m4", tb, HParams(lr=0.05, seed=3)) as eng:
        eng.prepare(xs, ys)
        for i in range(2):
            a, b = eng.train(xs[i], int(ys[i]), i), ref.train_step(xs[i], int(ys[i]))
            assert (np.float32(a.loss), a.prediction) == (np.float32(b.loss), b.prediction)
        assert eng.params() == ref.params_bytes()
