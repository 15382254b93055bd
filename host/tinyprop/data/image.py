"""An image fitted to a model's input, in integers a board repeats bit for bit: the NumPy twin of
the firmware's tp_image_fit (firmware/include/tp_image.h, which states the rule), so a photo the
host trains on and a camera frame the board learns from become the same pixels. Camera frames
come as 8-bit gray, RGB888 or RGB565 (FRAME_FORMATS, tp_image_format's order).

    fit_image(rgb, (96, 96))        # uint8 96 x 96 x 3
    fit_image(rgb, (49, 10), 1)     # uint8 49 x 10 x 1 (luma)
    fit_image(decode_frame(raw, 176, 144, "rgb565be"), (96, 96))   # a QCIF RGB565 frame
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

FRAME_FORMATS = ("gray8", "rgb888", "rgb565be")  # tp_image_format: GRAY8, RGB888, RGB565BE
_FRAME_BYTES = {"gray8": 1, "rgb888": 3, "rgb565be": 2}


def encode_frame(rgb: np.ndarray, fmt: str) -> bytes:
    """uint8 H x W x 3 RGB as a sensor in format `fmt` sends it: luma (to_gray), the bytes
    themselves, or RGB565 high byte first (each channel's top 5-6-5 bits)."""
    if fmt == "gray8":
        return to_gray(rgb).tobytes()
    if fmt == "rgb888":
        return np.ascontiguousarray(rgb, np.uint8).tobytes()
    r, g, b = (rgb[..., i].astype(np.uint16) for i in range(3))
    return ((r >> 3) << 11 | (g >> 2) << 5 | (b >> 3)).astype(">u2").tobytes()


def decode_frame(raw: bytes, width: int, height: int, fmt: str) -> np.ndarray:
    """A frame's bytes (rows packed) as uint8 H x W x C, as tp_image_fit reads them: RGB565's
    channels widened to 8 bits by repeating their top bits."""
    px = np.frombuffer(raw, np.uint8, width * height * _FRAME_BYTES[fmt])
    if fmt != "rgb565be":
        return px.reshape(height, width, -1).copy()
    v = px.reshape(height, width, 2).astype(np.uint16)
    r, g, b = v[..., 0] >> 3, (v[..., 0] & 7) << 3 | v[..., 1] >> 5, v[..., 1] & 31
    return np.stack([r << 3 | r >> 2, g << 2 | g >> 4, b << 3 | b >> 2], -1).astype(np.uint8)


def to_gray(rgb: np.ndarray) -> np.ndarray:
    """uint8 ... x 3 RGB -> uint8 ... x 1 luma, ITU-R 601 in 16-bit fixed point:
    (19595 R + 38470 G + 7471 B + 2^15) >> 16, which is Pillow's convert("L") exactly and
    integer arithmetic a board can repeat."""
    r, g, b = (rgb[..., i].astype(np.uint32) for i in range(3))
    return ((19595 * r + 38470 * g + 7471 * b + 0x8000) >> 16).astype(np.uint8)[..., None]


def crop_window(height: int, width: int, size: Sequence[int]) -> tuple[int, int, int, int]:
    """(top, left, height, width) of the largest centred window of aspect size=(H, W), in
    integers (floor division)."""
    th, tw = int(size[0]), int(size[1])
    ch, cw = (height, height * tw // th) if height * tw <= width * th else (width * th // tw, width)
    return (height - ch) // 2, (width - cw) // 2, ch, cw


def _weights(n: int, r: int) -> np.ndarray:
    """n x r integer weights of an axis: how much of output pixel i (of n) the window's source
    pixel j (of r) covers, in units of 1 / n of a source pixel (each row sums to r)."""
    lo = np.arange(n, dtype=np.int64)[:, None] * r
    a = np.arange(r, dtype=np.int64)[None, :] * n
    return np.clip(np.minimum(lo + r, a + n) - np.maximum(lo, a), 0, None)


def fit_image(pixels: np.ndarray, size: Sequence[int], channels: int | None = None) -> np.ndarray:
    """uint8 H x W x C (C 3 or 1) -> uint8 size[0] x size[1] x `channels` (default C): the
    centred window of the output's aspect, each output pixel the exact area average of the
    window pixels it covers (rounded half up), then RGB to luma or gray to RGB. An image
    already of the output's size is only converted."""
    img = pixels if pixels.ndim == 3 else pixels[..., None]
    th, tw = int(size[0]), int(size[1])
    c_out = img.shape[2] if channels is None else int(channels)
    top, left, ch, cw = crop_window(img.shape[0], img.shape[1], (th, tw))
    if min(th, tw, ch, cw) <= 0:  # tp_image_fit's TP_ERR_ARG
        raise ValueError(f"fit_image: a {img.shape[0]} x {img.shape[1]} image has no window of "
                         f"aspect {th} x {tw} a pixel or more wide; give a larger image")
    # The sums in float64, whose matrix products are BLAS's (NumPy's int64 ones are not, 40x
    # slower): every product and partial sum is an integer of at most 255 * ch * cw, far below
    # 2^53, so each is exact and the result the integers' own.
    win = img[top : top + ch, left : left + cw].astype(np.float64)
    rows = np.tensordot(_weights(th, ch).astype(np.float64), win, axes=(1, 0))  # th x cw x C
    sums = np.tensordot(rows, _weights(tw, cw).astype(np.float64), axes=(1, 1))
    sums = sums.transpose(0, 2, 1).astype(np.int64)
    out = ((sums + ch * cw // 2) // (ch * cw)).astype(np.uint8)
    if c_out == out.shape[2]:
        return out
    return to_gray(out) if c_out == 1 else np.repeat(out, 3, axis=2)
