/* tp_quant.c - TFLite integer arithmetic; see tp_quant.h and host/tinyprop/reference/quant.py. */
#include "tp_quant.h"

/* int64 from its 64-bit pattern, without implementation-defined conversion. */
static int64_t u2i64(uint64_t u)
{
    return u <= (uint64_t)INT64_MAX ? (int64_t)u : -(int64_t)(~u) - 1;
}

/* Floor of x / 2^e (an arithmetic right shift, spelled portably). */
static int64_t asr64(int64_t x, int32_t e)
{
    return x >= 0 ? x >> e : -1 - ((-1 - x) >> e);
}

int32_t tp_wrap32(int64_t v)
{
    uint32_t u = (uint32_t)(uint64_t)v;
    return u <= 0x7FFFFFFFu ? (int32_t)u : -(int32_t)(~u) - 1;
}

int64_t tp_srdhm(int64_t a, int64_t b)
{
    int64_t ab, v;
    uint64_t mag;
    if (a == TP_INT32_MIN && b == TP_INT32_MIN) {
        return TP_INT32_MAX;
    }
    ab = u2i64((uint64_t)a * (uint64_t)b);
    v = u2i64((uint64_t)ab + (uint64_t)(ab >= 0 ? (1 << 30) : 1 - (1 << 30)));
    /* truncating division by 2^31 */
    mag = (v < 0 ? 0u - (uint64_t)v : (uint64_t)v) >> 31;
    return v < 0 ? -(int64_t)mag : (int64_t)mag;
}

int64_t tp_rounding_divide_by_pot(int64_t x, int32_t exponent)
{
    uint64_t mask = ((uint64_t)1 << exponent) - 1u;
    uint64_t remainder = (uint64_t)x & mask;
    uint64_t threshold = (mask >> 1) + (x < 0 ? 1u : 0u);
    return asr64(x, exponent) + (remainder > threshold ? 1 : 0);
}

int64_t tp_mbqm(int64_t x, int32_t multiplier, int32_t shift)
{
    int32_t left = shift > 0 ? shift : 0;
    int32_t right = shift < 0 ? -shift : 0;
    int64_t shifted = u2i64((uint64_t)x << left);
    return tp_rounding_divide_by_pot(tp_srdhm(shifted, multiplier), right);
}

int64_t tp_rounded_div(int64_t sum, int64_t n)
{
    return (sum > 0 ? sum + n / 2 : sum - n / 2) / n;
}

int64_t tp_requantize_double(int64_t acc, double real_scale)
{
    const double limit = 4294967296.0; /* 2^32: beyond any int8 result, inside int64 */
    double v = (double)acc * real_scale, t, frac;
    if (v != v) {
        return 0;
    }
    v = v < -limit ? -limit : v > limit ? limit : v;
    t = (double)(int64_t)v; /* trunc; v - t is exact in double, so the tie test is too */
    frac = v - t >= 0.0 ? v - t : t - v;
    if (frac >= 0.5) {
        t += v > 0.0 ? 1.0 : -1.0;
    }
    return (int64_t)t;
}

/* ---- gemmlowp fixed point for the int8 softmax ---- */

static int32_t mul(int32_t a, int32_t b)
{
    return (int32_t)tp_srdhm(a, b);
}

static int32_t rdpot(int32_t x, int32_t e)
{
    return (int32_t)tp_rounding_divide_by_pot(x, e);
}

static int32_t sat_shl(int32_t x, int32_t e)
{
    int32_t threshold = (int32_t)((1u << (31 - e)) - 1u);
    if (x > threshold) {
        return TP_INT32_MAX;
    }
    if (x < -threshold) {
        return TP_INT32_MIN;
    }
    return x * (1 << e);
}

/* exp on [-1/4, 0), Q0.31 in and out */
static int32_t exp_quarter(int32_t a)
{
    const int32_t const_term = 1895147668;
    const int32_t one_third = 715827883;
    int32_t x = tp_wrap32((int64_t)a + (1 << 28));
    int32_t x2 = mul(x, x);
    int32_t x3 = mul(x2, x);
    int32_t x4 = mul(x2, x2);
    int32_t x4_over_4 = rdpot(x4, 2);
    int32_t poly = rdpot(
        tp_wrap32((int64_t)mul(tp_wrap32((int64_t)x4_over_4 + x3), one_third) + x2), 1);
    return tp_wrap32((int64_t)const_term + mul(const_term, tp_wrap32((int64_t)x + poly)));
}

int32_t tp_exp_on_negative_values(int32_t a)
{
    static const int32_t barrel[7][2] = {{-2, 1672461947}, {-1, 1302514674}, {0, 790015084},
                                         {1, 290630308},   {2, 39332535},    {3, 720401},
                                         {4, 242}};
    const int32_t frac_bits = 31 - TP_SOFTMAX_DIFF_INT_BITS;
    const int32_t quarter = 1 << (frac_bits - 2);
    int32_t a_mod = tp_wrap32((int64_t)((uint32_t)a & (uint32_t)(quarter - 1)) - quarter);
    int32_t result = exp_quarter(sat_shl(a_mod, TP_SOFTMAX_DIFF_INT_BITS));
    uint32_t remainder = (uint32_t)tp_wrap32((int64_t)a_mod - a);
    int i;
    for (i = 0; i < 7; i++) {
        int32_t exponent = barrel[i][0];
        if (TP_SOFTMAX_DIFF_INT_BITS > exponent &&
            (remainder & (1u << (frac_bits + exponent))) != 0u) {
            result = mul(result, barrel[i][1]);
        }
    }
    return a == 0 ? TP_INT32_MAX : result;
}

static int32_t clz32(uint32_t x)
{
    int32_t n = 0;
    if (x == 0u) {
        return 32;
    }
    while ((x & 0x80000000u) == 0u) {
        x <<= 1;
        n++;
    }
    return n;
}

int32_t tp_get_reciprocal(int32_t x, int32_t integer_digits, int32_t *bits_over_unit)
{
    const int32_t one_q2 = 1 << 29;
    int32_t headroom = clz32((uint32_t)x);
    /* x << headroom as 64 bits (headroom is 32 only for x == 0) */
    int32_t shifted = tp_wrap32((int64_t)(((uint64_t)(uint32_t)x << headroom) & 0xFFFFFFFFu) -
                                ((int64_t)1 << 31));
    /* one_over_one_plus_x_for_x_in_0_1: Newton-Raphson in Q2.29 */
    int64_t sum = (int64_t)shifted + TP_INT32_MAX;
    int32_t half_den = (int32_t)(sum >= 0 ? (sum + 1) / 2 : (sum - 1) / 2);
    int32_t x2 = tp_wrap32((int64_t)1515870810 + mul(half_den, -1010580540));
    int i;
    for (i = 0; i < 3; i++) {
        int32_t hdx = mul(half_den, x2);
        x2 = tp_wrap32((int64_t)x2 + sat_shl(mul(x2, tp_wrap32((int64_t)one_q2 - hdx)), 2));
    }
    *bits_over_unit = integer_digits - headroom;
    return sat_shl(x2, 1);
}
