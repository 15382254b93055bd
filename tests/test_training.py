"""Sparse-update training: the C core equals the NumPy reference bit for bit, the arena
high-water mark the core measures equals the plan, and bad input never corrupts weights."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from tinyprop.compile.auto import auto_scheme
from tinyprop.compile.blobfile import make_blob
from tinyprop.compile.budget import parse_budget
from tinyprop.compile.scheme import LayerUpdate, SparseScheme, bias_only, parse_scheme
from tinyprop.data.datasets import load_split
from tinyprop.engines import HParams
from tinyprop.engines.native import NativeEngine
from tinyprop.engines.reference import ReferenceEngine
from tinyprop.errors import TinypropError
from tinyprop.frontend.tflite_reader import read_tflite
from tinyprop.status import Status, StatusError
from tinyprop.training.export import export_tflite


@pytest.fixture(scope="module")
def vww_graph(vww_model_path):
    return read_tflite(vww_model_path)


@pytest.fixture(scope="module")
def night_train(vww_data_dir, vww_graph):
    t = vww_graph.input
    xs, ys, _ = load_split(vww_data_dir, "train", t.s, t.zp, shift="night")
    return xs, ys


_AUTO: dict[tuple[int, str], SparseScheme] = {}


def _scheme(graph, spec):
    if spec.startswith("auto:"):
        # The search (tens of seconds on VWW) depends only on the graph and the budget: one search
        # serves both gradient-map formats below, each test taking its own copy.
        if (id(graph), spec) not in _AUTO:
            _AUTO[id(graph), spec] = auto_scheme(graph, parse_budget(spec[5:]))[0]
        return copy.deepcopy(_AUTO[id(graph), spec])
    return parse_scheme(graph, spec)


@pytest.mark.parametrize("spec,grad", [("last:2", "float32"), ("auto:128KB", "float32"),
                                       ("auto:128KB", "int16"), ("bias-only", "int8")])
@pytest.mark.slow  # 200 VWW steps
def test_c_training_equals_reference_over_200_steps(spec, grad, vww_model_path, vww_graph,
                                                    night_train, tmp_path):
    tb = make_blob(vww_model_path, _scheme(vww_graph, spec), grad=grad)
    ref = ReferenceEngine(tb, HParams(lr=0.05, seed=3))
    c = NativeEngine(tb, HParams(lr=0.05, seed=3))
    xs, ys = night_train
    start = c.params()
    for step in range(200):
        i = step % len(xs)
        rc = c.train(xs[i], int(ys[i]))
        rr = ref.train(xs[i], int(ys[i]))
        assert rc.loss == rr.loss and rc.prediction == rr.prediction, step
        assert rc.memory["arena_peak"] == tb.program.arena_bytes  # measured == planned
        if step % 50 == 49:
            assert c.params() == ref.params(), f"params differ after step {step}"
    assert c.params() != start, "200 steps changed nothing"
    out_c = export_tflite(tb.source, tb.program.unpack_params(c.params()), tmp_path / "c.tflite")
    out_r = export_tflite(tb.source, tb.program.unpack_params(ref.params()),
                          tmp_path / "r.tflite")
    assert out_c.read_bytes() == out_r.read_bytes()
    # only trained tensors changed, and the exported model runs in TFLite
    tf = pytest.importorskip("tensorflow")
    interp = tf.lite.Interpreter(model_path=str(out_c))
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], xs[:1])
    interp.invoke()
    assert interp.get_tensor(interp.get_output_details()[0]["index"]).shape == (1, 2)


def test_export_changes_only_trained_bytes(vww_model_path, vww_graph, night_train, tmp_path):
    tb = make_blob(vww_model_path, parse_scheme(vww_graph, "last:2"))
    eng = NativeEngine(tb, HParams(lr=0.05, seed=1))
    xs, ys = night_train
    for i in range(10):
        eng.train(xs[i], int(ys[i]))
    out = export_tflite(tb.source, tb.program.unpack_params(eng.params()), tmp_path / "ft.tflite")
    a = np.frombuffer(vww_model_path.read_bytes(), np.uint8)
    b = np.frombuffer(out.read_bytes(), np.uint8)
    assert a.size == b.size
    from tinyprop.training.export import buffer_spans

    spans = buffer_spans(vww_model_path.read_bytes())
    allowed = np.zeros(a.size, bool)
    for ti in tb.program.trainable_offsets:
        s, n = spans[ti]
        allowed[s : s + n] = True
    changed = a != b
    assert changed.any() and not (changed & ~allowed).any()


def test_wrong_sample_size_and_label_leave_weights_intact(vww_model_path, vww_graph, night_train):
    tb = make_blob(vww_model_path, parse_scheme(vww_graph, "last:2"))
    eng = NativeEngine(tb, HParams(lr=0.05, seed=1))
    before = eng.params()
    xs, _ = night_train
    with pytest.raises(TinypropError, match="bytes"):
        eng.train(xs[0].reshape(-1)[:100], 0)
    with pytest.raises(TinypropError, match="BAD_LABEL"):
        eng.train(xs[0], 7)
    assert eng.params() == before


@pytest.mark.parametrize("lr", [float("nan"), float("inf"), -0.5, 2e30])
def test_a_bad_learning_rate_is_refused_when_set(lr, vww_model_path, vww_graph, night_train):
    """tp_set_hparams refuses it (not the next step), names it and the fix (exit code 2), and
    the session keeps training with the hyper-parameters it had, as the reference does."""
    tb = make_blob(vww_model_path, parse_scheme(vww_graph, "last:2"))
    eng, ref = NativeEngine(tb, HParams(0.05, 1)), ReferenceEngine(tb, HParams(0.05, 1))
    for engine in (eng, ref):
        with pytest.raises(StatusError, match="TP_ERR_BAD_LR.*--lr") as err:
            engine.set_hparams(HParams(lr, 1))
        assert err.value.status == Status.TP_ERR_BAD_LR and err.value.exit_code == 2
    xs, ys = night_train
    a, b = eng.train(xs[0], int(ys[0])), ref.train(xs[0], int(ys[0]))
    assert (np.float32(a.loss), eng.params()) == (np.float32(b.loss), ref.params())


def test_qas_off_is_a_different_update(vww_model_path, vww_graph, night_train):
    tb = make_blob(vww_model_path, parse_scheme(vww_graph, "last:2"))
    xs, ys = night_train
    a, b = (NativeEngine(tb, HParams(0.05, 1, qas=qas)) for qas in (True, False))
    ra = ReferenceEngine(tb, HParams(0.05, 1, qas=False))
    for i in range(5):
        a.train(xs[i], int(ys[i]))
        b.train(xs[i], int(ys[i]))
        ra.train(xs[i], int(ys[i]))
    assert a.params() != b.params()
    assert b.params() == ra.params()


def test_resume_continues_exactly(vww_model_path, vww_graph, night_train):
    """Stopping after k steps and restoring params + step counter gives the same bytes as an
    uninterrupted run (stochastic rounding is keyed by the step)."""
    tb = make_blob(vww_model_path, parse_scheme(vww_graph, "last:2"))
    xs, ys = night_train
    full = NativeEngine(tb, HParams(0.05, 9))
    for i in range(12):
        full.train(xs[i], int(ys[i]))
    first = NativeEngine(tb, HParams(0.05, 9))
    for i in range(5):
        first.train(xs[i], int(ys[i]))
    second = NativeEngine(tb, HParams(0.05, 9))
    second.load_params(first.params(), 5)
    for i in range(5, 12):
        second.train(xs[i], int(ys[i]))
    assert second.params() == full.params()


def test_channel_subsets_hold_only_their_rows_and_match_reference(vww_model_path, vww_graph,
                                                                   night_train):
    """A quarter of a depthwise layer's channels and half of a conv's: RAM holds just those
    rows (plus biases), the rest is read from the blob, and C == reference bit for bit."""
    sch = bias_only(vww_graph, 2)  # ops 26 and 29
    # explicit channels: by weight norm, op 25's top quarter is channels with no gradient here
    sch.layers[25] = LayerUpdate(25, True, list(range(1, 256, 4)))
    sch.layers[26].channels = list(range(0, 256, 2))
    tb = make_blob(vww_model_path, sch)
    prog = tb.program
    dw, pw = prog.ops[25], prog.ops[26]
    assert len(dw.channels) == 64 and dw.row_len == 9 and len(pw.channels) == 128
    rows = 64 * 9 + 128 * 256 + 2 * 256  # held rows of ops 25, 26 and the classifier
    biases = 4 * (256 + 256 + 2)  # ops 25, 26 and 29
    assert prog.params_bytes == rows + biases
    ref, c = ReferenceEngine(tb, HParams(lr=0.05, seed=5)), NativeEngine(tb, HParams(0.05, 5))
    xs, ys = night_train
    for i in range(12):
        rc, rr = c.train(xs[i], int(ys[i])), ref.train(xs[i], int(ys[i]))
        assert rc.loss == rr.loss and rc.memory["arena_peak"] == prog.arena_bytes, i
    assert c.params() == ref.params()
    # trained rows changed, the others equal the model; the C forward reads both kinds
    w = prog.unpack_params(c.params())
    w25 = w[vww_graph.ops[25].inputs[1]].reshape(-1, 256)
    orig = vww_graph.tensors[vww_graph.ops[25].inputs[1]].data.reshape(-1, 256)
    others = [ch for ch in range(256) if ch not in dw.channels]
    assert (w25[:, others] == orig[:, others]).all() and (w25 != orig).any()
    assert np.array_equal(c.infer(xs[20]).reshape(-1), ref.infer(xs[20]).reshape(-1))
