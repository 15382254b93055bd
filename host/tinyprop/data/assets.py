"""Find the MLPerf Tiny VWW model and a VWW dataset: a flag, else $TINYPROP_ASSETS, else the
cache, downloading into it once.

$TINYPROP_ASSETS is a folder laid out like the project's shared assets:
`models/mlperf-tiny-vww/<model files>` and `datasets/vww-mini/`. Without it, the model files are
fetched from the MLPerf Tiny repository at a pinned commit, and vww-mini is rebuilt from its
public COCO originals (tinyprop.data.vww_mini), into the cache (~/.cache/tinyprop, or
$TINYPROP_CACHE), every file checked against its sha256 (tinyprop.data.download). Nothing touches
the network when a flag or $TINYPROP_ASSETS supplies the file.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import TinypropError
from ..paths import cache_dir
from . import vww_mini
from .download import RemoteFile, fetch

ASSETS_ENV = "TINYPROP_ASSETS"
# Base URL of the model files; overridable so tests (and mirrors) can serve them locally.
MODEL_URL_ENV = "TINYPROP_MODEL_URL"

# mlcommons/tiny, pinned as in PROVENANCE.md of the shared model folder.
MLPERF_TINY_COMMIT = "1afd2c9820f795965a6134facd0b4dfae41ef23f"
MODEL_BASE_URL = (
    f"https://raw.githubusercontent.com/mlcommons/tiny/{MLPERF_TINY_COMMIT}"
    "/benchmark/training/visual_wake_words/trained_models"
)
MODEL_SUBDIR = Path("models/mlperf-tiny-vww")
DATASET_SUBDIR = vww_mini.SUBDIR

# variant -> (file name, sha256, bytes)
MODEL_FILES = {
    "int8": (
        "vww_96_int8.tflite",
        "597a384c8c2c8a1276f04702f25013b7838f2f814f1ca7c174d295b73e3d6b7b",
        333_288,
    ),
    "float": (
        "vww_96_float.tflite",
        "115bbc094d2119561320a21f01b6500a18bea8cc8589282ab007097bec8af38c",
        866_284,
    ),
    "h5": (
        "vww_96.h5",
        "af9111d50e6e85b2f2123345e0316ef1c384865ebf6b06340ddac7e66017450f",
        3_124_024,
    ),
}


def _assets_root() -> Path | None:
    env = os.environ.get(ASSETS_ENV)
    return Path(env) if env else None


def _existing(path: Path, what: str, hint: str) -> Path:
    if not path.exists():
        raise TinypropError(f"{path}: {what} not found; {hint}")
    return path


def resolve_model(flag_path: str | os.PathLike | None = None, variant: str = "int8") -> Path:
    """Path of the MLPerf Tiny VWW model: `variant` is "int8" (.tflite), "float" (.tflite) or
    "h5" (Keras). Order: flag_path, then $TINYPROP_ASSETS, then the cache (downloading once)."""
    if variant not in MODEL_FILES:
        raise TinypropError(
            f"model variant {variant!r} is unknown; use one of {', '.join(MODEL_FILES)}"
        )
    if flag_path is not None:
        return _existing(Path(flag_path), "model file", "pass an existing .tflite/.h5 path")
    name, sha256, size = MODEL_FILES[variant]
    root = _assets_root()
    if root is not None:
        return _existing(
            root / MODEL_SUBDIR / name,
            f"model file (from ${ASSETS_ENV})",
            f"fix ${ASSETS_ENV} or unset it to download the model into {cache_dir()}",
        )
    dest = cache_dir() / MODEL_SUBDIR / name
    base = os.environ.get(MODEL_URL_ENV, MODEL_BASE_URL).rstrip("/")
    fetch([RemoteFile(f"{base}/{name}", dest, sha256, size)], f"download {name}")
    return dest


def resolve_dataset(flag_path: str | os.PathLike | None = None) -> Path:
    """Folder of a VWW-layout dataset (`person/`, `non_person/`): flag_path, else
    $TINYPROP_ASSETS/datasets/vww-mini, else vww-mini rebuilt in the cache from its COCO
    originals (downloading them once)."""
    if flag_path is not None:
        return _existing(
            Path(flag_path), "dataset folder", "pass a folder holding person/ and non_person/"
        )
    root = _assets_root()
    if root is not None:
        return _existing(
            root / DATASET_SUBDIR,
            f"dataset folder (from ${ASSETS_ENV})",
            f"fix ${ASSETS_ENV} or pass the dataset folder explicitly",
        )
    return vww_mini.ensure()
