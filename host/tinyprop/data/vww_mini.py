"""vww-mini from its public originals: 397 COCO 2017 photos, center-cropped and resized to 96x96
as the project's copy was made, which this reproduces byte for byte.

The list beside this file (vww_mini.csv: file name, label, split, COCO split and id, the
original's size and sha256, the sha256 of the 96x96 file) holds facts, no photos. `ensure()`
downloads the originals from COCO (`http://images.cocodataset.org/<split>/<12-digit id>.jpg`, or
the same paths under $TINYPROP_COCO_URL) into `<cache>/coco/`, checked and resumable
(tinyprop.data.download), and writes the set to `<cache>/datasets/vww-mini/` (person/,
non_person/, holdout.txt), renamed into place only when whole.

The photos belong to their Flickr owners under their own Creative Commons licenses, many of them
NonCommercial or NoDerivatives: research and evaluation use only (datasets/README.md).
"""

from __future__ import annotations

import csv
import errno
import fcntl
import hashlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import PIL
from rich.console import Console
from rich.progress import track

from ..paths import cache_dir
from . import download
from .datasets import CLASSES, HOLDOUT_FILE, write_model_image

COCO_URL_ENV = "TINYPROP_COCO_URL"
COCO_BASE_URL = "http://images.cocodataset.org"
LIST = Path(__file__).with_name("vww_mini.csv")
COLUMNS = ("filename", "label", "split", "coco_split", "coco_id", "bytes", "sha256",
           "built_sha256")
SUBDIR = Path("datasets/vww-mini")  # under the cache, as under $TINYPROP_ASSETS
STAMP = ".tinyprop-built"  # in the built folder: the digest of the list it was built from
ABOUT = """vww-mini, built by tinyprop from COCO 2017 originals (images.cocodataset.org): each
photo center-cropped, resized to 96x96 (Pillow LANCZOS) and saved as JPEG quality 95.
The photos belong to their Flickr owners under their own Creative Commons licenses (many
NonCommercial or NoDerivatives): research and evaluation use only; do not redistribute.
"""


@dataclass(frozen=True)
class Photo:
    """One row of the list."""

    filename: str
    label: str  # "person" or "non_person"
    split: str  # "train" or "holdout"
    coco_split: str  # "train2017" or "val2017"
    coco_id: int
    bytes: int
    sha256: str  # of the original
    built_sha256: str  # of the 96x96 file

    @property
    def coco_path(self) -> str:
        """The original's path under COCO's base URL (and under <cache>/coco/)."""
        return f"{self.coco_split}/{self.coco_id:012d}.jpg"


def photos() -> list[Photo]:
    """The shipped list, in its order."""
    with open(LIST, newline="") as f:
        return [Photo(r["filename"], r["label"], r["split"], r["coco_split"], int(r["coco_id"]),
                      int(r["bytes"]), r["sha256"], r["built_sha256"])
                for r in csv.DictReader(f)]


def originals_dir() -> Path:
    return cache_dir() / "coco"


def dataset_dir() -> Path:
    return cache_dir() / SUBDIR


def ensure(selection: Sequence[Photo] | None = None) -> Path:
    """The folder of the built set, downloading and building it unless it is there already
    (built from this list). `selection` builds part of the list instead (tests)."""
    selection = photos() if selection is None else list(selection)
    target = dataset_dir()
    digest = _digest(selection)
    if _built_from(target) == digest:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # one builder at a time (parallel test workers, two shells): the second finds it built
    with open(target.parent / ".vww-mini.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _built_from(target) != digest:
            _fetch_originals(selection)
            _build(selection, target, digest)
    return target


def _fetch_originals(selection: Sequence[Photo]) -> None:
    base = os.environ.get(COCO_URL_ENV, COCO_BASE_URL).rstrip("/")
    files = [download.RemoteFile(f"{base}/{p.coco_path}", originals_dir() / p.coco_path,
                                 p.sha256, p.bytes) for p in selection]
    download.fetch(files, "vww-mini: COCO originals")


def _build(selection: Sequence[Photo], target: Path, digest: str) -> None:
    """Write the 96x96 set beside target, then rename it into place."""
    tmp = Path(tempfile.mkdtemp(prefix=".vww-mini.", dir=target.parent))
    differing = []
    console = Console(stderr=True)
    try:
        for c in CLASSES:
            (tmp / c).mkdir()
        for p in track(selection, description="vww-mini: 96x96 photos", console=console):
            dest = tmp / p.label / p.filename
            write_model_image(originals_dir() / p.coco_path, dest)
            if hashlib.sha256(dest.read_bytes()).hexdigest() != p.built_sha256:
                differing.append(p.filename)
        holdout = [p.filename for p in selection if p.split == "holdout"]  # vww-mini's order
        (tmp / HOLDOUT_FILE).write_text("".join(f"{name}\n" for name in holdout))
        (tmp / "README.txt").write_text(ABOUT)
        (tmp / STAMP).write_text(f"{digest}\n")
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise download.disk_full(target.parent, 3_000_000) from None
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if differing:  # the pixels may differ slightly: a different Pillow or libjpeg
        console.print(
            f"note: {len(differing)} of {len(selection)} photos built here differ from "
            f"vww-mini's bytes (first: {differing[0]}; Pillow {PIL.__version__}): accuracies "
            "may differ slightly from docs/benchmarks.md's", highlight=False, soft_wrap=True)


def _built_from(target: Path) -> str | None:
    stamp = target / STAMP
    return stamp.read_text().strip() if stamp.is_file() else None


def _digest(selection: Sequence[Photo]) -> str:
    rows = "\n".join(f"{p.filename},{p.label},{p.split},{p.built_sha256}" for p in selection)
    return hashlib.sha256(rows.encode()).hexdigest()
