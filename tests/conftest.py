"""Shared fixtures. Every test session points $TINYPROP_ASSETS at the `shared` folder beside the
repo (unless the caller set it), so no test ever downloads the model."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tinyprop.data import assets

REPO_ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault(assets.ASSETS_ENV, str(REPO_ROOT.parent / "shared"))

# Longest first: the full suite runs a test file to a pytest-xdist worker (--dist loadfile), and
# a long file handed out last is the run's tail (xdist's own order, most tests first, left the
# one-test fleet restart file, 105 s, to the end). Seconds a file took in a fresh-clone .ci/run
# (5c0d363, three workers); files not listed follow, most tests first, as xdist would order them.
FILE_SECONDS = {
    "test_kernels_dsp": 188, "test_fleet_cli": 137, "test_fuzz_short": 137,
    "test_fleet_restart": 105, "test_mlperf_suite": 104, "test_training": 98, "test_tte": 94,
    "test_wheel": 93, "test_resume_cli": 87, "test_fleet_deploy": 75, "test_learn_qemu": 75,
    "test_firmware": 63, "test_board_folders": 60, "test_fleet_qemu": 58, "test_profiles": 57,
    "test_baseline": 55, "test_eval": 48, "test_forward_reference": 44, "test_qemu_board": 40,
    "test_momentum": 39, "test_store": 39, "test_learn": 37, "test_soak": 36, "test_protocol": 34,
    "test_quantize": 33, "test_selftrain": 32, "test_planner": 32, "test_link_faults": 32,
    "test_rv32": 30, "test_learns": 29, "test_cycles": 28, "test_autoencoder": 27,
    "test_device_qemu": 27, "test_qemu_run": 27, "test_platformio": 25, "test_forward_c": 25,
}


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist: keep the order below
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    counts: dict[Path, int] = {}
    for item in items:
        counts[item.path] = counts.get(item.path, 0) + 1
    items.sort(key=lambda item: (-FILE_SECONDS.get(item.path.stem, 0), -counts[item.path],
                                 str(item.path)))


@pytest.fixture(scope="session")
def vww_model_path() -> Path:
    """The MLPerf Tiny VWW int8 .tflite."""
    return assets.resolve_model()


@pytest.fixture(scope="session")
def vww_float_h5_path() -> Path:
    """The float Keras model (`vww_96.h5`) the int8 model was converted from."""
    return assets.resolve_model(variant="h5")


@pytest.fixture(scope="session")
def vww_data_dir() -> Path:
    """vww-mini: 397 real 96x96 COCO photos in the MLPerf VWW layout, with holdout.txt."""
    return assets.resolve_dataset()


# Models for the device tests (host board, qemu-m4, rv32-virt): blob + samples + reference.
@pytest.fixture
def small_model():
    """The generated MobileNetV1 tail (last:2) with a few samples (test_device_host)."""
    from test_device_host import load_small_model

    return load_small_model()


@pytest.fixture
def vww_model(vww_model_path, vww_data_dir):
    """The MLPerf VWW model (last:2) and four real photos (test_device_host)."""
    from test_device_host import load_vww_model

    return load_vww_model(vww_model_path, vww_data_dir)


# The learn app (test_learn.py, test_learn_qemu.py, helpers in learn_camera.py).
@pytest.fixture(scope="session")
def learn_blob(vww_model_path, tmp_path_factory):
    """The VWW blob training its last two layers (a fast step on qemu-m4)."""
    from tinyprop.cli import main
    from tinyprop.compile.blobfile import load_blob

    tpb = tmp_path_factory.mktemp("learn") / "vww.tpb"
    assert main(["convert", str(vww_model_path), "-o", str(tpb), "--scheme", "last:2"]) == 0
    return load_blob(tpb)


@pytest.fixture(scope="session")
def learn_frames(vww_data_dir, tmp_path_factory):
    """N_FRAMES haze frames and a label script leaving every fourth frame unlabelled."""
    from learn_camera import CLASSES, N_FRAMES, haze_photos

    out = tmp_path_factory.mktemp("frames")
    named = haze_photos(vww_data_dir, out / "frames", N_FRAMES)
    lines = ["frame,label"] + [f"{name},{CLASSES[y]}" for i, (name, y) in enumerate(named)
                               if i % 4 != 3]
    (out / "labels.csv").write_text("\n".join(lines) + "\n")
    return out
