"""Integer gradient maps: a gradient tensor held as int16 (or int8) values q and one power-of-two
exponent e per tensor, real value q x 2^e. The C core (firmware/core/tp_gradmap.c) mirrors each
function; docs/training.md states the rules.

Every value here is an exact integer (NumPy int64), so the order of a sum does not matter;
the only roundings are the ones named below, all round half to even on integers:
- a map is written from exact values v x 2^e_v (accumulators): each row (an NHWC map's image
  row; a vector is one row) is rounded to its own exponent (the smallest that fits its largest
  |v| in the map's bits), then every row to the map's exponent (the largest of the rows'), so a
  kernel needs only one row of accumulators and still gives the map the exponent of its exact
  maximum;
- a weighted op scales dY by each output channel's real weight scale once before its input
  gradient ("fold", dY' = dY x s_w[o], int16, one exponent), so dX = W^T dY' is a pure integer
  product;
- the loss gradient (float32) is rounded to 2^-30 units, then written as a map.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

f32 = np.float32
# the bits an integer map's |q| may use, by format (program.GRAD_FORMATS)
MAP_BITS = {"int16": 15, "int8": 7}
MAP_DTYPE = {"int16": np.int16, "int8": np.int8}
FOLD_BITS = 15  # dY' is int16 (the product's other factor is an int8 weight)
ACC_BITS = 31  # W^T dY' must stay below 2^31 in an int32 accumulator
LOSS_FRAC = 30  # the loss gradient (|g| <= 1) in units of 2^-30
ALIGN_SPAN = 30  # adding two maps: exponents at most this far apart (combine)


@dataclass
class GradMap:
    """A gradient tensor: integers q (int64 here, within the format's bits) times 2^e."""

    q: np.ndarray
    e: int

    def real(self) -> np.ndarray:
        return self.q.astype(np.float64) * 2.0 ** self.e


def bitlen(m: int) -> int:
    """Bits of a non-negative integer (0 for 0): m < 2^bitlen(m)."""
    return int(m).bit_length()


def rshift(v: np.ndarray, s) -> np.ndarray:
    """v / 2^s rounded half to even (s may be an array; s <= 0 shifts left, exactly)."""
    v = np.asarray(v, np.int64)
    s = np.asarray(s, np.int64)
    right = np.clip(s, 0, 62)
    q = v >> right
    r = v - (q << right)
    half = (np.int64(1) << right) >> 1
    q = q + ((r > half) | ((r == half) & (half > 0) & ((q & 1) == 1)))
    return np.where(s < 0, v << np.clip(-s, 0, 62), q)


def rdiv(a: np.ndarray, n) -> np.ndarray:
    """a / n rounded half to even, n > 0."""
    a = np.asarray(a, np.int64)
    n = np.asarray(n, np.int64)
    q = a // n
    r2 = 2 * (a - q * n)
    return q + ((r2 > n) | ((r2 == n) & ((q & 1) == 1)))


def saturate(v: np.ndarray, bits: int) -> np.ndarray:
    lim = (1 << bits) - 1
    return np.clip(v, -lim, lim)


def _shift_for(m: int, bits: int) -> int:
    """The right shift that fits a largest magnitude m into `bits` (never a left shift)."""
    return max(bitlen(m) - bits, 0)


def combine(v: np.ndarray, e_v: int, old: GradMap | None) -> tuple[np.ndarray, int]:
    """New contributions v x 2^e_v plus a map already written (None: nothing there), as exact
    values at one exponent: the smaller one, unless the two are more than ALIGN_SPAN apart, when
    the smaller-exponent side is first rounded to the larger minus ALIGN_SPAN."""
    if old is None:
        return np.asarray(v, np.int64), e_v
    e_c = max(min(e_v, old.e), max(e_v, old.e) - ALIGN_SPAN)
    return rshift(v, e_c - e_v) + rshift(old.q, e_c - old.e), e_c


def produce(v: np.ndarray, e_v: int, fmt: str, old: GradMap | None = None) -> GradMap:
    """The map of exact values v x 2^e_v (plus `old`, when the buffer already holds a map):
    each row rounded to its own shift, then to the map's (the largest row shift)."""
    v, e = combine(v, e_v, old)
    bits = MAP_BITS[fmt]
    shape = v.shape
    rows = v.reshape(shape[1], -1) if v.ndim == 4 else v.reshape(1, -1)
    shifts = np.array([_shift_for(int(np.abs(r).max(initial=0)), bits) for r in rows], np.int64)
    q = saturate(rshift(rows, shifts[:, None]), bits)
    top = int(shifts.max())
    q = rshift(q, (top - shifts)[:, None])
    return GradMap(q.reshape(shape), e + top)


def scale_parts(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each float32 s as m x 2^k exactly, m an integer below 2^24 (0 for 0)."""
    bits = np.asarray(s, f32).view(np.uint32).astype(np.int64)
    exp = (bits >> 23) & 0xFF
    frac = bits & 0x7FFFFF
    m = np.where(exp > 0, frac | 0x800000, frac)
    k = np.where(exp > 0, exp - 150, -149)
    return m, k


def fold_bits(n_terms: int) -> int:
    """Bits of dY' such that n_terms products with int8 weights (|w| <= 127 < 2^7) stay below
    2^31."""
    return max(1, min(FOLD_BITS, ACC_BITS - 7 - bitlen(n_terms)))


def fold(dy: GradMap, s_w: np.ndarray, n_terms: int) -> GradMap:
    """dY' = dY x s_w[o] per output channel o (the last axis), int16 at one exponent chosen from
    the largest |dY x s_w| so that n_terms products with int8 weights fit int32."""
    m, k = scale_parts(s_w)
    bits = fold_bits(n_terms)
    q = dy.q.reshape(-1, len(m))
    top = np.abs(q).max(axis=0, initial=0) * m  # per channel, exact
    live = top > 0
    if not live.any():
        return GradMap(np.zeros_like(dy.q), 0)
    c = max(bitlen(int(t)) + int(kk) for t, kk, ok in zip(top, k, live, strict=True) if ok)
    out = saturate(rshift(q * m, c - bits - k), bits)
    return GradMap(out.reshape(dy.q.shape), dy.e + c - bits)


def pow2_f32(e: int) -> np.float32:
    """2^e as a float32 (0 below the subnormals, inf above the range)."""
    if e < -149:
        return f32(0.0)
    if e > 127:
        return f32(np.inf)
    return f32(np.ldexp(np.float64(1.0), e))


def to_f32(s: np.ndarray, e: int, scale: float = 1.0) -> np.ndarray:
    """Exact integers s (x 2^e) as float32: s rounded to float32 (to nearest even), then times
    the float32 scale x 2^e (one more rounding)."""
    c = f32(f32(scale) * pow2_f32(e))
    return (np.asarray(s, np.int64).astype(f32) * c).astype(f32)


def round_f32(x: np.ndarray) -> np.ndarray:
    """float32 values (|x| < 2^31) rounded half to even to int64, exactly."""
    x = np.asarray(x, f32)
    return np.rint(x).astype(np.int64)


def loss_map(g: np.ndarray, fmt: str) -> GradMap:
    """The logits' gradient (float32, |g| <= 1) as a map: units of 2^-LOSS_FRAC, then produce."""
    v = round_f32((np.asarray(g, f32) * f32(1 << LOSS_FRAC)).astype(f32))
    return produce(v, -LOSS_FRAC, fmt)
