"""Datasets in the MLPerf Tiny Visual Wake Words layout, and the model's input preprocessing.

A dataset folder holds `person/` and `non_person/` images and optionally `holdout.txt` (one file
name a line: the holdout split; every other image is train). Labels follow the model, which was
trained with Keras `flow_from_directory` (alphabetical classes): 0 = non_person, 1 = person.

Decoding all 397 vww-mini JPEGs takes about 0.13 s on the 2-core dev machine, so there is no cache.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from ..errors import TinypropError
from .shifts import apply_shift

CLASSES = ("non_person", "person")
SPLITS = ("train", "holdout", "all")
HOLDOUT_FILE = "holdout.txt"
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp"}
MODEL_SIZE = (96, 96)  # (height, width) of the MLPerf VWW model input


@dataclass(frozen=True)
class Sample:
    path: Path
    label: int  # index into CLASSES
    split: str  # "train" or "holdout"

    @property
    def name(self) -> str:
        return self.path.name


@dataclass(frozen=True)
class Dataset:
    root: Path
    samples: tuple[Sample, ...]  # sorted by (class, file name): a stable order everywhere

    def split(self, name: str) -> list[Sample]:
        """The samples of split `name`: "train", "holdout" or "all"."""
        if name not in SPLITS:
            raise TinypropError(f"split {name!r} is unknown; use one of {', '.join(SPLITS)}")
        return [s for s in self.samples if name == "all" or s.split == name]


def load_dataset(root: str | os.PathLike) -> Dataset:
    """Index a dataset folder (`person/`, `non_person/`, optional `holdout.txt`)."""
    root = Path(root)
    if not root.is_dir():
        raise TinypropError(f"{root}: dataset folder not found; pass a folder with {_layout()}")
    missing = [c for c in CLASSES if not (root / c).is_dir()]
    if missing:
        raise TinypropError(
            f"{root}: missing {' and '.join(m + '/' for m in missing)}; a dataset folder holds "
            f"{_layout()}"
        )
    files = {
        c: sorted(p for p in (root / c).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        for c in CLASSES
    }
    empty = [c for c in CLASSES if not files[c]]
    if empty:
        raise TinypropError(
            f"{root}: no images ({'/'.join(sorted(IMAGE_SUFFIXES))}) in "
            f"{' and '.join(e + '/' for e in empty)}; add images of both classes"
        )
    holdout = _read_holdout(root, {p.name for c in CLASSES for p in files[c]})
    samples = tuple(
        Sample(p, label, "holdout" if p.name in holdout else "train")
        for label, c in enumerate(CLASSES)
        for p in files[c]
    )
    return Dataset(root, samples)


def _layout() -> str:
    return "person/ and non_person/ images and an optional holdout.txt"


def _read_holdout(root: Path, names: set[str]) -> set[str]:
    path = root / HOLDOUT_FILE
    if not path.exists():
        return set()
    listed = {line.strip() for line in path.read_text().splitlines() if line.strip()}
    unknown = sorted(listed - names)
    if unknown:
        raise TinypropError(
            f"{path}: lists {len(unknown)} file(s) not in person/ or non_person/ (first: "
            f"{unknown[0]}); list bare file names of images in the dataset"
        )
    return listed


def read_rgb(path: str | os.PathLike) -> np.ndarray:
    """Decode an image file to uint8 HxWx3 RGB (grayscale and RGBA are converted)."""
    return _decode(path)[0]


def _decode(path: str | os.PathLike) -> tuple[np.ndarray, bytes | None]:
    """(uint8 RGB pixels, the JPEG comment or None) of an image file."""
    try:
        with Image.open(path) as img:
            return np.asarray(img.convert("RGB"), dtype=np.uint8), img.info.get("comment")
    except OSError as exc:
        raise TinypropError(f"{path}: cannot decode image ({exc}); remove or replace it") from exc


def fit_to_size(rgb: np.ndarray, size: Sequence[int] = MODEL_SIZE) -> np.ndarray:
    """Center-crop to the aspect ratio of size=(height, width), then resize (Pillow LANCZOS, as
    vww-mini was made) if the crop is not already that size."""
    _check_rgb(rgb)
    th, tw = int(size[0]), int(size[1])
    h, w = rgb.shape[:2]
    # Largest centered window with aspect tw:th (integer arithmetic: no float drift).
    ch, cw = (h, h * tw // th) if h * tw <= w * th else (w * th // tw, w)
    top, left = (h - ch) // 2, (w - cw) // 2
    crop = rgb[top : top + ch, left : left + cw]
    if crop.shape[:2] == (th, tw):
        return np.ascontiguousarray(crop)
    return np.asarray(Image.fromarray(crop).resize((tw, th), Image.LANCZOS), dtype=np.uint8)


def write_model_image(
    src: str | os.PathLike, dest: str | os.PathLike, size: Sequence[int] = MODEL_SIZE
) -> None:
    """The image file src center-cropped and resized (fit_to_size) to size, saved as an RGB JPEG
    of quality 95: how vww-mini's photos were made from their COCO originals. The original's
    JPEG comment, if any, is kept (Pillow >= 9.4 carries it through crop and resize, and
    vww-mini's files have it), so every vww-mini file is reproduced byte for byte."""
    rgb, comment = _decode(src)
    extra = {"comment": comment} if comment else {}
    Image.fromarray(fit_to_size(rgb, size)).save(dest, format="JPEG", quality=95, **extra)


def quantize_pixels(rgb: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """uint8 pixels -> int8 model input for a model fed x = pixel/255, quantized as TFLite's
    QUANTIZE does: q = round(x / scale) + zero_point, in float32, rounding half away from zero,
    clamped to int8. For scale 1/255 and zero point -128 this is exactly pixel - 128."""
    x = rgb.astype(np.float32) / np.float32(255.0)
    v = x / np.float32(scale)
    rounded = np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))  # std::round semantics
    return np.clip(rounded.astype(np.int32) + int(zero_point), -128, 127).astype(np.int8)


def to_model_input(
    image_rgb_uint8: np.ndarray,
    scale: float,
    zero_point: int,
    size: Sequence[int] = MODEL_SIZE,
) -> np.ndarray:
    """One RGB uint8 image of any size -> int8 (height, width, 3) model input."""
    return quantize_pixels(fit_to_size(image_rgb_uint8, size), scale, zero_point)


def load_images(
    root: str | os.PathLike,
    split: str,
    shift: str | None = None,
    size: Sequence[int] = MODEL_SIZE,
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Decode a split: (uint8 N x H x W x 3 at `size`, int64 labels, file names). The sensor
    shift, if any, acts on the image at model size, keyed by file name (order-independent)."""
    samples = load_dataset(root).split(split)
    if not samples:
        raise TinypropError(
            f"{root}: split {split!r} is empty; add images (or a {HOLDOUT_FILE} for the holdout)"
        )
    images = []
    for s in samples:
        rgb = fit_to_size(read_rgb(s.path), size)
        images.append(apply_shift(shift or "none", rgb, s.name))
    labels = np.array([s.label for s in samples], dtype=np.int64)
    return np.stack(images), labels, [s.name for s in samples]


def load_split(
    root: str | os.PathLike,
    split: str,
    scale: float,
    zero_point: int,
    shift: str | None = None,
    size: Sequence[int] = MODEL_SIZE,
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """A split as int8 model inputs: (np.int8 N x H x W x 3, np.int64 labels, file names)."""
    images, labels, names = load_images(root, split, shift, size)
    return quantize_pixels(images, scale, zero_point), labels, names


def _check_rgb(rgb: np.ndarray) -> None:
    if not (isinstance(rgb, np.ndarray) and rgb.dtype == np.uint8 and rgb.ndim == 3):
        got = type(rgb).__name__ if not isinstance(rgb, np.ndarray) else f"{rgb.dtype} {rgb.shape}"
        raise TinypropError(f"image is {got}; expected a uint8 height x width x 3 RGB array")
    if rgb.shape[2] != 3:
        got = f"{rgb.dtype} {rgb.shape}" if isinstance(rgb, np.ndarray) else type(rgb).__name__
        raise TinypropError(f"image is {got}; expected a uint8 height x width x 3 RGB array")


# --- COCO -> VWW ------------------------------------------------------------------------------
# The official Visual Wake Words rule (tensorflow/models research/slim/datasets/
# build_visualwakewords_data_lib.py, `_filter_annotations_list`): an image is "person" if any
# annotation of the person category has `area / (width * height) >= 0.005`, where `area` is the
# annotation's segmentation (mask) area from the JSON, not its bbox, and crowd (iscrowd=1)
# annotations count like any other.
VWW_AREA_THRESHOLD = 0.005


def vww_label(
    annotations: Sequence[dict], image: dict, person_ids: set[int],
    threshold: float = VWW_AREA_THRESHOLD,
) -> int:
    """1 (person) if any person annotation covers at least `threshold` of the image, else 0."""
    image_area = image["width"] * image["height"]
    return int(
        any(
            int(a["category_id"]) in person_ids and a["area"] / image_area >= threshold
            for a in annotations
        )
    )


def holdout_bucket(name: str) -> int:
    """0..99 from the sha256 of a file name: the split rule vww-mini's holdout.txt was made with."""
    return int(hashlib.sha256(name.encode("utf-8")).hexdigest()[:8], 16) % 100


def build_vww_from_coco(
    instances_json: str | os.PathLike,
    images_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    size: int = 96,
    threshold: float = VWW_AREA_THRESHOLD,
    category: str = "person",
    holdout_percent: int = 0,
) -> dict[str, int]:
    """Write a VWW-layout dataset from a COCO instances JSON and its images: each image labelled
    by the official rule on the full image, then center-cropped, resized to size x size and
    saved (write_model_image) as out_dir/{person,non_person}/<name>.jpg. With
    holdout_percent > 0, images whose `holdout_bucket` is below it are listed in holdout.txt.
    Returns the number of images written per class."""
    instances_json, images_dir, out_dir = Path(instances_json), Path(images_dir), Path(out_dir)
    try:
        coco = json.loads(instances_json.read_text())
        images = coco["images"]
        person_ids = {int(c["id"]) for c in coco["categories"] if c["name"] == category}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TinypropError(
            f"{instances_json}: not a readable COCO instances JSON ({exc!r}); pass "
            "annotations/instances_<split>.json from COCO"
        ) from exc
    if not person_ids:
        raise TinypropError(
            f"{instances_json}: no category named {category!r}; pass a COCO instances JSON"
        )
    by_image: dict[int, list[dict]] = {}
    for ann in coco.get("annotations", []):
        by_image.setdefault(ann["image_id"], []).append(ann)
    for c in CLASSES:
        (out_dir / c).mkdir(parents=True, exist_ok=True)
    counts = dict.fromkeys(CLASSES, 0)
    holdout = []
    for image in images:
        src = images_dir / image["file_name"]
        if not src.exists():
            raise TinypropError(
                f"{src}: image listed in {instances_json.name} is missing; pass the images folder "
                "that matches the annotations"
            )
        label = vww_label(by_image.get(image["id"], []), image, person_ids, threshold)
        name = Path(image["file_name"]).stem + ".jpg"
        write_model_image(src, out_dir / CLASSES[label] / name, (size, size))
        counts[CLASSES[label]] += 1
        if holdout_bucket(name) < holdout_percent:
            holdout.append(name)
    if holdout_percent > 0:
        (out_dir / HOLDOUT_FILE).write_text("".join(n + "\n" for n in sorted(holdout)))
    return counts
