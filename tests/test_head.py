"""A new classifier head (tinyprop.training.head, `convert --classes`): the rewritten .tflite is a
model TFLite runs and the NumPy reference equals bit for bit, its head starts as the nearest class
mean (or zero), its class names travel with it through convert, train, export and eval."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import modelgen
import numpy as np
import pytest
from tinyprop.compile.blob import read_blob
from tinyprop.data.datasets import load_split
from tinyprop.errors import TinypropError
from tinyprop.frontend.tflite_reader import read_tflite
from tinyprop.reference.forward import Forward
from tinyprop.training.head import labels_path, new_head, read_labels

pytestmark = pytest.mark.slow  # TensorFlow (the generated model, the interpreter)
TINYPROP = [sys.executable, "-m", "tinyprop.cli"]
NAMES = ("cat", "dog", "owl")


@pytest.fixture(scope="module")
def base() -> Path:
    return modelgen.build_tflite("mbv1_tail")  # ... AvgPool, RESHAPE, FC 32 -> 2, SOFTMAX


@pytest.fixture(scope="module")
def task(tmp_path_factory) -> Path:
    """Three classes of real-valued 12x12x16 samples that differ in their channel means."""
    rng = np.random.default_rng(7)
    centres = rng.normal(0.0, 1.5, (3, 16))
    y = np.repeat(np.arange(3), 30)
    x = rng.normal(0.0, 1.0, (90, 12, 12, 16)) + centres[y][:, None, None, :]
    path = tmp_path_factory.mktemp("task") / "task.npz"
    np.savez(path, x=x.astype(np.float32), y=y, classes=np.array(NAMES))
    return path


def _tflite_outputs(model: Path, xs: np.ndarray) -> np.ndarray:
    import tensorflow as tf

    it = tf.lite.Interpreter(model_path=str(model), experimental_op_resolver_type=tf.lite.
                             experimental.OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    out = []
    for x in xs:
        it.set_tensor(it.get_input_details()[0]["index"], x[None])
        it.invoke()
        out.append(it.get_tensor(it.get_output_details()[0]["index"])[0])
    return np.stack(out)


def test_means_head_is_a_model_tflite_and_the_reference_agree_on(base, task, tmp_path):
    head = new_head(base, NAMES, task, tmp_path / "h.tflite")
    assert read_labels(head) == NAMES
    g = read_tflite(head)
    fc = g.logits_op()
    assert g.tensors[fc.inputs[1]].shape == (3, 32) and g.output.shape == (1, 3)
    assert len(g.tensors[fc.inputs[1]].scale) == 3  # per-class weight scales
    xs, ys, _ = load_split(task, "all", g.input.s, g.input.zp, size=g.input.shape[1:])
    ours = np.stack([Forward(g).run(x)[0] for x in xs])
    np.testing.assert_array_equal(ours, _tflite_outputs(head, xs))  # bit for bit
    # nearest class mean on features of well separated classes: most samples right untrained
    assert np.mean(ours.argmax(axis=1) == ys) >= 0.8
    # every byte but the head's is the original model's: the rest of the graph is untouched
    before = read_tflite(base)
    for t0, t1 in zip(before.tensors, g.tensors, strict=False):
        if t0.index not in (*fc.inputs, *fc.outputs, g.outputs[0]):
            assert t0.shape == t1.shape and (t0.data is None or np.array_equal(t0.data, t1.data))


def test_zero_head_starts_at_chance(base, task, tmp_path):
    head = new_head(base, NAMES, None, tmp_path / "z.tflite", init="zero")
    g = read_tflite(head)
    fc = g.logits_op()
    assert not g.tensors[fc.inputs[1]].data.any() and not g.tensors[fc.inputs[2]].data.any()
    xs, _, _ = load_split(task, "all", g.input.s, g.input.zp, size=g.input.shape[1:])
    out = np.stack([Forward(g).run(x)[0] for x in xs[:5]])
    assert np.all(out == out[:, :1])  # every class equally likely


def test_head_refusals(base, task, tmp_path):
    with pytest.raises(TinypropError, match=r"logits come from op \d+ \(CONV_2D\)"):
        new_head(modelgen.build_tflite("conv1x1_none"), NAMES, task, tmp_path / "x.tflite")
    with pytest.raises(TinypropError, match="--head-init means: pass --calib"):
        new_head(base, NAMES, None, tmp_path / "x.tflite")
    with pytest.raises(TinypropError, match="classes cat, dog, owl .* --classes owl,cat,dog"):
        new_head(base, ("owl", "cat", "dog"), task, tmp_path / "x.tflite")
    with pytest.raises(TinypropError, match="at least two classes"):
        new_head(base, ("cat",), task, tmp_path / "x.tflite")


def test_classes_through_convert_train_export_eval(base, task, tmp_path):
    blob = tmp_path / "h.tpb"
    run = subprocess.run([*TINYPROP, "convert", str(base), "-o", str(blob), "--scheme", "last:1",
                          "--classes", ",".join(NAMES), "--calib", str(task)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "new head for 3 classes (cat, dog, owl)" in run.stdout
    assert read_blob(blob.read_bytes()).labels == NAMES  # the blob carries them (LABL)
    # train, export and eval then take them from the blob, not from beside its source
    labels_path(blob.with_suffix(".head.tflite")).unlink()
    tuned = tmp_path / "tuned.tflite"
    run = subprocess.run([*TINYPROP, "train", str(blob), "--data", str(task), "--board", "host",
                          "--steps", "30", "--plain", "--out", str(tuned), "--log",
                          str(tmp_path / "run.jsonl")],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert read_labels(tuned) == NAMES and labels_path(tuned).is_file()
    assert '"classes":["cat","dog","owl"]' in (tmp_path / "run.jsonl").read_text()
    # the monitor (its plain view; the dashboard folds the same state) names them too
    assert re.search(r" (cat|dog|owl)->(cat|dog|owl) acc ", run.stdout)
    run = subprocess.run([*TINYPROP, "eval", str(tuned), "--data", str(task), "--split", "all"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert all(f"  {n}" in run.stdout for n in NAMES)
