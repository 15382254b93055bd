"""The virtual camera: frames from image files (or one multi-frame image: an animated GIF or
PNG, a multi-page TIFF), each converted to what a chosen sensor sends (its size and pixel
format), and labels from a script; written as the files the emulated and host boards play
(boards/common/vcamera.h: tinyprop.camera, tinyprop.labels).

    cam = read_frames(Path("frames/"), camera_mode("qcif-gray"))
    labels = read_label_script(Path("labels.csv"), cam.names, ("non_person", "person"))
    write_camera(workdir, cam, labels, wait_host=True)

A photo becomes a frame as a sensor would see the scene: the centred window of the sensor's
aspect, area-averaged to its size (tinyprop.data.image.fit_image), then encoded in its format.
A raw frame file (.raw, .bin: the sensor's bytes as they are) is taken as it is.
"""

from __future__ import annotations

import csv
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..data.image import decode_frame, encode_frame, fit_image
from ..errors import TinypropError

CAMERA_FILE = "tinyprop.camera"
LABELS_FILE = "tinyprop.labels"
MAGIC = 0x4D435054  # "TPCM"
HEADER = struct.Struct("<IHHBBHI")  # magic, width, height, format, flags, reserved, count
WAIT_HOST = 0x2  # TP_CAMERA_WAIT_HOST
LIVE = 0x4  # TP_VCAMERA_LIVE: frames still being added
DONE = 0x8  # TP_VCAMERA_DONE: no more will be
NO_LABEL = 0xFF
FORMAT_CODES = {"gray8": 0, "rgb888": 1, "rgb565be": 2}  # tp_image_format
PIXEL_BYTES = {"gray8": 1, "rgb888": 3, "rgb565be": 2}
# The sensor modes tinyprop learn plays: (width, height, format). QCIF is the OV7675's on the
# Nano 33 BLE Sense kit, 96x96 and QQVGA the esp32-camera's FRAMESIZE_96X96 and _QQVGA.
MODES = {
    "qcif-gray": (176, 144, "gray8"), "qcif-rgb565": (176, 144, "rgb565be"),
    "qqvga-gray": (160, 120, "gray8"), "qqvga-rgb565": (160, 120, "rgb565be"),
    "96-gray": (96, 96, "gray8"), "96-rgb565": (96, 96, "rgb565be"),
    "96-rgb888": (96, 96, "rgb888"),
}
DEFAULT_MODE = "96-rgb565"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".ppm", ".pgm", ".webp")
MULTI_FRAME_SUFFIXES = (".gif", ".png", ".apng", ".tif", ".tiff", ".webp")
RAW_SUFFIXES = (".raw", ".bin")


@dataclass(frozen=True)
class CameraMode:
    name: str
    width: int
    height: int
    format: str  # a tinyprop.data.image.FRAME_FORMATS name

    @property
    def frame_bytes(self) -> int:
        return self.width * self.height * PIXEL_BYTES[self.format]

    @property
    def channels(self) -> int:
        return 1 if self.format == "gray8" else 3


def camera_mode(name: str, flag: str = "--format") -> CameraMode:
    """The sensor mode `name` (given as `flag`); a one-line error listing the modes for
    another."""
    if name not in MODES:
        raise TinypropError(f"{flag} {name}: unsupported camera format; use one of "
                            f"{', '.join(MODES)}")
    return CameraMode(name, *MODES[name])


@dataclass(frozen=True)
class Frames:
    """A camera's frames: `raw[i]` is frame i's bytes as the sensor sends them; `names[i]` the
    name a label script gives it (its file name, or its index in a multi-frame file)."""

    mode: CameraMode
    raw: tuple[bytes, ...]
    names: tuple[str, ...]

    def pixels(self, i: int) -> np.ndarray:
        """Frame i as uint8 H x W x C, as the board's tp_image_fit reads it."""
        m = self.mode
        return decode_frame(self.raw[i], m.width, m.height, m.format)


def sensor_frame(rgb: np.ndarray, mode: CameraMode) -> bytes:
    """What a sensor in `mode` sends for a scene photographed as `rgb` (uint8 H x W x 3)."""
    return encode_frame(fit_image(rgb, (mode.height, mode.width)), mode.format)


def _photo(path: Path) -> np.ndarray:
    from ..data.datasets import read_rgb
    return read_rgb(path)


def _multi_frame(path: Path) -> list[np.ndarray]:
    from PIL import Image, ImageSequence
    try:
        with Image.open(path) as img:
            return [np.asarray(f.convert("RGB"), np.uint8) for f in ImageSequence.Iterator(img)]
    except (OSError, ValueError) as exc:
        raise TinypropError(f"{path}: cannot decode its frames ({exc}); give a folder of images "
                            "or an animated GIF/PNG or a multi-page TIFF") from None


def read_frames(source: Path, mode: CameraMode, shift: str = "none") -> Frames:
    """The frames of `source`: a folder of image files (and raw frame files) in name order, or
    one multi-frame image file, each converted to `mode`'s frames; `shift` (a camera shift of
    tinyprop.data.shifts) applied to each photo first."""
    from ..data.shifts import apply_shift
    source = Path(source)
    if source.is_dir():
        files = sorted(p for p in source.iterdir()
                       if p.suffix.lower() in IMAGE_SUFFIXES + RAW_SUFFIXES)
        named = [(p.name, p) for p in files]
    elif source.is_file() and source.suffix.lower() in MULTI_FRAME_SUFFIXES:
        named = [(str(i), img) for i, img in enumerate(_multi_frame(source))]
    else:
        raise TinypropError(f"--camera {source}: no such folder or multi-frame image; give a "
                            "folder of PNG/JPEG frames or an animated GIF/PNG")
    if not named:
        raise TinypropError(f"--camera {source}: no image files in it (PNG, JPEG, or raw frames "
                            f"{'/'.join(RAW_SUFFIXES)})")
    raw = []
    for name, item in named:
        if isinstance(item, Path) and item.suffix.lower() in RAW_SUFFIXES:
            data = item.read_bytes()
            if len(data) != mode.frame_bytes:
                raise TinypropError(
                    f"{item}: a raw frame of {len(data)} bytes, but a {mode.name} frame has "
                    f"{mode.frame_bytes} ({mode.width}x{mode.height} {mode.format}); give "
                    "--format of the sensor that made it")
            raw.append(data)
            continue
        rgb = _photo(item) if isinstance(item, Path) else item
        raw.append(sensor_frame(apply_shift(shift, rgb, name) if shift != "none" else rgb, mode))
    return Frames(mode, tuple(raw), tuple(name for name, _ in named))


def read_label_script(path: Path, names: Sequence[str], classes: Sequence[str]) -> list[int]:
    """Per frame, its class index from the script `path` (CSV lines `frame,label`: a frame's
    name and a class name or index; an optional header line), NO_LABEL for frames it does not
    list. Every bad line is a one-line error naming it and the fix."""
    index = {name: i for i, name in enumerate(names)}
    labels = [NO_LABEL] * len(names)
    try:
        rows = list(csv.reader(path.read_text().splitlines()))
    except (OSError, UnicodeDecodeError) as exc:
        raise TinypropError(f"--labels {path}: cannot read it ({exc})") from None
    for line, row in enumerate(rows, 1):
        if not row or row[0].strip().startswith("#"):
            continue
        if line == 1 and [c.strip() for c in row] == ["frame", "label"]:
            continue
        where = f"--labels {path} line {line}"
        if len(row) != 2:
            raise TinypropError(f"{where}: expected `frame,label`, got {','.join(row)!r}")
        frame, label = row[0].strip(), row[1].strip()
        if frame not in index:
            raise TinypropError(f"{where}: no frame named {frame!r} in the camera's frames "
                                "(file names, or indices of a multi-frame file)")
        if label in classes:
            k = list(classes).index(label)
        elif label.isdigit():
            k = int(label)
            if k >= len(classes):
                raise TinypropError(f"{where}: label {k} is out of range: the model has "
                                    f"{len(classes)} classes (0 to {len(classes) - 1})")
        else:
            raise TinypropError(f"{where}: class {label!r} is not one of the model's "
                                f"({', '.join(classes)}); give a class name or index")
        labels[index[frame]] = k
    return labels


def write_camera(workdir: Path, frames: Frames, labels: Sequence[int] | None,
                 wait_host: bool = True, live: bool = False) -> None:
    """The virtual camera's files in `workdir` (boards/common/vcamera.h); no labels file when
    `labels` is None (frames with no label: the host labels them, or none are). `live`: no
    frame yet, LiveCamera adds them."""
    m = frames.mode
    flags = (WAIT_HOST if wait_host else 0) | (LIVE if live else 0)
    head = HEADER.pack(MAGIC, m.width, m.height, FORMAT_CODES[m.format], flags, 0,
                       0 if live else len(frames.raw))
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / CAMERA_FILE).write_bytes(head + (b"" if live else b"".join(frames.raw)))
    label_file = workdir / LABELS_FILE
    if labels is None:
        label_file.unlink(missing_ok=True)
    else:
        label_file.write_bytes(bytes(int(k) & 0xFF for k in labels))


class LiveCamera:
    """Plays `frames` into a live camera file (write_camera(live=True)) at `fps` frames a
    second on a thread, as a sensor delivers them while a person watches and labels; then
    marks the camera done."""

    def __init__(self, workdir: Path, frames: Frames, fps: float):
        import threading
        self.path, self.frames, self.period = workdir / CAMERA_FILE, frames, 1.0 / fps
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._play, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _play(self) -> None:
        count_at = HEADER.size - 4
        with open(self.path, "r+b") as f:
            for i, raw in enumerate(self.frames.raw):
                if self.stop.wait(self.period if i else 0.0):
                    break
                f.seek(0, 2)
                f.write(raw)
                f.flush()
                f.seek(count_at)
                f.write(struct.pack("<I", i + 1))  # the frame is whole before it counts
                f.flush()
            self.stop.wait(self.period)  # time to label the last one
            f.seek(9)
            flags = f.read(1)[0]
            f.seek(9)
            f.write(bytes([flags | DONE]))
