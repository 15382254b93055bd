"""A frame fitted to the model's input is the same bytes on a board (tp_frame_fit, the real C
core) and on the host (tinyprop.data.image.fit_image, what train and eval feed a model): crops,
shrink factors, upscaling, channel conversions and padded rows. And the rule is a fair resize:
it is the exact area average of the window, and on vww-mini's COCO originals it lands within a
few levels of the photos (Pillow LANCZOS crops saved as JPEG)."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np
import pytest
from tinyprop.data.datasets import read_rgb
from tinyprop.data.image import crop_window, fit_image
from tinyprop.engines.native import load_library, status_name


class Frame(ctypes.Structure):
    _fields_ = [("pixels", ctypes.c_void_p), ("width", ctypes.c_uint32),
                ("height", ctypes.c_uint32), ("channels", ctypes.c_uint32),
                ("stride", ctypes.c_uint32)]


def c_fit(img: np.ndarray, size: tuple[int, int], channels: int, pad: int = 0) -> np.ndarray:
    """tp_frame_fit on img (H x W x C uint8), its rows `pad` bytes longer than the pixels."""
    h, w, c = img.shape
    rows = np.zeros((h, w * c + pad), np.uint8)
    rows[:, : w * c] = img.reshape(h, w * c)
    out = np.zeros((size[0], size[1], channels), np.uint8)
    lib = load_library()
    frame = Frame(rows.ctypes.data, w, h, c, w * c + pad)
    st = lib.tp_frame_fit(ctypes.byref(frame), out.ctypes.data_as(ctypes.c_void_p),
                          ctypes.c_uint32(size[1]), ctypes.c_uint32(size[0]),
                          ctypes.c_uint32(channels))
    assert status_name(st) == "TP_OK"
    return out


CASES = [  # (frame H, W, C), output (H, W), output C
    ((240, 320, 3), (96, 96), 3),   # a QVGA camera: 4:3 cropped, k = 2, bilinear 120 -> 96
    ((480, 640, 3), (96, 96), 1),   # VGA to luma, k = 5
    ((120, 160, 1), (96, 96), 3),   # a gray camera to an RGB model
    ((97, 131, 3), (32, 32), 1),    # odd sizes, k = 3
    ((50, 40, 3), (96, 96), 3),     # upscaling, k = 1
    ((96, 96, 3), (96, 96), 3),     # already the size: a copy
    ((60, 200, 3), (49, 10), 1),    # a tall output from a wide frame
]


@pytest.mark.parametrize("shape, size, channels", CASES)
def test_c_equals_numpy(shape, size, channels):
    img = np.random.default_rng(sum(shape)).integers(0, 256, shape, dtype=np.uint8)
    want = fit_image(img, size, channels)
    assert want.shape == (*size, channels)
    np.testing.assert_array_equal(c_fit(img, size, channels), want)
    np.testing.assert_array_equal(c_fit(img, size, channels, pad=5), want)


def test_it_is_the_exact_area_average():
    """Each source pixel of the window repeated (output size) times along each axis makes a
    grid whose (window size) blocks are the output pixels: their plain means, rounded half up."""
    img = np.random.default_rng(7).integers(0, 256, (47, 61, 3), dtype=np.uint8)
    th, tw = 20, 24
    top, left, ch, cw = crop_window(47, 61, (th, tw))
    grid = img[top : top + ch, left : left + cw].repeat(th, 0).repeat(tw, 1).astype(np.int64)
    sums = grid.reshape(th, ch, tw, cw, 3).sum(axis=(1, 3))
    want = (sums + ch * cw // 2) // (ch * cw)
    np.testing.assert_array_equal(fit_image(img, (th, tw)), want)


def test_an_image_of_the_size_is_unchanged():
    img = np.random.default_rng(0).integers(0, 256, (96, 96, 3), dtype=np.uint8)
    np.testing.assert_array_equal(fit_image(img, (96, 96)), img)


def test_bad_frames_are_refused():
    lib = load_library()
    out = np.zeros(96 * 96 * 3, np.uint8)
    px = np.zeros(300, np.uint8)
    for frame, (w, h, c) in (
            (Frame(px.ctypes.data, 10, 10, 2, 20), (96, 96, 3)),  # two channels
            (Frame(px.ctypes.data, 10, 10, 3, 20), (96, 96, 3)),  # stride shorter than a row
            (Frame(px.ctypes.data, 10, 10, 1, 10), (96, 96, 4)),  # four output channels
            (Frame(px.ctypes.data, 300, 1, 1, 300), (10, 96, 1)),  # a window under one pixel
            (Frame(px.ctypes.data, 10, 10, 1, 10), (0, 96, 1))):  # an empty output
        st = lib.tp_frame_fit(ctypes.byref(frame), out.ctypes.data_as(ctypes.c_void_p),
                              ctypes.c_uint32(w), ctypes.c_uint32(h), ctypes.c_uint32(c))
        assert status_name(st) == "TP_ERR_ARG", (w, h, c)


def test_close_to_lanczos_on_real_photos():
    """vww-mini's photos are LANCZOS crops of their COCO originals (then JPEG 95): the integer
    rule gives nearly the same model input."""
    root = Path(os.environ["TINYPROP_ASSETS"]) / "datasets" / "vww-mini"
    rows = (root / "originals.csv").read_text().splitlines()[1:9]
    diffs = []
    for row in rows:
        name, original = row.split(",")[:2]
        photo = next(root.glob(f"*/{name}"))
        fitted = fit_image(read_rgb(root / original), (96, 96))
        diffs.append(np.abs(fitted.astype(int) - read_rgb(photo).astype(int)).mean())
    assert max(diffs) < 8.0, diffs
