"""A frame fitted to the model's input is the same bytes on a board (tp_image_fit, the real C
core) and on the host (tinyprop.data.image.fit_image, what train and eval feed a model): crops,
shrink factors, upscaling, channel conversions, padded rows, gray, RGB888 and RGB565 frames;
and the int8 input the same (tp_pixel_table and tp_image_input = datasets.quantize_pixels) in
every pixel range. And the rule is a fair resize:
it is the exact area average of the window, and on vww-mini's COCO originals it lands within a
few levels of the photos (Pillow LANCZOS crops saved as JPEG)."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np
import pytest
from tinyprop.data.datasets import PIXEL_RANGES, quantize_pixels, read_rgb, to_model_input
from tinyprop.data.image import (
    FRAME_FORMATS,
    _weights,
    crop_window,
    decode_frame,
    encode_frame,
    fit_image,
)
from tinyprop.engines.native import load_library, status_name


class Frame(ctypes.Structure):
    _fields_ = [("pixels", ctypes.c_void_p), ("width", ctypes.c_uint32),
                ("height", ctypes.c_uint32), ("format", ctypes.c_uint32),
                ("stride", ctypes.c_uint32)]


def frame_of(raw: bytes, width: int, height: int, fmt: str, pad: int = 0) -> tuple[Frame, object]:
    """A tp_image of a frame's packed bytes, its rows `pad` bytes longer (and the buffer)."""
    row = len(raw) // height
    rows = np.zeros((height, row + pad), np.uint8)
    rows[:, :row] = np.frombuffer(raw, np.uint8).reshape(height, row)
    return Frame(rows.ctypes.data, width, height, FRAME_FORMATS.index(fmt), row + pad), rows


def c_fit(raw: bytes, width: int, height: int, fmt: str, size: tuple[int, int], channels: int,
          pad: int = 0) -> np.ndarray:
    """tp_image_fit on a frame of `fmt`."""
    frame, _rows = frame_of(raw, width, height, fmt, pad)
    out = np.zeros((size[0], size[1], channels), np.uint8)
    st = load_library().tp_image_fit(ctypes.byref(frame), out.ctypes.data_as(ctypes.c_void_p),
                                     ctypes.c_uint32(size[1]), ctypes.c_uint32(size[0]),
                                     ctypes.c_uint32(channels))
    assert status_name(st) == "TP_OK"
    return out


CASES = [  # (frame H, W), its format, output (H, W), output C
    ((240, 320), "rgb888", (96, 96), 3),    # a QVGA camera: 4:3 cropped, 2.5 pixels an output
    ((480, 640), "rgb888", (96, 96), 1),    # VGA to luma, exactly 5
    ((120, 160), "gray8", (96, 96), 3),     # a gray camera to an RGB model
    ((144, 176), "gray8", (96, 96), 1),     # QCIF grayscale (the Nano 33 BLE Sense's OV7675)
    ((144, 176), "rgb565be", (96, 96), 3),  # QCIF RGB565
    ((96, 96), "rgb565be", (96, 96), 1),    # esp32-camera's FRAMESIZE_96X96, to luma
    ((97, 131), "rgb888", (32, 32), 1),     # odd sizes
    ((50, 40), "rgb888", (96, 96), 3),      # upscaling
    ((96, 96), "rgb888", (96, 96), 3),      # already the size: a copy
    ((120, 96), "gray8", (96, 96), 3),      # a window of the size, cropped: a copy of its rows
    ((96, 128), "rgb565be", (96, 96), 1),   # ... of its columns
    ((60, 200), "rgb888", (49, 10), 1),     # a tall output from a wide frame
]


@pytest.mark.parametrize("shape, fmt, size, channels", CASES)
def test_c_equals_numpy(shape, fmt, size, channels):
    rgb = np.random.default_rng(sum(shape)).integers(0, 256, (*shape, 3), dtype=np.uint8)
    raw = encode_frame(rgb, fmt)
    want = fit_image(decode_frame(raw, shape[1], shape[0], fmt), size, channels)
    assert want.shape == (*size, channels)
    np.testing.assert_array_equal(c_fit(raw, shape[1], shape[0], fmt, size, channels), want)
    np.testing.assert_array_equal(c_fit(raw, shape[1], shape[0], fmt, size, channels, pad=5),
                                  want)


def test_rgb565_widens_its_bits():
    rgb = np.array([[[255, 255, 255], [0, 0, 0], [8, 4, 8], [200, 100, 50]]], np.uint8)
    back = decode_frame(encode_frame(rgb, "rgb565be"), 4, 1, "rgb565be")
    assert back[0, :3].tolist() == [[255, 255, 255], [0, 0, 0], [8, 4, 8]]
    assert back[0, 3].tolist() == [206, 101, 49]  # 25, 25, 6 in 5-6-5 bits


@pytest.mark.parametrize("pixels", list(PIXEL_RANGES))
def test_pixel_table_is_the_hosts_quantization(pixels):
    lib = load_library()
    every = np.arange(256, dtype=np.uint8)
    for scale, zp in ((1 / 255, -128), (1.0, -128), (0.0078125, 0), (0.02, 5), (3e-4, -3)):
        table = np.zeros(256, np.int8)
        st = lib.tp_pixel_table(ctypes.c_uint32(list(PIXEL_RANGES).index(pixels)),
                                ctypes.c_float(scale), ctypes.c_int32(zp),
                                table.ctypes.data_as(ctypes.c_void_p))
        assert status_name(st) == "TP_OK"
        want = quantize_pixels(every, np.float32(scale), zp, pixels)
        np.testing.assert_array_equal(table, want, err_msg=f"{pixels} {scale} {zp}")


def test_frame_input_is_load_splits_input(vww_data_dir):
    """A vww-mini photo sent as a 96x96 RGB888 frame becomes exactly the VWW input train feeds."""
    photo = sorted((vww_data_dir / "person").iterdir())[0]
    rgb = read_rgb(photo)
    lib = load_library()
    table = np.zeros(256, np.int8)
    lib.tp_pixel_table(ctypes.c_uint32(0), ctypes.c_float(np.float32(1 / 255)),
                       ctypes.c_int32(-128), table.ctypes.data_as(ctypes.c_void_p))
    frame, _rows = frame_of(encode_frame(rgb, "rgb888"), 96, 96, "rgb888")
    x = np.zeros((96, 96, 3), np.int8)
    st = lib.tp_image_input(ctypes.byref(frame), table.ctypes.data_as(ctypes.c_void_p),
                            x.ctypes.data_as(ctypes.c_void_p), ctypes.c_uint32(96),
                            ctypes.c_uint32(96), ctypes.c_uint32(3))
    assert status_name(st) == "TP_OK"
    np.testing.assert_array_equal(x, to_model_input(rgb, np.float32(1 / 255), -128))


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


def test_a_large_frame_sums_in_integers():
    """A 720p frame, all 255 (the largest sums) and random: fit_image's float64 sums are the
    integer ones (int64 products here), so rounding sees the same integers."""
    rng = np.random.default_rng(5)
    for img in (np.full((720, 1280, 3), 255, np.uint8),
                rng.integers(0, 256, (720, 1280, 3), dtype=np.uint8)):
        for th, tw in ((96, 96), (144, 176), (49, 10)):
            top, left, ch, cw = crop_window(720, 1280, (th, tw))
            win = img[top : top + ch, left : left + cw].astype(np.int64)
            rows = np.tensordot(_weights(th, ch), win, axes=(1, 0))
            sums = np.tensordot(rows, _weights(tw, cw), axes=(1, 1)).transpose(0, 2, 1)
            want = (sums + ch * cw // 2) // (ch * cw)
            np.testing.assert_array_equal(fit_image(img, (th, tw)), want)


def test_the_numpy_twin_refuses_a_window_under_one_pixel():
    """Where tp_image_fit answers TP_ERR_ARG (a window under one pixel, an empty output), the
    twin raises instead of dividing by zero."""
    for shape, size in (((1, 300, 1), (96, 10)), ((10, 10, 3), (0, 96))):
        with pytest.raises(ValueError, match="has no window of aspect"):
            fit_image(np.zeros(shape, np.uint8), size)


def test_an_image_of_the_size_is_unchanged():
    img = np.random.default_rng(0).integers(0, 256, (96, 96, 3), dtype=np.uint8)
    np.testing.assert_array_equal(fit_image(img, (96, 96)), img)


def test_bad_frames_are_refused():
    lib = load_library()
    out = np.zeros(96 * 96 * 3, np.uint8)
    px = np.zeros(300, np.uint8)
    for frame, (w, h, c) in (
            (Frame(px.ctypes.data, 10, 10, 3, 30), (96, 96, 3)),  # an unknown format
            (Frame(px.ctypes.data, 10, 10, 1, 20), (96, 96, 3)),  # stride shorter than a row
            (Frame(px.ctypes.data, 10, 10, 2, 19), (96, 96, 3)),  # RGB565: 2 bytes a pixel
            (Frame(px.ctypes.data, 10, 10, 0, 10), (96, 96, 4)),  # four output channels
            (Frame(px.ctypes.data, 300, 1, 0, 300), (10, 96, 1)),  # a window under one pixel
            (Frame(px.ctypes.data, 10, 10, 0, 10), (0, 96, 1)),  # an empty output
            (Frame(px.ctypes.data, 65536, 1, 0, 65536), (96, 1, 1)),  # a side over 65535
            (Frame(px.ctypes.data, 4097, 4097, 0, 4097), (96, 96, 1))):  # a window over 2^24
        st = lib.tp_image_fit(ctypes.byref(frame), out.ctypes.data_as(ctypes.c_void_p),
                              ctypes.c_uint32(w), ctypes.c_uint32(h), ctypes.c_uint32(c))
        assert status_name(st) == "TP_ERR_ARG", (w, h, c)
    table = np.zeros(256, np.int8)
    for pixels, scale in ((3, 0.5), (0, 0.0), (0, float("inf")), (0, float("nan"))):
        st = lib.tp_pixel_table(ctypes.c_uint32(pixels), ctypes.c_float(scale), ctypes.c_int32(0),
                                table.ctypes.data_as(ctypes.c_void_p))
        assert status_name(st) == "TP_ERR_ARG", (pixels, scale)


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


def test_input_pixels_is_the_hosts_choice():
    """tp_input_pixels (what a board's camera uses) picks datasets.input_pixels' range for the
    MLPerf inputs, tinyprop-quantized float models' and 2,000 random quantizations."""
    from tinyprop.data.datasets import input_pixels
    lib = load_library()
    lib.tp_input_pixels.restype = ctypes.c_uint32
    lib.tp_input_pixels.argtypes = [ctypes.c_float, ctypes.c_int32]
    names = list(PIXEL_RANGES)
    rng = np.random.default_rng(5)
    cases = [(1 / 255, -128), (1.0, -128), (1 / 127.5, 0), (0.0078125, -1)] + [
        (float(np.float32(10 ** rng.uniform(-4, 1))), int(rng.integers(-128, 128)))
        for _ in range(2000)]
    picks = [names[lib.tp_input_pixels(np.float32(s), z)] for s, z in cases]
    assert picks[:3] == ["0:1", "0:255", "-1:1"]
    assert picks == [input_pixels(np.float32(s), z) for s, z in cases]
    assert set(picks) == set(names)  # every branch taken
