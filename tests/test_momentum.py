"""SGD momentum (convert --momentum, train --momentum): the C core equals the NumPy reference
bit for bit, the optimizer state is exactly 4 B per trained parameter and planned memory, a
blob without it refuses momentum everywhere, and momentum 0 on it is plain SGD."""

from __future__ import annotations

import json
import struct
import zlib

import numpy as np
import pytest
from modelgen import build_tflite, sample_inputs
from test_bad_loss import scale_classifier
from tinyprop.cli import main
from tinyprop.compile.auto import auto_scheme
from tinyprop.compile.blob import read_blob
from tinyprop.compile.blobfile import make_blob
from tinyprop.compile.budget import parse_budget
from tinyprop.compile.scheme import parse_scheme
from tinyprop.compile.train_plan import build_program
from tinyprop.data.datasets import load_split
from tinyprop.device.boards import open_board
from tinyprop.device.device import DeviceError
from tinyprop.engines import BlobModel, HParams
from tinyprop.engines.native import NativeEngine, NativeError
from tinyprop.engines.reference import ReferenceEngine
from tinyprop.errors import TinypropError
from tinyprop.frontend.tflite_reader import read_tflite
from tinyprop.program import F_BIAS, F_WEIGHT
from tinyprop.training.export import export_tflite

# the TF converter's note on the generated models' float calibration; the huge-logits model's
# overflow warnings from NumPy: both are the cases under test, not defects
pytestmark = [pytest.mark.filterwarnings("ignore:Statistics for quantized inputs:UserWarning"),
              pytest.mark.filterwarnings("ignore::RuntimeWarning")]
M, LR, SEED = 0.9, 0.005, 3


@pytest.fixture(scope="module")
def vww_graph(vww_model_path):
    return read_tflite(vww_model_path)


@pytest.fixture(scope="module")
def haze_train(vww_data_dir, vww_graph):
    t = vww_graph.input
    xs, ys, _ = load_split(vww_data_dir, "train", t.s, t.zp, shift="haze")
    return xs, ys


def trained_parameters(prog) -> int:
    """Biases plus held weight elements, counted from the scheme's ops, not the planner."""
    return sum((t.n_out if t.flags & F_BIAS else 0)
               + (len(t.channels) * t.row_len if t.flags & F_WEIGHT else 0)
               for t in prog.ops.values())


def velocities(engine, prog) -> np.ndarray:
    return np.frombuffer(engine.params(), "<f4", offset=prog.params_bytes)


def run_both(tb, xs, ys, steps: int, momentum: float = M, lr: float = LR):
    """Train C and reference side by side; every step's loss, prediction and measured arena
    high-water agree with each other and the plan. Returns (C engine, reference engine)."""
    c = NativeEngine(tb, HParams(lr, SEED, momentum=momentum))
    ref = ReferenceEngine(tb, HParams(lr, SEED, momentum=momentum))
    for step in range(steps):
        i = step % len(xs)
        rc, rr = c.train(xs[i], int(ys[i])), ref.train(xs[i], int(ys[i]))
        assert (rc.loss, rc.prediction) == (rr.loss, rr.prediction), step
        assert not rc.skipped and rc.memory["arena_peak"] == tb.program.arena_bytes, step
        if step % 25 == 24:
            assert c.params() == ref.params(), f"params or velocities differ after step {step}"
    return c, ref


@pytest.mark.slow  # 100 VWW steps
def test_vww_last2_c_equals_reference_over_100_steps(vww_model_path, vww_graph, haze_train,
                                                      tmp_path):
    tb = make_blob(vww_model_path, parse_scheme(vww_graph, "last:2"), momentum=True)
    xs, ys = haze_train
    c, ref = run_both(tb, xs, ys, 100)
    prog = tb.program
    assert len(c.params()) == prog.params_bytes + prog.optimizer_bytes
    v = velocities(c, prog)
    assert np.isfinite(v).all() and np.count_nonzero(v) > 514  # more than the classifier
    plain = NativeEngine(make_blob(vww_model_path, parse_scheme(vww_graph, "last:2")),
                         HParams(LR, SEED))
    for step in range(100):
        plain.train(xs[step % len(xs)], int(ys[step % len(xs)]))
    assert plain.params() != c.params()[: prog.params_bytes]  # momentum changed the update
    out_c = export_tflite(tb.source, prog.unpack_params(c.params()), tmp_path / "c.tflite")
    out_r = export_tflite(tb.source, prog.unpack_params(ref.params()), tmp_path / "r.tflite")
    assert out_c.read_bytes() == out_r.read_bytes()


@pytest.mark.parametrize("name,spec", [("mbv2_block", "last:3"), ("mbv1_tail", "last:2")])
def test_generated_model_c_equals_reference(name, spec):
    path = build_tflite(name)
    graph = read_tflite(path)
    tb = make_blob(path, parse_scheme(graph, spec), momentum=True)
    xs = sample_inputs(path, 6, seed=11)
    ys = np.arange(6) % tb.classes
    c, ref = run_both(tb, xs, ys, 60, lr=0.05)
    assert c.params() == ref.params() and velocities(c, tb.program).any()


@pytest.mark.parametrize("spec", ["last:2", "bias-only", pytest.param(
    "auto:128KB", marks=pytest.mark.slow)])  # an auto search on VWW
def test_optimizer_state_is_4_bytes_per_trained_parameter(spec, vww_model_path, vww_graph):
    sch = (auto_scheme(vww_graph, parse_budget(spec[5:]))[0] if spec.startswith("auto:")
           else parse_scheme(vww_graph, spec))
    plain, mom = make_blob(vww_model_path, sch), make_blob(vww_model_path, sch, momentum=True)
    p, q = plain.program, mom.program
    assert p.optimizer_bytes == 0 and p.memory_bytes == p.arena_bytes + p.params_bytes
    assert q.optimizer_bytes == 4 * trained_parameters(q) > 0
    assert (q.arena_bytes, q.params_bytes) == (p.arena_bytes, p.params_bytes)
    assert q.memory_bytes == p.memory_bytes + 4 * trained_parameters(q)
    a, b = read_blob(plain.blob), read_blob(mom.blob)
    assert (a.params_bytes, a.optimizer_bytes) == (p.params_bytes, 0)
    assert (b.params_bytes, b.optimizer_bytes) == (q.params_bytes + q.optimizer_bytes,
                                                   q.optimizer_bytes)
    # the rest of the blob is the same: sections other than META, tensors and ops
    assert {k: v for k, v in a.sections.items() if k != "META"} == {
        k: v for k, v in b.sections.items() if k != "META"}


@pytest.mark.slow
def test_convert_reports_and_budgets_the_optimizer_state(vww_model_path, tmp_path, capsys):
    figs = {}
    for flag in ([], ["--momentum"]):
        out, rep = tmp_path / f"m{len(flag)}.tpb", tmp_path / f"m{len(flag)}.json"
        assert main(["convert", str(vww_model_path), "-o", str(out), "--scheme", "last:2",
                     "--report", "--report-json", str(rep), *flag]) == 0
        figs[len(flag)] = json.loads(rep.read_text())
    shown = capsys.readouterr().out
    plain, mom = figs[0], figs[1]
    n = 4 * (256 * 256 + 256 + 2 * 256 + 2)  # last:2: conv 26 and the classifier, all of it
    assert plain["optimizer_bytes"] == 0 and mom["optimizer_bytes"] == n
    assert mom["trainable_bytes"] == plain["trainable_bytes"]
    assert mom["total"] == plain["total"] + n == mom["arena_peak"] + mom["trainable_bytes"] + n
    assert f"optimizer (momentum velocities) {n:,} B" in shown
    # a budget the plain plan fits and the momentum plan does not: one line, exit 2
    budget = str(plain["total"] + 24 * 1024 + 1024)
    assert main(["convert", str(vww_model_path), "-o", str(tmp_path / "x.tpb"), "--scheme",
                 "last:2", "--budget", budget]) == 0
    capsys.readouterr()
    assert main(["convert", str(vww_model_path), "-o", str(tmp_path / "y.tpb"), "--scheme",
                 "last:2", "--budget", budget, "--momentum"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"optimizer (momentum) {n:,} B" in err


@pytest.mark.slow  # two auto searches on VWW
def test_auto_under_a_budget_counts_the_optimizer_state(vww_graph):
    budget = parse_budget("256KB")
    sch, prog = auto_scheme(vww_graph, budget, momentum=True)
    plain_sch, plain = auto_scheme(vww_graph, budget)
    assert prog.memory_bytes <= budget - 24 * 1024 and prog.optimizer_bytes > 0
    assert prog.memory_bytes == prog.arena_bytes + prog.params_bytes + prog.optimizer_bytes
    # the same scheme with momentum would not fit: auto chose a smaller one
    assert build_program(vww_graph, plain_sch, True).memory_bytes > budget - 24 * 1024
    assert prog.params_bytes < plain.params_bytes


@pytest.mark.slow
def test_momentum_zero_on_a_momentum_blob_is_plain_sgd(vww_model_path, vww_graph, haze_train):
    sch = parse_scheme(vww_graph, "last:2")
    mom, plain = make_blob(vww_model_path, sch, momentum=True), make_blob(vww_model_path, sch)
    xs, ys = haze_train
    engines = [NativeEngine(mom, HParams(LR, SEED, momentum=0.0)),
               ReferenceEngine(mom, HParams(LR, SEED)), NativeEngine(plain, HParams(LR, SEED))]
    for step in range(30):
        for e in engines:
            e.train(xs[step], int(ys[step]))
    n = plain.program.params_bytes
    a, b, c = (e.params() for e in engines)
    assert a == b and a[:n] == c and c != plain.program.pack_params(
        ReferenceEngine(plain, HParams(LR, SEED)).trainer.values)


@pytest.mark.slow
def test_a_blob_without_optimizer_state_refuses_momentum(vww_model_path, vww_graph, haze_train,
                                                         vww_data_dir, tmp_path, capsys):
    tb = make_blob(vww_model_path, parse_scheme(vww_graph, "last:2"))
    xs, ys = haze_train
    # refused when set, by the reference's check and by the C core's tp_set_hparams alike
    with pytest.raises(TinypropError, match="TP_ERR_NO_OPTIMIZER.*convert it with --momentum"):
        ReferenceEngine(tb, HParams(LR, SEED, momentum=M))
    c = NativeEngine(tb, HParams(LR, SEED))
    before = c.params()
    with pytest.raises(TinypropError, match="TP_ERR_NO_OPTIMIZER"):
        c.set_hparams(HParams(LR, SEED, momentum=M))
    c.train(xs[0], int(ys[0]))  # still plain SGD
    assert c.params() != before
    tpb = tmp_path / "plain.tpb"
    tpb.write_bytes(tb.blob)
    for board in ("host", "reference"):
        assert main(["train", str(tpb), "--data", str(vww_data_dir), "--board", board,
                     "--steps", "1", "--momentum", "0.9", "--plain"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(tpb) in err[0] and "--momentum" in err[0], err
    assert main(["train", str(tpb), "--data", str(vww_data_dir), "--steps", "1",
                 "--momentum", "1.5", "--plain"]) == 2
    assert "[0, 1)" in capsys.readouterr().err


@pytest.mark.slow  # a board build and run
def test_device_trains_with_momentum_and_refuses_it_without_the_state(tmp_path):
    """The firmware's device loop (host board, real pipes): with the state, training and the
    pulled params record (velocities included) equal the reference; without, an error frame."""
    path = build_tflite("mbv1_tail")
    graph = read_tflite(path)
    xs, ys = sample_inputs(path, 4, seed=3), [0, 1, 1, 0]
    mom = make_blob(path, parse_scheme(graph, "last:2"), momentum=True)
    ref = ReferenceEngine(mom, HParams(0.05, SEED, momentum=M))
    with open_board("host", mom.blob, tmp_path / "a") as dev:
        dev.set_hparams(0.05, SEED, True, M)
        for i in range(12):
            got, want = dev.train(xs[i % 4], ys[i % 4]), ref.train(xs[i % 4], ys[i % 4])
            assert np.float32(got["loss"]) == np.float32(want.loss), i
        assert dev.pull_params() == ref.params()
        with pytest.raises(DeviceError, match=r"\[0, 1\)"):
            dev.set_hparams(0.05, SEED, True, 1.0)
    plain = make_blob(path, parse_scheme(graph, "last:2"))
    with open_board("host", plain.blob, tmp_path / "b") as dev:
        with pytest.raises(DeviceError, match="convert it with --momentum"):
            dev.set_hparams(0.05, SEED, True, M)
        dev.set_hparams(0.05, SEED, True, 0.0)  # plain SGD still works


def test_resume_restores_the_velocities(vww_model_path, vww_graph, haze_train):
    """The checkpointed params region holds the velocities, so a resume is exact."""
    tb = make_blob(vww_model_path, parse_scheme(vww_graph, "last:2"), momentum=True)
    xs, ys = haze_train
    full = NativeEngine(tb, HParams(LR, SEED, momentum=M))
    for i in range(12):
        full.train(xs[i], int(ys[i]))
    first = NativeEngine(tb, HParams(LR, SEED, momentum=M))
    for i in range(5):
        first.train(xs[i], int(ys[i]))
    for second in (NativeEngine(tb, HParams(LR, SEED, momentum=M)),
                   ReferenceEngine(tb, HParams(LR, SEED, momentum=M))):
        second.load_params(first.params(), 5)
        for i in range(5, 12):
            second.train(xs[i], int(ys[i]))
        assert second.params() == full.params()
    # restarting the velocities instead would differ: the state matters
    restart = NativeEngine(tb, HParams(LR, SEED, momentum=M))
    raw = first.params()
    restart.load_params(raw[: tb.program.params_bytes] + bytes(tb.program.optimizer_bytes), 5)
    for i in range(5, 12):
        restart.train(xs[i], int(ys[i]))
    assert restart.params() != full.params()


def test_a_skipped_step_leaves_the_velocities_untouched(vww_model_path, tmp_path):
    """Logits scaled by 2^133 overflow the loss on every sample: each step is skipped, and the
    params region (velocities set to non-zero values first) stays as it was."""
    huge = scale_classifier(vww_model_path, tmp_path / "huge.tflite", 2.0**133)
    graph = read_tflite(huge)
    tb = make_blob(huge, parse_scheme(graph, "last:2"), momentum=True)
    prog = tb.program
    state = prog.pack_params({ti: graph.tensors[ti].data for ti in prog.trainable_offsets})
    state += np.linspace(-1, 1, prog.optimizer_bytes // 4, dtype="<f4").tobytes()
    x = np.zeros(graph.input.shape, np.int8)
    for engine in (NativeEngine(tb, HParams(LR, SEED, momentum=M)),
                   ReferenceEngine(tb, HParams(LR, SEED, momentum=M))):
        engine.load_params(state, 0)
        for label in (0, 1):
            assert engine.train(x, label).skipped
        assert engine.params() == state


def test_loader_checks_the_optimizer_size(vww_model_path, vww_graph):
    """optimizer_bytes must be 4 B per trained parameter, after the parameters, inside
    params_bytes: a CRC-valid blob that says otherwise is refused."""
    tb = make_blob(vww_model_path, parse_scheme(vww_graph, "last:2"), momentum=True)
    NativeEngine(BlobModel("momentum", tb.blob))  # accepted as made
    params, opt = struct.unpack_from("<I", tb.blob, 28)[0], struct.unpack_from("<I", tb.blob, 40)[0]
    cases = {(40, opt - 4): "TP_ERR_BLOB_INVALID",  # one velocity short
             (40, opt + 2): "TP_ERR_BLOB_INVALID",  # not float32s
             (40, params + 4): "TP_ERR_BLOB_INVALID",  # larger than the region
             (40, opt + 4): "TP_ERR_BLOB_BOUNDS",  # overlaps the classifier's held rows
             (28, params - 4): "TP_ERR_BLOB_BOUNDS"}
    for (field, value), status in cases.items():
        raw = bytearray(tb.blob)
        struct.pack_into("<I", raw, field, value)
        struct.pack_into("<I", raw, len(raw) - 4, zlib.crc32(bytes(raw[:-4])))
        with pytest.raises(NativeError) as e:
            NativeEngine(BlobModel("corrupted", bytes(raw)))
        assert e.value.status.name == status, (field, value)
