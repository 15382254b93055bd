"""Datasets of any classification task, and the model's input preprocessing.

A dataset is a folder with one sub-folder a class (any number; a classifier trains on two or
more, an autoencoder on one): the label of a
sample is the index of its folder's name among the sorted folder names, as Keras'
`image_dataset_from_directory` (and the MLPerf VWW models, trained with `flow_from_directory`:
0 = non_person, 1 = person) number them. A `classes.txt` (one folder name a line) names the
class folders and their order instead; the MLPerf VWW layout (`person/` and `non_person/`) is
read as those two classes whatever other folders sit beside them (vww-mini's `originals/`).

A class folder holds either images or `.npy` feature files, never both. Images are decoded,
centre-cropped to the model's aspect ratio and resized to its input (`fit_rgb`: the integer
rule a board repeats on its camera frames, data/image.py); a model with one input channel gets
their luma (`to_gray`); pixels become the model's real input by its
pixel range (PIXEL_RANGES: 0:1 = pixel / 255, 0:255 = pixel, -1:1 = pixel / 127.5 - 1; for an
int8 model picked from its input quantization, `input_pixels`), then are quantized. A
`.npy` is one sample (audio MFCCs, an IMU window) of the input's shape, or flat: real values,
quantized with the model's input scale and zero point, or int8 already quantized. A dataset may
also be one `.npz` file with `x` (samples) and `y` (class indices), optionally `classes`.

The holdout split is the files named in `holdout.txt` (one bare file name a line), or, with
`holdout=0.3`, a seeded 30 % of every class (the same files in every run: `holdout_split`);
every other sample is train.

Decoding all 397 vww-mini JPEGs takes about 0.13 s on the 2-core dev machine, so there is no cache.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

from ..errors import TinypropError
from .image import crop_window, fit_image, to_gray
from .shifts import apply_shift

# The VWW task's classes (vww-mini's folders, sorted): the labels the MLPerf model was trained on.
CLASSES = ("non_person", "person")
SPLITS = ("train", "holdout", "all")
HOLDOUT_FILE = "holdout.txt"
CLASSES_FILE = "classes.txt"  # optional: the class folders in label order, one a line
HOLDOUT_SEED = 0  # the seed of a fractional holdout: train and eval must draw the same split
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp"}
FEATURE_SUFFIX = ".npy"
MODEL_SIZE = (96, 96)  # (height, width) of the MLPerf VWW model input
# The real value x a uint8 pixel p is to a model, by the range the model was trained on:
# name -> (lowest, highest) x, reached at p = 0 and p = 255.
PIXEL_RANGES = {"0:1": (0.0, 1.0), "0:255": (0.0, 255.0), "-1:1": (-1.0, 1.0)}
DEFAULT_PIXELS = "0:1"  # Keras' rescale=1/255: the MLPerf VWW model, and a float model's default
PIXELS_HELP = ("the real value a pixel is to the model: 0:1 (pixel/255), 0:255 (the raw pixel) "
               "or -1:1 (pixel/127.5 - 1); default: the range an int8 model's input "
               f"quantization covers best, {DEFAULT_PIXELS} for a float model")


@dataclass(frozen=True)
class Sample:
    path: Path  # the file; for a .npz dataset the .npz itself
    label: int  # index into the dataset's classes
    split: str  # "train" or "holdout"
    row: int = -1  # the sample's row in a .npz dataset's arrays

    @property
    def name(self) -> str:
        return self.path.name if self.row < 0 else f"{self.path.name}[{self.row}]"


@dataclass(frozen=True)
class Dataset:
    root: Path
    classes: tuple[str, ...]  # the label's names: sorted folder names, or the .npz's
    samples: tuple[Sample, ...]  # sorted by (class, file name): a stable order everywhere
    kind: str  # "images", "features" (.npy files) or "arrays" (one .npz)
    x: np.ndarray | None = field(default=None, repr=False, compare=False)  # a .npz's samples

    def split(self, name: str) -> list[Sample]:
        """The samples of split `name`: "train", "holdout" or "all"."""
        if name not in SPLITS:
            raise TinypropError(f"split {name!r} is unknown; use one of {', '.join(SPLITS)}")
        return [s for s in self.samples if name == "all" or s.split == name]


def load_dataset(root: str | os.PathLike, holdout: float | None = None,
                 classes: Sequence[str] | None = None) -> Dataset:
    """Index a dataset: a folder with a sub-folder a class (optional `holdout.txt`), or a .npz
    file; `holdout` (a fraction in (0, 1)) draws the holdout split instead (holdout_split).
    `classes` names the class folders in label order (a model's class names); by default they
    are _class_folders'."""
    root = Path(root)
    if holdout is not None and not 0.0 < holdout < 1.0:
        raise TinypropError(f"--holdout {holdout}: not a fraction; pass a value between 0 and 1, "
                            "e.g. 0.3")
    if root.is_file() and root.suffix == ".npz":
        return _load_npz(root, holdout)
    if not root.is_dir():
        raise TinypropError(f"{root}: dataset folder not found; pass {_layout()}")
    classes = _class_folders(root, classes)
    files = {c: sorted(p for p in (root / c).iterdir()
                       if p.suffix.lower() in IMAGE_SUFFIXES | {FEATURE_SUFFIX})
             for c in classes}
    empty = [c for c in classes if not files[c]]
    if empty:
        raise TinypropError(
            f"{root / empty[0]}: no samples (images {'/'.join(sorted(IMAGE_SUFFIXES))}, or "
            f"{FEATURE_SUFFIX} features); add samples of class {empty[0]!r} or remove the folder"
        )
    kinds = {"features" if p.suffix == FEATURE_SUFFIX else "images"
             for c in classes for p in files[c]}
    if len(kinds) > 1:
        raise TinypropError(f"{root}: holds both images and {FEATURE_SUFFIX} files; a dataset "
                            "is one or the other: move one kind to its own dataset folder")
    names = [(label, p) for label, c in enumerate(classes) for p in files[c]]
    if holdout is not None:
        held = holdout_split([(label, p.name) for label, p in names], holdout)
    else:
        held = _read_holdout(root, {p.name for _, p in names})
    samples = tuple(Sample(p, label, "holdout" if p.name in held else "train")
                    for label, p in names)
    return Dataset(root, classes, samples, kinds.pop())


def _class_folders(root: Path, classes: Sequence[str] | None) -> tuple[str, ...]:
    """The class folders of a dataset folder in label order: `classes` when given; else the
    lines of its classes.txt; else, for the MLPerf VWW layout (person/ and non_person/, which
    vww-mini keeps beside other folders such as originals/), those two; else every sub-folder,
    sorted (Keras' image_dataset_from_directory)."""
    if classes is None and (root / CLASSES_FILE).is_file():
        classes = [n.strip() for n in (root / CLASSES_FILE).read_text().splitlines() if n.strip()]
    if classes is None and all((root / c).is_dir() for c in CLASSES):
        classes = CLASSES
    if classes is None:
        classes = sorted(p.name for p in root.iterdir()
                         if p.is_dir() and not p.name.startswith("."))
    missing = [c for c in classes if not (root / c).is_dir()]
    if missing:
        raise TinypropError(f"{root}: no folder {missing[0]}/ for class {missing[0]!r}; make "
                            "one with its samples, or name the classes the folders hold")
    if not classes:  # one class is a dataset (an autoencoder's normal); a classifier's check
        raise TinypropError(f"{root}: no class folder; a dataset needs a folder a class "
                            f"({_layout()})")
    if len(set(classes)) != len(classes):
        raise TinypropError(f"{root}: classes {', '.join(classes)} name a folder twice; name "
                            "each class once")
    return tuple(classes)


def _load_npz(path: Path, holdout: float | None) -> Dataset:
    x, y, classes = _read_npz(path)
    held = holdout_split([(int(v), str(i)) for i, v in enumerate(y)], holdout) if holdout else set()
    samples = tuple(Sample(path, int(y[i]), "holdout" if str(i) in held else "train", i)
                    for i in np.argsort(y, kind="stable"))
    return Dataset(path, classes, samples, "arrays", x)  # read once: x may be large


def _read_npz(path: Path) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """(x, y, class names) of a .npz dataset, checked."""
    try:
        with np.load(path, allow_pickle=False) as z:
            if "x" not in z or "y" not in z:
                raise TinypropError(f"{path}: has {', '.join(z.files) or 'no arrays'}; a .npz "
                                    "dataset holds x (the samples) and y (their class indices)")
            x, y = z["x"], z["y"]
            names = tuple(str(n) for n in z["classes"]) if "classes" in z else None
    except (OSError, ValueError) as exc:
        raise TinypropError(f"{path}: not a readable .npz ({exc}); save it with "
                            "numpy.savez(path, x=..., y=...)") from exc
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer) or len(y) != len(x) or len(y) == 0:
        raise TinypropError(f"{path}: y is {y.dtype} {y.shape} for x {x.shape}; y must hold one "
                            "integer class index a sample of x")
    if y.min() < 0:
        raise TinypropError(f"{path}: y holds {int(y.min())}; class indices start at 0")
    n = int(y.max()) + 1 if names is None else len(names)
    if int(y.max()) >= n:
        raise TinypropError(f"{path}: y holds {int(y.max())} but classes names {n}; name every "
                            "class, or drop classes")
    return x, y.astype(np.int64), names or tuple(str(i) for i in range(n))


def holdout_split(items: Sequence[tuple[int, str]], fraction: float) -> set[str]:
    """The names held out of (label, name) items: in every class, fraction * n of its names
    rounded half up (at least one where the class has two or more, never all), drawn by a
    generator seeded with HOLDOUT_SEED and the label from the class's names in sorted order, so
    the split depends only on the files."""
    held: set[str] = set()
    for label in sorted({lab for lab, _ in items}):
        names = sorted(n for lab, n in items if lab == label)
        k = min(max(int(fraction * len(names) + 0.5), 1 if len(names) > 1 else 0), len(names) - 1)
        rng = np.random.default_rng([HOLDOUT_SEED, label])
        held.update(names[i] for i in rng.permutation(len(names))[:k])
    return held


def _layout() -> str:
    return ("a folder with one sub-folder of images or .npy files a class (optional "
            "holdout.txt), or a .npz with x and y")


def _read_holdout(root: Path, names: set[str]) -> set[str]:
    path = root / HOLDOUT_FILE
    if not path.exists():
        return set()
    listed = {line.strip() for line in path.read_text().splitlines() if line.strip()}
    unknown = sorted(listed - names)
    if unknown:
        raise TinypropError(
            f"{path}: lists {len(unknown)} file(s) not in the class folders (first: "
            f"{unknown[0]}); list bare file names of samples in the dataset"
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
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        raise TinypropError(f"{path}: cannot decode image ({exc}); remove or replace it") from exc


def lanczos_fit(rgb: np.ndarray, size: Sequence[int] = MODEL_SIZE) -> np.ndarray:
    """Center-crop to the aspect ratio of size=(height, width) (image.crop_window), then resize
    with Pillow LANCZOS: how vww-mini's photos were made from their COCO originals. Model
    inputs are fitted by fit_image instead, the rule a board repeats."""
    _check_rgb(rgb)
    top, left, ch, cw = crop_window(rgb.shape[0], rgb.shape[1], size)
    crop = rgb[top : top + ch, left : left + cw]
    if crop.shape[:2] == tuple(size[:2]):
        return np.ascontiguousarray(crop)
    return np.asarray(Image.fromarray(crop).resize((int(size[1]), int(size[0])), Image.LANCZOS),
                      dtype=np.uint8)


def fit_rgb(rgb: np.ndarray, size: Sequence[int]) -> np.ndarray:
    """A uint8 RGB image fitted to (height, width) as a board fits a camera frame
    (image.fit_image, tp_image_fit)."""
    _check_rgb(rgb)
    return fit_image(rgb, size[:2])


def write_model_image(
    src: str | os.PathLike, dest: str | os.PathLike, size: Sequence[int] = MODEL_SIZE
) -> None:
    """The image file src center-cropped and resized (lanczos_fit) to size, saved as an RGB JPEG
    of quality 95: how vww-mini's photos were made from their COCO originals. The original's
    JPEG comment, if any, is kept (Pillow >= 9.4 carries it through crop and resize, and
    vww-mini's files have it), so every vww-mini file is reproduced byte for byte."""
    rgb, comment = _decode(src)
    extra = {"comment": comment} if comment else {}
    Image.fromarray(lanczos_fit(rgb, size)).save(dest, format="JPEG", quality=95, **extra)


def quantize_real(x: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """Real values -> int8 as TFLite's QUANTIZE does: q = round(x / scale) + zero_point, in
    float32, rounding half away from zero, clamped to int8."""
    v = np.asarray(x, dtype=np.float32) / np.float32(scale)
    rounded = np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))  # std::round semantics
    return np.clip(rounded.astype(np.int32) + int(zero_point), -128, 127).astype(np.int8)


def input_pixels(scale: float, zero_point: int) -> str:
    """The pixel range (a PIXEL_RANGES name) of a model whose int8 input has `scale` and
    `zero_point`: the one that overlaps the real range the int8 input covers,
    (-128 - zp) * scale .. (127 - zp) * scale, most as intersection over union (the first in
    PIXEL_RANGES on a tie), in float32. MLPerf VWW (1/255, -128: 0..1) -> 0:1; MLPerf
    ResNet-8 (1.0, -128: 0..255) -> 0:255; a float model quantized on pixels of one range gets
    that range back."""
    # in float32, as a board repeats it (tp_input_pixels: no double on a Cortex-M4)
    f32 = np.float32
    lo, hi = f32(-128 - zero_point) * f32(scale), f32(127 - zero_point) * f32(scale)

    def overlap(name: str) -> np.float32:
        a, b = (f32(v) for v in PIXEL_RANGES[name])
        return max(f32(0.0), min(hi, b) - max(lo, a)) / (max(hi, b) - min(lo, a))

    return max(PIXEL_RANGES, key=overlap)  # max keeps the first of equals


def pixel_range(pixels: str | None, scale: float | None = None,
                zero_point: int | None = None) -> str:
    """`pixels` checked (--pixels); None: the int8 input's own (input_pixels), or
    DEFAULT_PIXELS without one (a float model)."""
    if pixels is None:
        return DEFAULT_PIXELS if scale is None else input_pixels(scale, int(zero_point or 0))
    if pixels not in PIXEL_RANGES:
        raise TinypropError(f"--pixels {pixels}: unknown pixel range; use one of "
                            f"{', '.join(PIXEL_RANGES)}")
    return pixels


def pixels_to_real(pixels_uint8: np.ndarray, pixels: str = DEFAULT_PIXELS) -> np.ndarray:
    """uint8 pixels -> the float32 real input of a model trained on pixel range `pixels`."""
    p = pixels_uint8.astype(np.float32)
    if pixels == "0:1":
        return p / np.float32(255.0)
    if pixels == "-1:1":
        return p / np.float32(127.5) - np.float32(1.0)
    return p


def quantize_pixels(rgb: np.ndarray, scale: float, zero_point: int,
                    pixels: str | None = None) -> np.ndarray:
    """uint8 pixels -> int8 model input: the real value of pixel range `pixels` (None: the
    input's own, input_pixels) quantized (quantize_real). For 0:1 with scale 1/255 and zero
    point -128 this is exactly pixel - 128."""
    pixels = pixel_range(pixels, scale, zero_point)
    return quantize_real(pixels_to_real(rgb, pixels), scale, zero_point)


def _shape(shape: Sequence[int]) -> tuple[int, int, int]:
    """(height, width, channels) of a model input shape given as (H, W) (RGB) or (H, W, C)."""
    return (int(shape[0]), int(shape[1]), int(shape[2]) if len(shape) > 2 else 3)


def to_model_input(
    image_rgb_uint8: np.ndarray,
    scale: float,
    zero_point: int,
    size: Sequence[int] = MODEL_SIZE,
    pixels: str | None = None,
) -> np.ndarray:
    """One RGB uint8 image of any size -> int8 (height, width, channels) model input; `size` is
    (H, W) for an RGB model or (H, W, C) with C 3 or 1 (luma); `pixels` as quantize_pixels."""
    h, w, c = _shape(size)
    return quantize_pixels(_channels(fit_rgb(image_rgb_uint8, (h, w)), c), scale, zero_point,
                           pixels)


def _channels(rgb: np.ndarray, c: int, what: str = "the model") -> np.ndarray:
    if c == 3:
        return rgb
    if c == 1:
        return to_gray(rgb)
    raise TinypropError(f"{what}: takes {c} channels; images fit models with 3 (RGB) or 1 "
                        "(grayscale) input channels: give it .npy features instead")


def load_images(
    root: str | os.PathLike,
    split: str,
    shift: str | None = None,
    size: Sequence[int] = MODEL_SIZE,
    holdout: float | None = None,
    classes: Sequence[str] | None = None,
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Decode a split of an image dataset: (uint8 N x H x W x C at `size`, (H, W) or (H, W, C),
    int64 labels, file names). The sensor shift, if any, acts on the RGB image at model size,
    keyed by file name (order-independent), before a grayscale model's luma is taken."""
    return _images(load_dataset(root, holdout, classes), split, shift, size)


def _images(ds: Dataset, split: str, shift: str | None,
            size: Sequence[int]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    if ds.kind != "images":
        raise TinypropError(f"{ds.root}: holds "
                            f"{FEATURE_SUFFIX if ds.kind == 'features' else '.npz'} samples, not "
                            "images; this needs an image dataset")
    samples = _nonempty(ds, split)
    h, w, c = _shape(size)
    images = []
    for s in samples:
        rgb = fit_rgb(read_rgb(s.path), (h, w))
        images.append(_channels(apply_shift(shift or "none", rgb, s.name), c))
    labels = np.array([s.label for s in samples], dtype=np.int64)
    return np.stack(images), labels, [s.name for s in samples]


def _nonempty(ds: Dataset, split: str) -> list[Sample]:
    samples = ds.split(split)
    if not samples:
        raise TinypropError(
            f"{ds.root}: split {split!r} is empty; add samples (or a {HOLDOUT_FILE}, or pass "
            "--holdout 0.3, for the holdout)"
        )
    return samples


def load_split(
    root: str | os.PathLike,
    split: str,
    scale: float,
    zero_point: int,
    shift: str | None = None,
    size: Sequence[int] = MODEL_SIZE,
    holdout: float | None = None,
    classes: Sequence[str] | None = None,
    pixels: str | None = None,
    camera: str | None = None,
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """A split as int8 model inputs: (np.int8 N x H x W x C, np.int64 labels, sample names), for
    a model whose input is `size` ((H, W) RGB or (H, W, C)) quantized with `scale` and
    `zero_point`. Images are fitted (load_images) and quantized in pixel range `pixels` (None:
    the input's own, input_pixels); with `camera` (a tinyprop learn --format, e.g. qcif-gray)
    each fitted image is first what that sensor would send of it, fitted again as a board fits
    its frames. Features (.npy files, a .npz) must have the input's shape (or its size) and are
    quantized as real values, or taken as they are if int8. `holdout` and `classes` as
    load_dataset takes them."""
    pixels = pixel_range(pixels, scale, zero_point)  # checked before any image is decoded
    ds = load_dataset(root, holdout, classes)
    if ds.kind == "images":
        images, labels, names = _images(ds, split, shift, size)
        if camera is not None:
            images = as_camera_sees(images, camera)
        return quantize_pixels(images, scale, zero_point, pixels), labels, names
    if camera is not None:
        raise TinypropError(f"--camera {camera}: {ds.root} holds features, not images; drop "
                            "--camera")
    xs, labels, names = _features(ds, split, shift, size)
    return (np.stack([x if x.dtype == np.int8 else quantize_real(x, scale, zero_point)
                      for x in xs]), labels, names)


def load_real(root: str | os.PathLike, split: str, shift: str | None = None,
              size: Sequence[int] = MODEL_SIZE, holdout: float | None = None,
              classes: Sequence[str] | None = None, pixels: str | None = None) -> np.ndarray:
    """A split as the real-valued float32 inputs a float model takes (N x `size`): images in
    pixel range `pixels` (None: DEFAULT_PIXELS), features as they are (int8 features, already
    quantized, are refused)."""
    pixels = pixel_range(pixels)
    ds = load_dataset(root, holdout, classes)
    if ds.kind == "images":
        return pixels_to_real(_images(ds, split, shift, size)[0], pixels)
    xs, _, names = _features(ds, split, shift, size)
    for x, name in zip(xs, names, strict=True):
        if x.dtype == np.int8:
            raise TinypropError(f"{name}: int8 (already quantized) features cannot calibrate a "
                                "float model; give the real values (float32)")
    return np.stack(xs).astype(np.float32)


def as_camera_sees(images: np.ndarray, camera: str) -> np.ndarray:
    """uint8 N x H x W x C images as a board in `camera` mode (tinyprop.learn.camera.MODES)
    makes them its model's input: the sensor's frame of each (size, format: a gray sensor keeps
    luma, RGB565 drops low bits), fitted back to H x W x C (tp_image_fit's rule)."""
    from ..learn.camera import camera_mode, sensor_frame
    from .image import decode_frame, fit_image

    mode = camera_mode(camera, "--camera")
    n, h, w, c = images.shape
    rgb = images if c == 3 else np.repeat(images, 3, axis=-1)
    return np.stack([fit_image(decode_frame(sensor_frame(x, mode), mode.width, mode.height,
                                            mode.format), (h, w), c) for x in rgb])


def _features(ds: Dataset, split: str, shift: str | None,
              size: Sequence[int]) -> tuple[list[np.ndarray], np.ndarray, list[str]]:
    """The feature samples of a split at the input's shape: int8 as stored, others as float32."""
    if shift not in (None, "none"):
        raise TinypropError(f"--shift {shift}: camera shifts act on images; {ds.root} holds "
                            "features: drop --shift")
    samples = _nonempty(ds, split)
    shape = tuple(int(d) for d in size)
    x = ds.x
    out = [_feature(x[s.row] if x is not None else _read_npy(s.path), shape, s.name)
           for s in samples]
    labels = np.array([s.label for s in samples], dtype=np.int64)
    return out, labels, [s.name for s in samples]


def _read_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise TinypropError(f"{path}: not a readable .npy ({exc}); save each sample with "
                            "numpy.save") from exc


def _feature(v: np.ndarray, shape: tuple[int, ...], name: str) -> np.ndarray:
    """One feature sample checked and at the input's shape: int8 as it is (already quantized),
    real values as float32."""
    size = int(np.prod(shape))
    if v.size != size or v.ndim == 0 or (v.shape != shape and v.ndim != 1):
        want = "x".join(map(str, shape))
        raise TinypropError(f"{name}: a {v.dtype} sample of shape {'x'.join(map(str, v.shape))};"
                            f" the model takes {want} ({size} values): save samples of that "
                            "shape, or flat")
    if v.dtype == np.int8:
        return v.reshape(shape)
    if not (np.issubdtype(v.dtype, np.floating) or np.issubdtype(v.dtype, np.integer)):
        raise TinypropError(f"{name}: samples of {v.dtype}; give real values (float) or int8 "
                            "quantized with the model's input scale and zero point")
    if not np.all(np.isfinite(v)):
        raise TinypropError(f"{name}: holds NaN or infinite values; fix the sample")
    return v.reshape(shape).astype(np.float32)


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
