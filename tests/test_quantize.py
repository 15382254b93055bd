"""Float models quantized for you: `tinyprop convert` on a float .tflite (also a dynamic-range one,
as MLPerf Tiny's keyword-spotting "float32" model is), a Keras .keras file or a SavedModel folder
quantizes it with TensorFlow on the --calib samples, writes the int8 model beside the blob, prints
both models' accuracy, and converts the int8 model. The datasets are labelled by the float model's
own predictions, so the float model scores 100 % and the int8 model's score is its agreement."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import modelgen
import numpy as np
import pytest
from tinyprop.frontend.tflite_reader import read_tflite

pytestmark = pytest.mark.slow  # TensorFlow conversions
TINYPROP = [sys.executable, "-m", "tinyprop.cli"]
# the MLPerf Tiny models beside the checkout (conftest points TINYPROP_ASSETS at ../shared)
KWS_FLOAT = (Path(os.environ["TINYPROP_ASSETS"]) / "models" / "mlperf-tiny-kws"
             / "kws_ref_model_float32.tflite")


def _self_labelled(root: Path, predict, shape: tuple[int, ...], n: int, seed: int) -> Path:
    """A .npz dataset of n real-valued samples labelled with the float model's predictions (a
    .npz, where outputs no sample hits need no folder)."""
    rng = np.random.default_rng(seed)
    # samples of different contrast and per-channel offsets: varied enough to span classes
    xs = (rng.normal(0.0, 1.0, (n, *shape)) * rng.uniform(0.5, 3.0, (n, 1, 1, 1))
          + rng.normal(0.0, 2.0, (n, 1, 1, shape[-1]))).astype(np.float32)
    labels = predict(xs)
    assert len(set(labels.tolist())) >= 2, "the samples must span classes to test anything"
    np.savez(root, x=xs, y=labels)
    return root


def _convert(model: Path, data: Path | None, out: Path) -> subprocess.CompletedProcess:
    cmd = [*TINYPROP, "convert", str(model), "-o", str(out), "--scheme", "last:1"]
    if data is not None:
        cmd += ["--calib", str(data)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def _check_quantized(run: subprocess.CompletedProcess, blob: Path) -> float:
    assert run.returncode == 0, run.stderr
    int8 = blob.with_suffix(".int8.tflite")
    g = read_tflite(int8)  # a model the reader takes: int8 input, ops it runs
    assert g.input.dtype == "int8"
    assert blob.stat().st_size > 0
    m = re.search(r"float ([\d.]+)%, int8 ([\d.]+)%", run.stdout)
    assert m, run.stdout
    assert float(m.group(1)) == 100.0  # the labels are its own predictions
    assert "W0000" not in run.stderr and "oneDNN" not in run.stderr  # TF's start-up noise
    return float(m.group(2))


def _keras_predict(model):
    return lambda xs: np.argmax(model.predict(xs, verbose=0, batch_size=1), axis=-1)


def test_float_tflite_and_a_dynamic_range_one(tmp_path):
    from tinyprop.frontend.quantize import float_predictions

    for name, model, shape in (("conv", modelgen.build_tflite("float_conv"), (9, 9, 3)),
                               ("kws", KWS_FLOAT, (49, 10, 1))):
        data = _self_labelled(tmp_path / f"{name}.npz",
                              lambda xs, m=model: float_predictions(m, xs), shape, 60,
                              seed=len(name))
        blob = tmp_path / f"{name}.tpb"
        agreement = _check_quantized(_convert(model, data, blob), blob)
        assert agreement >= 80.0, f"{name}: the int8 model agrees on {agreement} % only"


@pytest.mark.parametrize("fmt", ["keras", "savedmodel"])
def test_keras_and_savedmodel(tmp_path, fmt):
    model = modelgen.MODELS["conv3x3_same_relu"]()
    path = tmp_path / ("m.keras" if fmt == "keras" else "saved")
    if fmt == "keras":
        model.save(path)
    else:
        model.export(path)
    data = _self_labelled(tmp_path / "data.npz", _keras_predict(model), (9, 9, 3), 60, seed=4)
    blob = tmp_path / "m.tpb"
    assert _check_quantized(_convert(path, data, blob), blob) >= 80.0


def test_a_float_model_without_calib_is_one_line(tmp_path):
    run = _convert(modelgen.build_tflite("float_conv"), None, tmp_path / "x.tpb")
    assert run.returncode == 2
    (line,) = run.stderr.strip().splitlines()
    assert "a float model; pass --calib DIR" in line
    run = _convert(tmp_path, None, tmp_path / "x.tpb")  # a folder that is no SavedModel
    assert run.returncode == 2 and "without saved_model.pb" in run.stderr
