"""The MLPerf Tiny models train bit for bit (tinyprop.bench.suite, `bench --only models`): each
converts with `--scheme auto` within 256 KB for the Cortex-M4 kernels, and 20 training steps on
generated int8 samples (no CIFAR-10 or Speech Commands here; generated machine sounds for the
autoencoder) leave the same parameters on the NumPy reference, the host C core and qemu-m4."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tinyprop.bench.suite import STEPS, SUITE, measure, table
from tinyprop.cli import main
from tinyprop.compile.budget import DEFAULT_RESERVE

MODELS = Path(os.environ["TINYPROP_ASSETS"]) / "models"
LIMIT = 256 * 1024 - DEFAULT_RESERVE
SUITE_MODEL = {m.key: m for m in SUITE}


def _measure(key: str, vww_data_dir: Path, out: Path, engines: tuple[str, ...]) -> dict:
    return measure(SUITE_MODEL[key], MODELS, vww_data_dir, out, engines)


def test_kws_converts_within_256kb_and_trains_the_same_on_numpy_and_host_c(vww_data_dir,
                                                                          tmp_path):
    f = _measure("kws", vww_data_dir, tmp_path, ("reference", "host"))
    assert f["ops"] == {"CONV_2D": 5, "DEPTHWISE_CONV_2D": 4, "AVERAGE_POOL_2D": 1,
                        "RESHAPE": 1, "FULLY_CONNECTED": 1, "SOFTMAX": 1}
    assert (f["classes"], f["input"]["shape"]) == (12, [49, 10, 1])
    assert f["scheme"].startswith("auto") and f["arena_peak"] + f["trainable_bytes"] <= LIMIT
    assert f["steps"] == STEPS >= 20
    crcs = [r["params_crc"] for r in f["engines"].values()]
    assert len(crcs) == 2 and f["bit_exact"] and crcs[0] == crcs[1]
    # the stride-2 10x4 first convolution has its DSP kernel; the classifier (no DSP kernel)
    # runs the reference
    assert f["reference_kernels"] == ["FULLY_CONNECTED #11"] and f["dsp_fallbacks"] == []


def test_the_convert_cli_makes_the_same_blob(vww_data_dir, tmp_path, capsys):
    f = _measure("kws", vww_data_dir, tmp_path, ())
    blob = tmp_path / "cli.tpb"
    assert main(["convert", f["int8_model"], "-o", str(blob), "--scheme", "auto", "--budget",
                 "256KB", "--target", "cortex-m4", "--calib", str(tmp_path / "kws.npz")]) == 0
    assert blob.read_bytes() == (tmp_path / "kws.tpb").read_bytes()


def test_the_autoencoder_trains_the_same_on_numpy_and_host_c(vww_data_dir, tmp_path):
    f = _measure("ad", vww_data_dir, tmp_path, ("reference", "host"))
    assert f["loss"] == "mse" and f["classes"] is None and f["ops"] == {"FULLY_CONNECTED": 10}
    assert f["arena_peak"] + f["trainable_bytes"] <= LIMIT and f["bit_exact"]
    row = next(r for r in table([f]) if r.startswith("| MLPerf AD"))
    assert "none (autoencoder, --loss mse)" in row and "equal" in row


@pytest.mark.slow  # qemu-m4: builds the firmware with each blob, 20 steps emulated
@pytest.mark.parametrize("key", ["kws", "ic", "ad"])
def test_numpy_host_c_and_qemu_m4_train_bit_for_bit(key, vww_data_dir, tmp_path):
    f = _measure(key, vww_data_dir, tmp_path, ("reference", "host", "qemu-m4"))
    assert f["bit_exact"], f["engines"]
    board = f["engines"]["qemu-m4"]
    assert board["unit"] == "instructions" and board["per_step"] > board["per_inference"] > 0
    assert f["arena_peak"] + f["trainable_bytes"] <= LIMIT
    if key == "ic":  # ResNet-8: the residual ADDs
        assert f["ops"]["ADD"] == 3 and f["input"]["shape"] == [32, 32, 3]


@pytest.mark.slow  # TensorFlow quantizes the Keras model
def test_the_keras_2_vww_h5_is_quantized_with_a_batch_of_one(vww_data_dir, tmp_path):
    """MLPerf's vww_96.h5 (saved by Keras 2.4) loads in Keras 3 and converts without the ops a
    free batch dimension adds to its Flatten (SHAPE, STRIDED_SLICE, PACK)."""
    f = _measure("vww-keras", vww_data_dir, tmp_path, ("reference", "host"))
    assert f["ops"] == {"CONV_2D": 14, "DEPTHWISE_CONV_2D": 13, "AVERAGE_POOL_2D": 1,
                        "FULLY_CONNECTED": 1, "SOFTMAX": 1}
    assert f["input"]["shape"] == [96, 96, 3] and f["classes"] == 2 and f["bit_exact"]
