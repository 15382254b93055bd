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
