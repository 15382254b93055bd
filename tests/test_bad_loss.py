"""Bad training input (issue #3): a non-finite loss skips the update and says so in the log; a
wrong-size sample or an out-of-range label through `tinyprop train` is refused before training; no
parameter byte ever changes because of them.

With int8 logits the loss is finite unless the logits' scale is huge. The crafted model is the VWW
model with the classifier's weight, bias and output scales multiplied by 2^133: the int8 forward
is unchanged (requantization uses the ratio of the scales, exact under a power of two), but the
dequantized logits, (q - zp) * 1.6e38, overflow float32 to inf for |q - zp| >= 3, so the softmax
cross-entropy is NaN (inf - inf) or inf. The reader accepts the scale: 1.6e38 is a float32.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import tflite
from tinyprop.cli import main
from tinyprop.compile.blobfile import make_blob
from tinyprop.compile.scheme import parse_scheme
from tinyprop.data.datasets import load_split
from tinyprop.engines import HParams
from tinyprop.engines.native import NativeEngine
from tinyprop.engines.reference import ReferenceEngine
from tinyprop.frontend.tflite_reader import read_tflite
from tinyprop.monitor.runlog import read_runlog
from tinyprop.reference.forward import Forward

# NumPy says so when the logits overflow; that is the case under test
# (and the TF converter's note on the generated models' float calibration)
pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:Statistics for quantized inputs:UserWarning")]
FLOAT32_MAX = float(np.finfo(np.float32).max)


def scale_classifier(src: Path, dst: Path, factor: float) -> Path:
    """A copy of `src` with the logits op's weight, bias and output scales times `factor`,
    patched in the flatbuffer itself (the numpy views alias the bytearray)."""
    op = read_tflite(src).logits_op()
    buf = bytearray(src.read_bytes())
    sg = tflite.Model.GetRootAsModel(buf, 0).Subgraphs(0)
    for ti in (op.inputs[1], op.inputs[2], op.outputs[0]):
        scale = sg.Tensors(ti).Quantization().ScaleAsNumpy()
        scale[:] = (scale.astype(np.float64) * factor).astype(np.float32)
    dst.write_bytes(bytes(buf))
    return dst


@pytest.fixture(scope="module")
def huge_logits(vww_model_path, tmp_path_factory) -> Path:
    return scale_classifier(vww_model_path, tmp_path_factory.mktemp("bad") / "huge.tflite",
                            2.0**133)


@pytest.fixture(scope="module")
def train_xs(vww_model_path, vww_data_dir):
    t = read_tflite(vww_model_path).input
    xs, ys, _ = load_split(vww_data_dir, "train", t.s, t.zp)
    return xs[:8], ys[:8]


def test_non_finite_loss_skips_the_update_on_both_engines(huge_logits, vww_model_path,
                                                          train_xs):
    graph = read_tflite(huge_logits)
    assert graph.tensors[graph.logits_op().outputs[0]].s > 1e38  # the reader took the scale
    tb = make_blob(huge_logits, parse_scheme(graph, "last:2"))
    ref, c = ReferenceEngine(tb, HParams(0.05, 1)), NativeEngine(tb, HParams(0.05, 1))
    start = ref.params()
    assert c.params() == start
    original = Forward(read_tflite(vww_model_path))
    kinds = set()
    for x, y in zip(*train_xs, strict=True):
        rr, rc = ref.train(x, int(y)), c.train(x, int(y))
        assert rr.skipped and rc.skipped
        assert not math.isfinite(rr.loss) and not math.isfinite(rc.loss)
        kinds.add("nan" if math.isnan(rr.loss) else "inf")
        # the int8 forward is the original model's: the prediction is still reported
        assert rr.prediction == rc.prediction == int(np.argmax(original.run(x)))
        assert ref.params() == start and c.params() == start  # byte for byte
    assert kinds == {"nan", "inf"}  # both kinds of non-finite loss were exercised


def test_finite_loss_near_float_max_is_handled_alike(vww_model_path, train_xs, tmp_path):
    # a sample the VWW model gets wrong, with a factor putting its loss in (3.0e38, FLT_MAX]
    model = scale_classifier(vww_model_path, tmp_path / "near.tflite", 4.6e38)
    graph = read_tflite(model)
    tb = make_blob(model, parse_scheme(graph, "last:2"))
    ref, c = ReferenceEngine(tb, HParams(0.05, 1)), NativeEngine(tb, HParams(0.05, 1))
    xs, ys = train_xs
    rr = ref.train(xs[4], int(ys[4]))
    assert 3.0e38 < rr.loss <= FLOAT32_MAX  # the case under test
    rc = c.train(xs[4], int(ys[4]))
    assert rr.skipped == rc.skipped and ref.params() == c.params()


@pytest.mark.slow
@pytest.mark.parametrize("board", ["host", "reference"])
def test_cli_train_logs_skipped_steps_and_exports_the_model_unchanged(board, huge_logits,
                                                                     vww_data_dir, tmp_path,
                                                                     capsys):
    tpb, log, out = tmp_path / "huge.tpb", tmp_path / "run.jsonl", tmp_path / "ft.tflite"
    assert main(["convert", str(huge_logits), "-o", str(tpb), "--scheme", "last:2"]) == 0
    assert main(["train", str(tpb), "--data", str(vww_data_dir), "--board", board, "--steps",
                 "3", "--log", str(log), "--plain", "--out", str(out)]) == 0
    shown = capsys.readouterr().out.splitlines()
    step_lines = [ln for ln in shown if ln.startswith("step")]
    assert [f"step {i}/3 skipped" for i in range(3)] == step_lines
    steps = [e for e in read_runlog(log) if e["type"] == "step"]
    assert len(steps) == 3 and all(e["skipped"] for e in steps)
    assert not any(math.isfinite(e["loss"]) for e in steps if e.get("loss") is not None)
    assert out.read_bytes() == huge_logits.read_bytes()  # no parameter changed


# ---- wrong-size sample and out-of-range label through `tinyprop train --board host` ----


@pytest.fixture(scope="module")
def odd_models(tmp_path_factory) -> dict[str, Path]:
    """small_input: 12x12x8 input (vww-mini images are 96x96x3: no image fits 8 channels);
    one_class: a 96x96x3 model with a single logit, so the label 1 (person) is out of range."""
    modelgen = pytest.importorskip("modelgen")

    def one_logit(L, x):
        y = L.Conv2D(4, 3, strides=4, activation="relu")(x)
        return L.Dense(1)(L.GlobalAveragePooling2D()(y))

    one = tmp_path_factory.mktemp("odd") / "one_class.tflite"
    one.write_bytes(modelgen.convert(modelgen._functional((96, 96, 3), one_logit, seed=7)))
    return {"small_input": modelgen.build_tflite("mbv2_block"), "one_class": one}


@pytest.mark.parametrize(("model", "says"), [("small_input", "takes 8 channels"),
                                             ("one_class", "label 1 (person) is out of range")])
def test_cli_bad_sample_or_label_is_a_user_error(model, says, odd_models, vww_data_dir, tmp_path,
                                                 capsys):
    """Refused before training starts: exit 2, one line naming the problem, no log, no export."""
    tpb, log, out = tmp_path / "m.tpb", tmp_path / "run.jsonl", tmp_path / "ft.tflite"
    assert main(["convert", str(odd_models[model]), "-o", str(tpb), "--scheme", "last:2"]) == 0
    capsys.readouterr()
    rc = main(["train", str(tpb), "--data", str(vww_data_dir), "--board", "host", "--steps", "20",
               "--log", str(log), "--plain", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and says in err
    assert not log.exists() and not out.exists()


def test_a_non_finite_scale_is_refused_at_convert(vww_model_path, tmp_path, capsys):
    # 2^140 overflows the float32 scales to inf: refused when read, in one line, exit 2
    model = scale_classifier(vww_model_path, tmp_path / "inf.tflite", 2.0**140)
    assert main(["convert", str(model), "-o", str(tmp_path / "x.tpb")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a finite positive number" in err[0] and "inf.tflite" in err[0]
    assert not (tmp_path / "x.tpb").exists()
