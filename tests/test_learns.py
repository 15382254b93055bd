"""It learns: on-device training (the C core, through the CLI) on the shifted train split raises
the shifted holdout accuracy of the exported model, scored by the TFLite interpreter, well
above the pretrained model's; and the learning-rate schedule is a function of the step alone."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tinyprop.cli import main
from tinyprop.training.run import lr_at


def _eval(capsys, model, data) -> float:
    assert main(["eval", str(model), "--data", str(data), "--shift", "haze", "--json"]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])["accuracy"]


@pytest.mark.slow  # a training run
def test_training_on_the_new_camera_raises_holdout_accuracy(vww_model_path, vww_data_dir,
                                                            tmp_path, capsys):
    # A fixed scheme (no calibration, so the test stays short): biases of the last 22 weighted
    # layers plus the classifier, 107 KB of arena and parameters.
    tpb, tuned, log = tmp_path / "v.tpb", tmp_path / "tuned.tflite", tmp_path / "run.jsonl"
    assert main(["convert", str(vww_model_path), "-o", str(tpb), "--scheme", "bias-last:22"]) == 0
    assert main(["train", str(tpb), "--data", str(vww_data_dir), "--board", "host", "--shift",
                 "haze", "--epochs", "2", "--plain", "--log", str(log), "--out", str(tuned)]) == 0
    capsys.readouterr()
    before, after = _eval(capsys, vww_model_path, vww_data_dir), _eval(capsys, tuned, vww_data_dir)
    assert before == pytest.approx(76 / 121)  # the pretrained model on the hazy holdout
    assert after >= before + 0.08, (before, after)
    steps = [json.loads(line) for line in log.read_text().splitlines()]
    losses = [e["loss"] for e in steps if e.get("type") == "step"]
    assert len(losses) == 552 and np.mean(losses[-100:]) < np.mean(losses[:100])


def test_linear_schedule_decays_to_zero_and_is_exact_on_resume():
    assert lr_at(0.01, "constant", 500, 1000) == 0.01
    assert lr_at(0.01, "linear", 0, 1000) == pytest.approx(0.01)
    assert lr_at(0.01, "linear", 500, 1000) == pytest.approx(0.005)
    assert lr_at(0.01, "linear", 999, 1000) == pytest.approx(1e-5)
    # float32 values, the same whichever process (or resumed run) computes them
    assert lr_at(0.01, "linear", 123, 1000) == float(np.float32(0.01 * (1 - 123 / 1000)))


def test_stochastic_rounding_applies_sub_lsb_updates_on_average(vww_model_path, vww_data_dir):
    from tinyprop.compile.blobfile import make_blob
    from tinyprop.compile.scheme import parse_scheme
    from tinyprop.data.datasets import load_split
    from tinyprop.frontend.tflite_reader import read_tflite
    from tinyprop.reference.backward import ReferenceTrainer

    tb = make_blob(vww_model_path, parse_scheme(read_tflite(vww_model_path), "last:2"))
    t_in = tb.graph.input
    xs, ys, _ = load_split(vww_data_dir, "train", t_in.s, t_in.zp, shift="haze")
    applied = {}
    for mode in ("stochastic", "nearest"):
        tr = ReferenceTrainer(tb.program, lr=0.005, seed=0, rounding=mode)
        tr.tally = {}
        for i in range(6):
            tr.train_step(xs[i], int(ys[i]))
        assert tr.tally["sub_lsb"] > 0.9 * tr.tally["n"]  # nearly every update is under 0.5 LSB
        applied[mode] = tr.tally["sub_applied"] / tr.tally["sub_abs"]
    assert 0.9 < applied["stochastic"] < 1.1  # unbiased: what is expected is what is applied
    assert applied["nearest"] == 0.0  # round-to-nearest throws every one of them away
