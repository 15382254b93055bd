"""TFLite's integer arithmetic, exactly: multiplier quantization, fixed-point requantization and the
gemmlowp routines of the int8 softmax. The C core (firmware/core/tp_quant.c) mirrors each function.

Everything here works on int64 NumPy arrays (or Python ints) holding int32 values, so there is
no overflow to reason about except where TFLite itself saturates.
"""

from __future__ import annotations

import math

import numpy as np

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1


def quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLite QuantizeMultiplier: real = q * 2^(shift - 31), q in [2^30, 2^31)."""
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    q_fixed = round_half_away(q * (1 << 31))
    if q_fixed == (1 << 31):
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    if shift > 30:
        return INT32_MAX, 30
    return int(q_fixed), int(shift)


def round_half_away(x: float) -> int:
    """std::round for a double."""
    return math.floor(abs(x) + 0.5) * (1 if x >= 0 else -1)


def round_half_away_f32(x: np.ndarray) -> np.ndarray:
    """roundf on float32 values, exactly (floor(|x| + 0.5) can be off by one in float32)."""
    x = np.asarray(x, np.float32)
    t = np.trunc(x)
    frac = np.abs(x - t)  # exact for |x| < 2^23; larger floats are integral already
    return (t + np.where(frac >= np.float32(0.5), np.sign(x), np.float32(0))).astype(np.float32)


def requantize_double(acc, real_scale) -> np.ndarray:
    """round(acc * real_scale) in double, as C's round() (half away from zero): the requantization
    of TFLite's reference FULLY_CONNECTED (reference_integer_ops::FullyConnected with scales)."""
    v = np.asarray(acc, np.int64).astype(np.float64) * np.asarray(real_scale, np.float64)
    t = np.trunc(v)  # v - t is exact in double, so the tie test is too
    return (t + np.where(np.abs(v - t) >= 0.5, np.sign(v), 0.0)).astype(np.int64)


def _trunc_div_pow2(v: np.ndarray, bits: int) -> np.ndarray:
    """C's truncating v / 2^bits for int64 values."""
    q = np.abs(v) >> bits
    return np.where(v < 0, -q, q)


def srdhm(a, b):
    """gemmlowp SaturatingRoundingDoublingHighMul for int32 values (arrays or ints)."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    ab = a * b
    nudge = np.where(ab >= 0, np.int64(1 << 30), np.int64(1 - (1 << 30)))
    res = _trunc_div_pow2(ab + nudge, 31)
    return np.where((a == INT32_MIN) & (b == INT32_MIN), np.int64(INT32_MAX), res)


def rounding_divide_by_pot(x, exponent):
    """gemmlowp RoundingDivideByPOT (round half away from zero)."""
    x = np.asarray(x, np.int64)
    exponent = np.asarray(exponent, np.int64)
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def mbqm(x, multiplier, shift):
    """TFLite MultiplyByQuantizedMultiplier (double rounding, the default build)."""
    shift = np.asarray(shift, np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    return rounding_divide_by_pot(srdhm(np.asarray(x, np.int64) << left, multiplier), right)


def activation_range(activation: str, scale: float, zero_point: int) -> tuple[int, int]:
    """CalculateActivationRangeQuantized for int8."""
    def q(f: float) -> int:
        return zero_point + int(round_half_away_f32(np.float32(f) / np.float32(scale)))

    lo, hi = -128, 127
    if activation == "RELU":
        lo = max(lo, q(0.0))
    elif activation == "RELU6":
        lo, hi = max(lo, q(0.0)), min(hi, q(6.0))
    return lo, hi


# ---- int8 softmax (TFLite reference_ops::Softmax, gemmlowp fixed point) ----

SOFTMAX_DIFF_INT_BITS = 5
SOFTMAX_ACCUM_INT_BITS = 12


def softmax_params(beta: float, input_scale: float) -> tuple[int, int, int]:
    """PreprocessSoftmaxScaling + CalculateInputRadius: (multiplier, left_shift, diff_min)."""
    real = min(beta * input_scale * (1 << (31 - SOFTMAX_DIFF_INT_BITS)), (1 << 31) - 1.0)
    mult, shift = quantize_multiplier(real)
    radius = math.floor(
        1.0 * ((1 << SOFTMAX_DIFF_INT_BITS) - 1) * (1 << (31 - SOFTMAX_DIFF_INT_BITS))
        / (1 << shift)
    )
    return mult, shift, -radius


def _wrap32(v: int) -> int:
    return ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _mul(a: int, b: int) -> int:
    return int(srdhm(a, b))


def _rdpot(x: int, e: int) -> int:
    return int(rounding_divide_by_pot(x, e))


def _sat_shl(x: int, e: int) -> int:
    threshold = (1 << (31 - e)) - 1
    if x > threshold:
        return INT32_MAX
    if x < -threshold:
        return INT32_MIN
    return _wrap32(x << e)


def _exp_quarter(a: int) -> int:
    """exp on [-1/4, 0), Q0.31 in and out."""
    const_term = 1895147668
    one_third = 715827883
    x = _wrap32(a + (1 << 28))
    x2 = _mul(x, x)
    x3 = _mul(x2, x)
    x4 = _mul(x2, x2)
    x4_over_4 = _rdpot(x4, 2)
    poly = _rdpot(_wrap32(_mul(_wrap32(x4_over_4 + x3), one_third) + x2), 1)
    return _wrap32(const_term + _mul(const_term, _wrap32(x + poly)))


_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
               (2, 39332535), (3, 720401), (4, 242))


def exp_on_negative_values(a: int) -> int:
    """gemmlowp exp_on_negative_values: Q5.26 input <= 0, Q0.31 output."""
    frac_bits = 31 - SOFTMAX_DIFF_INT_BITS
    quarter = 1 << (frac_bits - 2)
    a_mod = _wrap32((a & (quarter - 1)) - quarter)
    result = _exp_quarter(_sat_shl(a_mod, SOFTMAX_DIFF_INT_BITS))
    remainder = _wrap32(a_mod - a)
    for exponent, mult in _EXP_BARREL:
        if SOFTMAX_DIFF_INT_BITS > exponent and remainder & (1 << (frac_bits + exponent)):
            result = _mul(result, mult)
    return INT32_MAX if a == 0 else result


def _clz32(x: int) -> int:
    x &= 0xFFFFFFFF
    return 32 - x.bit_length()


def get_reciprocal(x: int, integer_digits: int) -> tuple[int, int]:
    """TFLite GetReciprocal: (1/x in Q0.31 scaled, num_bits_over_unit)."""
    headroom = _clz32(x)
    bits_over_unit = integer_digits - headroom
    shifted = _wrap32(((x & 0xFFFFFFFF) << headroom) - (1 << 31))
    # one_over_one_plus_x_for_x_in_0_1, Newton-Raphson in Q2.29
    s = shifted + INT32_MAX
    half_den = (s + (1 if s >= 0 else -1)) // 2 if s >= 0 else -((-s + 1) // 2)
    x2 = _wrap32(1515870810 + _mul(half_den, -1010580540))
    one_q2 = 1 << 29
    for _ in range(3):
        hdx = _mul(half_den, x2)
        x2 = _wrap32(x2 + _sat_shl(_mul(x2, _wrap32(one_q2 - hdx)), 2))
    return _sat_shl(x2, 1), bits_over_unit


def softmax_int8(x: np.ndarray, mult: int, left_shift: int, diff_min: int) -> np.ndarray:
    """TFLite reference int8 softmax over the last axis (output scale 1/256, zero point -128)."""
    x = np.asarray(x, np.int64)
    out = np.empty(x.shape, np.int8)
    flat_in = x.reshape(-1, x.shape[-1])
    flat_out = out.reshape(-1, x.shape[-1])
    for row_in, row_out in zip(flat_in, flat_out, strict=True):
        mx = int(row_in.max())
        exps = []
        total = 0
        for v in row_in:
            diff = int(v) - mx
            if diff >= diff_min:
                e = exp_on_negative_values(_mul(_wrap32(diff << left_shift), mult))
                exps.append(e)
                total = _wrap32(total + _rdpot(e, SOFTMAX_ACCUM_INT_BITS))
            else:
                exps.append(None)
        scale, bits = get_reciprocal(total, SOFTMAX_ACCUM_INT_BITS)
        for j, e in enumerate(exps):
            if e is None:
                row_out[j] = -128
                continue
            unsat = _rdpot(_mul(scale, e), bits + 31 - 8)
            row_out[j] = max(-128, min(127, unsat - 128))
    return out
