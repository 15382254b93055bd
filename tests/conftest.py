"""Shared fixtures. Every test session points $TINYPROP_ASSETS at the `shared` folder beside the
repo (unless the caller set it), so no test ever downloads the model."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tinyprop.data import assets

REPO_ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault(assets.ASSETS_ENV, str(REPO_ROOT.parent / "shared"))


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


# The files that take longest (seconds on two cores, from `--durations`), run first: the workers
# of `-n 4 --dist loadfile` take files in collection order, and a long one taken last leaves
# the other workers idle while it ends.
LONGEST_FIRST = ("test_fleet_cli.py", "test_fleet_restart.py", "fuzz/test_fuzz_short.py",
                 "test_kernels_dsp.py", "test_fleet_deploy.py", "test_learn_qemu.py",
                 "test_tte.py", "test_resume_cli.py", "test_wheel.py", "test_firmware.py",
                 "test_mlperf_suite.py", "test_training.py", "test_board_folders.py",
                 "test_baseline.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}

    def key(item):
        rel = Path(str(item.fspath)).relative_to(REPO_ROOT / "tests").as_posix()
        return rank.get(rel, len(rank))

    items.sort(key=key)  # stable: the rest keep their order, and every worker collects alike
