"""Autoencoders (`convert --loss mse`): the MLPerf Tiny anomaly-detection model (a fully connected
autoencoder on 640 log-mel values) learns a generated machine's normal sound on the board.

The mse step is the same bits in NumPy, the host C core and qemu-m4; training on the normal
samples lowers their reconstruction error and lets it tell anomalies apart (eval's AUC); bad
uses of the loss are one line each."""

from __future__ import annotations

import json
import os
import re
import zlib
from pathlib import Path

import numpy as np
import pytest
from test_blob_faults import field_at, patched
from tinyprop import blob_layout
from tinyprop.cli import main
from tinyprop.compile.build import build
from tinyprop.data.synthetic import machine_sounds
from tinyprop.engines import HParams, open_engine
from tinyprop.engines.native import blob_fault
from tinyprop.errors import TinypropError
from tinyprop.frontend.tflite_reader import read_tflite
from tinyprop.training.anomaly import auc, is_autoencoder

AD_MODEL = Path(os.environ["TINYPROP_ASSETS"]) / "models" / "mlperf-tiny-ad" / "ad01_int8.tflite"
STEPS = 24


@pytest.fixture(scope="module")
def sounds(tmp_path_factory) -> Path:
    return machine_sounds(tmp_path_factory.mktemp("ae") / "toycar.npz")


def samples(sounds: Path, n: int = STEPS) -> np.ndarray:
    from tinyprop.data.datasets import load_split

    t = read_tflite(AD_MODEL).input
    xs, ys, _ = load_split(sounds, "all", t.s, t.zp, size=t.shape[1:])
    return xs[ys == 1][:n]  # normal sounds


def trained(tb, board: str, xs: np.ndarray) -> tuple[str, list[float]]:
    """(params CRC, losses) of STEPS mse steps of `tb` on `board`."""
    with open_engine(board, tb, HParams(lr=0.001, seed=3)) as engine:
        engine.prepare(xs, np.zeros(len(xs), np.int64))
        losses = [engine.train(x, 0, index=i).loss for i, x in enumerate(xs)]
        return f"{zlib.crc32(engine.params()):08x}", losses


@pytest.mark.parametrize("grad", ["int8", "float32"])
def test_numpy_equals_host_c(grad, sounds):
    tb = build(AD_MODEL, "last:2", None, loss="mse", grad=grad)
    xs = samples(sounds)
    want, losses = trained(tb, "reference", xs)
    assert trained(tb, "host", xs) == (want, losses)
    assert losses[-1] < losses[0] / 2  # it learns this machine


@pytest.mark.slow
def test_qemu_m4_equals_numpy_under_auto(sounds):
    """auto under 256 KB trains most of the autoencoder's weights; qemu-m4 (the DSP kernels)
    gives the bits of the reference."""
    tb = build(AD_MODEL, "auto", "256KB", sounds, loss="mse")
    assert tb.program.memory_bytes <= 256 * 1024 - 24 * 1024
    xs = samples(sounds)
    want = trained(tb, "reference", xs)
    assert trained(tb, "host", xs) == want
    assert trained(tb, "qemu-m4", xs) == want


@pytest.mark.slow
def test_trains_on_qemu_m4_from_the_cli(sounds, tmp_path, capsys):
    """A board's run ends with its cost per step and per inference (no class to score)."""
    blob, log = tmp_path / "ad.tpb", tmp_path / "run.jsonl"
    assert main(["convert", str(AD_MODEL), "-o", str(blob), "--loss", "mse"]) == 0
    assert main(["train", str(blob), "--data", str(sounds), "--board", "qemu-m4", "--steps", "6",
                 "--plain", "--log", str(log)]) == 0
    summary = json.loads(log.read_text().splitlines()[-1])
    assert summary["type"] == "summary"
    assert summary["instructions_per_step"] > summary["instructions_per_inference"] > 0


def eval_json(capsys, model: Path, data: Path, *extra: str) -> dict:
    assert main(["eval", str(model), "--data", str(data), "--holdout", "0.3", "--json",
                 *extra]) == 0
    return json.loads(capsys.readouterr().out)


def eval_json_board(capsys, blob: Path, data: Path) -> dict:
    capsys.readouterr()
    return eval_json(capsys, blob, data, "--board", "host")


def test_learns_normal_and_tells_anomalies(sounds, tmp_path, capsys):
    blob, out = tmp_path / "ad.tpb", tmp_path / "ad-trained.tflite"
    before = eval_json(capsys, AD_MODEL, sounds)
    assert (before["n"], before["n_normal"], before["n_anomalous"]) == (54, 36, 18)
    assert main(["convert", str(AD_MODEL), "-o", str(blob), "--loss", "mse", "--scheme", "auto",
                 "--budget", "256KB", "--calib", str(sounds)]) == 0
    on_host = eval_json_board(capsys, blob, sounds)  # the C core's outputs: TFLite's
    assert on_host["error_per_class"] == before["error_per_class"]
    log = tmp_path / "run.jsonl"
    assert main(["train", str(blob), "--data", str(sounds), "--holdout", "0.3", "--board", "host",
                 "--epochs", "3", "--lr", "0.001", "--seed", "1", "--plain", "--log", str(log),
                 "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert not any("MISS" in line or "ok  " in line for line in lines)  # no class to predict
    steps = [e for e in map(json.loads, log.read_text().splitlines()) if e["type"] == "step"]
    assert len(steps) == 3 * 84 and {e["label"] for e in steps} == {0}  # the normal train split
    assert all(e["prediction"] is None for e in steps)
    after = eval_json(capsys, out, sounds)
    assert after["error_normal"] < before["error_normal"] / 5
    assert after["error_anomalous"] > after["error_normal"]
    assert after["auc"] > before["auc"] + 0.1
    assert after["normal_class"] == "normal"
    assert main(["eval", str(out), "--data", str(sounds), "--holdout", "0.3"]) == 0
    text = capsys.readouterr().out
    assert re.search(r"36 normal, 18 anomalous; tflite\): reconstruction error \(MSE\) normal "
                     r"[\d.]+, anomalous [\d.]+; AUC 0\.\d{3}", text)


def test_auc_counts_pairs():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 5, 40).astype(float)  # many ties
    positive = rng.random(40) < 0.4
    pairs = [(1.0 if p > n else 0.5 if p == n else 0.0)
             for p in scores[positive] for n in scores[~positive]]
    assert auc(scores, positive) == pytest.approx(np.mean(pairs))
    assert auc(scores, np.zeros(40, bool)) is None


def test_autoencoder_is_told_from_a_classifier(vww_model_path):
    assert is_autoencoder(read_tflite(AD_MODEL))
    assert not is_autoencoder(read_tflite(vww_model_path))


def test_mse_on_a_classifier_is_one_line(vww_model_path, tmp_path, capsys):
    assert main(["convert", str(vww_model_path), "-o", str(tmp_path / "x.tpb"),
                 "--loss", "mse"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert "--loss mse: the model maps 27648 inputs to 2 outputs" in err
    with pytest.raises(TinypropError, match="--loss mse with --input-rows"):
        build(AD_MODEL, "last:2", None, loss="mse", input_rows=True)


def test_one_class_trains_an_autoencoder_not_a_classifier(vww_model_path, tmp_path, capsys):
    data = tmp_path / "one"
    (data / "person").mkdir(parents=True)
    src = Path(os.environ["TINYPROP_ASSETS"]) / "datasets" / "vww-mini" / "person"
    for p in sorted(src.iterdir())[:2]:
        (data / "person" / p.name).write_bytes(p.read_bytes())
    blob = tmp_path / "vww.tpb"
    assert main(["convert", str(vww_model_path), "-o", str(blob), "--scheme", "bias-only"]) == 0
    capsys.readouterr()
    assert main(["train", str(blob), "--data", str(data), "--holdout", "0.5", "--steps", "1",
                 "--plain"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"{data}: only person; a classifier learns from two classes" in err


def test_loader_refuses_a_target_it_cannot_hold(vww_model_path):
    """A classifier's blob claiming the mse loss: its input is not its logits' size."""
    blob = build(vww_model_path, "bias-only", None).blob
    at = field_at(blob, b"TRAN", blob_layout.TRAN_HEADER, 0, "loss")
    assert blob_fault(patched(blob, at, "<H", 1)) == (
        "TP_ERR_BLOB_INVALID: TRAN field loss: the mse loss's target, the input, is not the "
        "logits' size or not in the training arena whole (check tran_target)")
    assert "check tran_fields" in blob_fault(patched(blob, at, "<H", 2))
