"""Find the MLPerf Tiny VWW model and a VWW dataset: a flag, else $TINYPROP_ASSETS, else a download.

$TINYPROP_ASSETS is a folder laid out like the project's shared assets:
`models/mlperf-tiny-vww/<model files>` and `datasets/vww-mini/`. Without it, the model files are
fetched from the MLPerf Tiny repository at a pinned commit into a cache (~/.cache/tinyprop, or
$TINYPROP_CACHE) and checked against their sha256. Nothing touches the network when a flag or
$TINYPROP_ASSETS supplies the file.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import tempfile
import urllib.request
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from ..errors import TinypropError

ASSETS_ENV = "TINYPROP_ASSETS"
CACHE_ENV = "TINYPROP_CACHE"
# Base URL of the model files; overridable so tests (and mirrors) can serve them locally.
MODEL_URL_ENV = "TINYPROP_MODEL_URL"

# mlcommons/tiny, pinned as in PROVENANCE.md of the shared model folder.
MLPERF_TINY_COMMIT = "1afd2c9820f795965a6134facd0b4dfae41ef23f"
MODEL_BASE_URL = (
    f"https://raw.githubusercontent.com/mlcommons/tiny/{MLPERF_TINY_COMMIT}"
    "/benchmark/training/visual_wake_words/trained_models"
)
MODEL_SUBDIR = Path("models/mlperf-tiny-vww")
DATASET_SUBDIR = Path("datasets/vww-mini")

# variant -> (file name, sha256)
MODEL_FILES = {
    "int8": (
        "vww_96_int8.tflite",
        "597a384c8c2c8a1276f04702f25013b7838f2f814f1ca7c174d295b73e3d6b7b",
    ),
    "float": (
        "vww_96_float.tflite",
        "115bbc094d2119561320a21f01b6500a18bea8cc8589282ab007097bec8af38c",
    ),
    "h5": (
        "vww_96.h5",
        "af9111d50e6e85b2f2123345e0316ef1c384865ebf6b06340ddac7e66017450f",
    ),
}

_CHUNK = 1 << 16


def cache_dir() -> Path:
    """Where downloaded assets live: $TINYPROP_CACHE, else ~/.cache/tinyprop."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "tinyprop"


def _assets_root() -> Path | None:
    env = os.environ.get(ASSETS_ENV)
    return Path(env) if env else None


def _existing(path: Path, what: str, hint: str) -> Path:
    if not path.exists():
        raise TinypropError(f"{path}: {what} not found; {hint}")
    return path


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def resolve_model(flag_path: str | os.PathLike | None = None, variant: str = "int8") -> Path:
    """Path of the MLPerf Tiny VWW model: `variant` is "int8" (.tflite), "float" (.tflite) or
    "h5" (Keras). Order: flag_path, then $TINYPROP_ASSETS, then the cache (downloading once)."""
    if variant not in MODEL_FILES:
        raise TinypropError(
            f"model variant {variant!r} is unknown; use one of {', '.join(MODEL_FILES)}"
        )
    if flag_path is not None:
        return _existing(Path(flag_path), "model file", "pass an existing .tflite/.h5 path")
    name, sha256 = MODEL_FILES[variant]
    root = _assets_root()
    if root is not None:
        return _existing(
            root / MODEL_SUBDIR / name,
            f"model file (from ${ASSETS_ENV})",
            f"fix ${ASSETS_ENV} or unset it to download the model into {cache_dir()}",
        )
    dest = cache_dir() / MODEL_SUBDIR / name
    if dest.exists() and sha256_of(dest) == sha256:
        return dest
    base = os.environ.get(MODEL_URL_ENV, MODEL_BASE_URL).rstrip("/")
    return download(f"{base}/{name}", dest, sha256)


def resolve_dataset(flag_path: str | os.PathLike | None = None) -> Path:
    """Folder of a VWW-layout dataset (`person/`, `non_person/`): flag_path, else
    $TINYPROP_ASSETS/datasets/vww-mini. vww-mini has no public download, so there is no fallback."""
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
    raise TinypropError(
        f"no dataset given and ${ASSETS_ENV} is not set; vww-mini has no public download: pass a "
        "folder with person/ and non_person/ images (e.g. built from COCO with "
        f"datasets/build_vww_from_coco.py), or set ${ASSETS_ENV} to a folder holding "
        f"{DATASET_SUBDIR}/"
    )


def download(url: str, dest: Path, sha256: str) -> Path:
    """Fetch url to dest with a progress bar; dest appears only complete and with the right sha256.

    The bytes go to a temporary file beside dest, renamed into place after the check, so an
    interrupted or corrupt download never leaves a file that a later run would trust."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=dest.name + ".", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            digest = _fetch(url, out)
        if digest != sha256:
            raise TinypropError(
                f"{url}: sha256 {digest} does not match the expected {sha256}; the download is "
                f"corrupt or the source changed: retry, or pass the file's path explicitly"
            )
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def _fetch(url: str, out) -> str:
    """Stream url into the open file `out`; return the sha256 of what was written."""
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:
            total = int(resp.headers.get("Content-Length") or 0) or None
            progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
            )
            with progress:
                task = progress.add_task(f"download {url.rsplit('/', 1)[-1]}", total=total)
                received = 0
                for chunk in iter(lambda: resp.read(_CHUNK), b""):
                    out.write(chunk)
                    digest.update(chunk)
                    received += len(chunk)
                    progress.update(task, advance=len(chunk))
    except (OSError, http.client.HTTPException) as exc:
        raise TinypropError(
            f"{url}: download failed ({exc}); check the network and retry, or pass the file's "
            "path explicitly"
        ) from exc
    if total is not None and received != total:
        raise TinypropError(
            f"{url}: download interrupted after {received} of {total} bytes; retry"
        )
    return digest.hexdigest()
