"""float32 exp and log built only from IEEE +, -, *, / and exact steps, so that the NumPy
reference and the C core (firmware/core/tp_fmath.c) compute the same bits on every machine, with or
without an FPU, instead of trusting two libms to agree.
"""

from __future__ import annotations

import numpy as np

f32 = np.float32
LOG2E = f32(1.44269504)
LN2_HI = f32(0.693145751953125)
LN2_LO = f32(1.428606765330187e-06)
EXP_MIN = f32(-87.0)
# float32 divisions, as the C compiler folds 1.0f / 720 etc.
_EXP_C = [f32(1) / f32(720), f32(1) / f32(120), f32(1) / f32(24), f32(1) / f32(6), f32(0.5),
          f32(1), f32(1)]
_LOG_C = [f32(2) / f32(9), f32(2) / f32(7), f32(2) / f32(5), f32(2) / f32(3)]


def floor_f32(x: np.ndarray) -> np.ndarray:
    """floor of float32 values with |x| < 2^31, via truncation like the C version."""
    t = np.trunc(x).astype(f32)
    return np.where(x < t, t - f32(1), t).astype(f32)


def exp_neg(x: np.ndarray) -> np.ndarray:
    """e^x for float32 x <= 0 (exactly 0 below -87)."""
    x = np.asarray(x, f32)
    xc = np.maximum(x, EXP_MIN)
    k = floor_f32(xc * LOG2E + f32(0.5))
    r = xc - k * LN2_HI
    r = r - k * LN2_LO
    p = _EXP_C[0]
    for c in _EXP_C[1:]:
        p = p * r + c
    scale = ((k.astype(np.int32) + 127) << 23).astype(np.int32).view(f32)
    return np.where(x < EXP_MIN, f32(0), p * scale).astype(f32)


def log_pos(x: np.ndarray) -> np.ndarray:
    """ln(x) for finite float32 x >= 1 (the softmax denominator)."""
    x = np.asarray(x, f32)
    bits = x.view(np.int32)
    e = ((bits >> 23) & 0xFF) - 127
    m = ((bits & 0x007FFFFF) | (127 << 23)).view(f32)  # [1, 2)
    big = m > f32(1.41421356)
    m = np.where(big, m * f32(0.5), m)
    e = np.where(big, e + 1, e)
    f = m - f32(1)
    s = f / (f32(2) + f)
    z = s * s
    poly = _LOG_C[0]
    for c in _LOG_C[1:]:
        poly = poly * z + c
    ef = e.astype(f32)
    return (ef * LN2_HI + (ef * LN2_LO + (s + s + s * (z * poly)))).astype(f32)
