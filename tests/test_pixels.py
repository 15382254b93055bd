"""The pixel range of image inputs: the real value a pixel is to a model (0:1 = pixel / 255,
0:255 = the raw pixel, -1:1 = pixel / 127.5 - 1), picked from an int8 model's input
quantization or given with --pixels. MLPerf VWW takes 0:1, MLPerf ResNet-8 (image
classification) the raw pixels: fed pixel / 255 it sees a near-constant input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from tinyprop.cli import main
from tinyprop.data.datasets import (
    input_pixels,
    load_real,
    load_split,
    pixels_to_real,
    quantize_pixels,
    read_rgb,
    to_model_input,
)
from tinyprop.frontend.tflite_reader import read_tflite

MODELS = Path(os.environ["TINYPROP_ASSETS"]) / "models"
IC = MODELS / "mlperf-tiny-ic" / "pretrainedResnet_quant.tflite"


def test_the_rule_on_the_mlperf_image_models(vww_model_path):
    vww, ic = read_tflite(vww_model_path).input, read_tflite(IC).input
    assert (vww.s, vww.zp) == (pytest.approx(1 / 255), -128)
    assert (ic.s, ic.zp) == (1.0, -128)
    assert input_pixels(vww.s, vww.zp) == "0:1"
    assert input_pixels(ic.s, ic.zp) == "0:255"
    # what TensorFlow's converter makes of a model calibrated on -1..1 (MobileNet's range)
    assert input_pixels(2 / 255, -1) == "-1:1"


def test_each_range_maps_black_and_white_to_its_ends():
    p = np.array([0, 255], np.uint8)
    assert pixels_to_real(p, "0:1").tolist() == [0.0, 1.0]
    assert pixels_to_real(p, "0:255").tolist() == [0.0, 255.0]
    assert pixels_to_real(p, "-1:1").tolist() == [-1.0, 1.0]


def test_vww_inputs_are_unchanged(vww_model_path, vww_data_dir):
    """VWW's input (1/255, -128) is 0:1: every sample is pixel - 128, as before."""
    t = read_tflite(vww_model_path).input
    xs, _, names = load_split(vww_data_dir, "holdout", t.s, t.zp)
    rgb = read_rgb(next(vww_data_dir.glob(f"*/{names[0]}")))
    assert np.array_equal(xs[0], (rgb.astype(np.int16) - 128).astype(np.int8))
    assert np.array_equal(to_model_input(rgb, t.s, t.zp), xs[0])
    assert np.array_equal(load_real(vww_data_dir, "holdout")[0], rgb / np.float32(255.0))


def test_resnet8_gets_real_photos_in_its_range(vww_data_dir):
    """The 96x96 photos fitted to ResNet-8's 32x32x3 span its int8 input; pixel / 255 would
    have put every value at -128 or -127."""
    t = read_tflite(IC).input
    xs, _, _ = load_split(vww_data_dir, "train", t.s, t.zp, size=t.shape[1:])
    assert xs.shape[1:] == (32, 32, 3)
    assert xs.astype(np.float64).std(axis=0).mean() > 40  # across samples, per input value
    flat, _, _ = load_split(vww_data_dir, "train", t.s, t.zp, size=t.shape[1:], pixels="0:1")
    assert set(np.unique(flat).tolist()) <= {-128, -127}
    rgb = np.full((40, 40, 3), 200, np.uint8)
    assert np.all(quantize_pixels(rgb, t.s, t.zp) == 200 - 128)


def _eval(capsys, *args: str) -> dict:
    assert main(["eval", str(IC), "--data", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _predicted_classes(r: dict) -> int:
    return int(np.count_nonzero(np.array(r["confusion"]).sum(axis=0)))


def test_the_pixels_flag_overrides_the_rule(vww_data_dir, capsys):
    """ResNet-8 on vww-mini's holdout: in its own range it spreads its predictions over the
    CIFAR-10 classes; forced to 0:1 it sees near-constant input and picks one or two."""
    own = _eval(capsys, str(vww_data_dir))
    flat = _eval(capsys, str(vww_data_dir), "--pixels", "0:1")
    raw = _eval(capsys, str(vww_data_dir), "--pixels", "0:255")
    assert own["confusion"] == raw["confusion"]
    assert _predicted_classes(own) >= 8 and _predicted_classes(flat) <= 3


@pytest.mark.parametrize("verb", ["eval", "train", "convert"])
def test_a_bad_pixel_range_is_one_line_exit_2(verb, vww_model_path, vww_data_dir, tmp_path,
                                              capsys):
    args = {"eval": [str(vww_model_path), "--data", str(vww_data_dir)],
            "train": [str(tmp_path / "x.tpb"), "--data", str(vww_data_dir)],
            "convert": [str(vww_model_path), "-o", str(tmp_path / "x.tpb"), "--calib",
                        str(vww_data_dir)]}[verb]
    if verb == "train":
        assert main(["convert", str(vww_model_path), "-o", args[0]]) == 0
        capsys.readouterr()
    assert main([verb, *args, "--pixels", "0:2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"tinyprop {verb}: error: --pixels 0:2: unknown pixel range; use one of "
                   "0:1, 0:255, -1:1")
