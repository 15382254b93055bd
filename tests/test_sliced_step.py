"""A training step in slices (tp_train_begin, then tp_train_continue with a bounded number of
units a call) is tp_train_step bit for bit, on the real C core: the same parameters and results
after every step, one unit a call (the tiled first ops, each op's forward, the loss, each op's
backward and update) or three; and a step another call abandons says so."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from test_device_host import load_ir_model
from tinyprop.compile.blobfile import make_blob
from tinyprop.compile.scheme import parse_scheme
from tinyprop.engines.base import BlobModel, HParams
from tinyprop.engines.native import NativeEngine, Result, status_name
from tinyprop.frontend.tflite_reader import read_tflite

STEPS = 4


def _signatures(lib) -> None:
    p = ctypes.c_void_p
    lib.tp_train_begin.argtypes, lib.tp_train_begin.restype = [p, ctypes.c_int32], ctypes.c_int
    lib.tp_train_continue.argtypes = [p, ctypes.c_uint32, ctypes.POINTER(Result)]
    lib.tp_train_continue.restype = ctypes.c_int


def sliced_step(engine: NativeEngine, x: np.ndarray, label: int, units: int) -> tuple[Result, int]:
    """One step in slices of `units`: its result and how many tp_train_continue calls it took."""
    lib = engine._lib
    _signatures(lib)
    engine._put(x)
    assert status_name(lib.tp_train_begin(engine._session, label)) == "TP_OK"
    r, calls = Result(), 0
    while True:
        calls += 1
        st = status_name(lib.tp_train_continue(engine._session, units, ctypes.byref(r)))
        if st != "TP_STEP_PENDING":
            assert st == "TP_OK"
            return r, calls


def check_slices(model, xs: np.ndarray, ys: np.ndarray, units: int) -> None:
    """STEPS steps whole and in slices of `units`: the same results and parameters, in as many
    calls as the step has units (the tiled stage, each forward op after it, the loss, each TRAN
    record's backward)."""
    whole, sliced = (NativeEngine(BlobModel("sliced", model.blob), HParams(lr=0.05, seed=7))
                     for _ in range(2))
    prog = model.program
    stage = prog.layout.stage
    work = 1 + (prog.logits + 1 - (stage.n_ops if stage else 0)) + 1 + len(prog.ops)
    for i in range(min(STEPS, len(xs))):
        want = whole.train(xs[i], int(ys[i]), index=i)
        r, calls = sliced_step(sliced, xs[i], int(ys[i]), units)
        assert (r.loss, r.prediction, r.skipped) == (want.loss, want.prediction, 0)
        assert calls == -(-work // units)
        assert sliced.params() == whole.params()


@pytest.mark.parametrize("units", [1, 3])
def test_slices_equal_the_whole_step(units):
    model = load_ir_model()
    check_slices(model, model.inputs, model.labels, units)


def test_the_tiled_first_ops_are_one_unit(vww_model_path, vww_data_dir):
    """VWW last:2 with its first ops run tile by tile (patch min), on real photos."""
    from test_device_host import load_vww_model

    graph = read_tflite(vww_model_path)
    tb = make_blob(vww_model_path, parse_scheme(graph, "last:2"), patch="min")
    assert tb.program.layout.stage is not None
    photos = load_vww_model(vww_model_path, vww_data_dir)
    check_slices(tb, photos.inputs, photos.labels, 1)


def test_a_step_another_call_abandons():
    model = load_ir_model()
    engine = NativeEngine(BlobModel("abandoned", model.blob), HParams(lr=0.05, seed=7))
    lib, s = engine._lib, engine._session
    _signatures(lib)
    r = Result()
    assert status_name(lib.tp_train_continue(s, 5, ctypes.byref(r))) == "TP_ERR_NO_STEP"
    engine._put(model.inputs[0])
    assert status_name(lib.tp_train_begin(s, 99)) == "TP_ERR_BAD_LABEL"
    assert status_name(lib.tp_train_begin(s, 0)) == "TP_OK"
    assert status_name(lib.tp_train_continue(s, 0, ctypes.byref(r))) == "TP_STEP_PENDING"
    assert status_name(lib.tp_train_continue(s, 2, ctypes.byref(r))) == "TP_STEP_PENDING"
    engine.infer(model.inputs[1])  # takes the arena
    assert status_name(lib.tp_train_continue(s, 99, ctypes.byref(r))) == "TP_ERR_NO_STEP"
    # nothing was updated (the backward never ran) and the step was not counted: a whole step
    # now gives the reference's first step
    fresh = NativeEngine(BlobModel("fresh", model.blob), HParams(lr=0.05, seed=7))
    assert engine.train(model.inputs[0], 0, index=0).loss == fresh.train(model.inputs[0], 0,
                                                                         index=0).loss
    assert engine.params() == fresh.params()
