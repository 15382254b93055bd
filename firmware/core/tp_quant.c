/* tp_quant.c - TFLite integer arithmetic; see tp_quant.h and host/tinyprop/reference/quant.py. */
#include "tp_quant.h"
#include "tinyprop.h"

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

/* ---- binary64 in integers (FULLY_CONNECTED's double requantization) ---- */

#define F64_ONE ((uint64_t)1 << 52) /* the implicit bit: a normal mantissa is in [2^52, 2^53) */

static tp_f64 f64_special(uint8_t cls, uint8_t neg)
{
    tp_f64 v;
    v.mant = 0u;
    v.exp = 0;
    v.neg = neg;
    v.cls = cls;
    return v;
}

static uint32_t bit_length64(uint64_t x)
{
    uint32_t n = 0;
    while (x != 0u) {
        x >>= 1;
        n++;
    }
    return n;
}

/* mant * 2^exp from a mantissa of at most 53 bits, shifted up to [2^52, 2^53) (exact). */
static tp_f64 f64_normal(uint64_t mant, int32_t exp, uint8_t neg)
{
    tp_f64 v = f64_special(TP_F64_FINITE, neg);
    if (mant != 0u) {
        uint32_t up = 53u - bit_length64(mant);
        v.mant = mant << up;
        v.exp = exp - (int32_t)up;
    }
    return v;
}

/* (hi * 2^64 + lo) >> s rounded to nearest even, for 0 < s < 64 with the result below 2^54:
 * returns the 53-bit mantissa, adding one to *exp when rounding carries into bit 53. */
static uint64_t round_shift(uint64_t hi, uint64_t lo, uint32_t s, int32_t *exp)
{
    uint64_t q = (hi << (64u - s)) | (lo >> s);
    uint64_t rem = lo & (((uint64_t)1 << s) - 1u), half = (uint64_t)1 << (s - 1u);
    if (rem > half || (rem == half && (q & 1u) != 0u)) {
        q++;
    }
    if (q >> 53 != 0u) {
        q >>= 1;
        *exp += 1;
    }
    return q;
}

tp_f64 tp_f64_of_f32_bits(uint32_t bits)
{
    uint8_t neg = (uint8_t)(bits >> 31);
    uint32_t e = (bits >> 23) & 0xFFu, f = bits & 0x7FFFFFu;
    if (e == 0xFFu) {
        return f64_special(f != 0u ? TP_F64_NAN : TP_F64_INF, neg);
    }
    if (e == 0u) { /* zero or subnormal: f * 2^-149 */
        return f64_normal(f, -149, neg);
    }
    return f64_normal(f | 0x800000u, (int32_t)e - 150, neg);
}

tp_f64 tp_f64_of_i64(int64_t x)
{
    uint64_t mag = x < 0 ? 0u - (uint64_t)x : (uint64_t)x;
    uint32_t n = bit_length64(mag);
    int32_t exp = 0;
    uint64_t mant;
    if (n <= 53u) {
        return f64_normal(mag, 0, (uint8_t)(x < 0));
    }
    exp = (int32_t)(n - 53u);
    mant = round_shift(0u, mag, n - 53u, &exp);
    return f64_normal(mant, exp, (uint8_t)(x < 0));
}

tp_f64 tp_f64_mul(tp_f64 a, tp_f64 b)
{
    uint8_t neg = (uint8_t)(a.neg ^ b.neg);
    uint64_t a0, a1, b0, b1, lo, mid, hi;
    int32_t exp;
    if (a.cls == TP_F64_NAN || b.cls == TP_F64_NAN) {
        return f64_special(TP_F64_NAN, 0u);
    }
    if (a.cls == TP_F64_INF || b.cls == TP_F64_INF) { /* inf * 0 is NaN */
        return (a.cls == TP_F64_FINITE && a.mant == 0u) || (b.cls == TP_F64_FINITE && b.mant == 0u)
                   ? f64_special(TP_F64_NAN, 0u)
                   : f64_special(TP_F64_INF, neg);
    }
    if (a.mant == 0u || b.mant == 0u) {
        return f64_normal(0u, 0, neg);
    }
    /* the exact 106-bit product from 32-bit halves, then rounded to 53 bits */
    a0 = a.mant & 0xFFFFFFFFu;
    a1 = a.mant >> 32;
    b0 = b.mant & 0xFFFFFFFFu;
    b1 = b.mant >> 32;
    lo = a0 * b0;
    mid = a1 * b0 + (lo >> 32); /* a1, b1 < 2^21: no carry out of 64 bits */
    mid += a0 * b1;
    hi = a1 * b1 + (mid >> 32);
    lo = (mid << 32) | (lo & 0xFFFFFFFFu);
    exp = a.exp + b.exp;
    if (hi >> 41 != 0u) { /* product in [2^105, 2^106) */
        exp += 53;
        return f64_normal(round_shift(hi, lo, 53u, &exp), exp, neg);
    }
    exp += 52; /* [2^104, 2^105) */
    return f64_normal(round_shift(hi, lo, 52u, &exp), exp, neg);
}

tp_f64 tp_f64_div(tp_f64 a, tp_f64 b)
{
    uint8_t neg = (uint8_t)(a.neg ^ b.neg);
    int a_zero = a.cls == TP_F64_FINITE && a.mant == 0u;
    int b_zero = b.cls == TP_F64_FINITE && b.mant == 0u;
    uint64_t r, q = 0u;
    int32_t exp, i;
    if (a.cls == TP_F64_NAN || b.cls == TP_F64_NAN || (a_zero && b_zero) ||
        (a.cls == TP_F64_INF && b.cls == TP_F64_INF)) {
        return f64_special(TP_F64_NAN, 0u);
    }
    if (a.cls == TP_F64_INF || b_zero) {
        return f64_special(TP_F64_INF, neg);
    }
    if (b.cls == TP_F64_INF || a_zero) {
        return f64_normal(0u, 0, neg);
    }
    /* 54 quotient bits of a.mant / b.mant (53 and a rounding bit), remainder as sticky bit */
    r = a.mant;
    exp = a.exp - b.exp - 53;
    if (r < b.mant) {
        r <<= 1;
        exp -= 1;
    }
    for (i = 0; i < 54; i++) { /* b.mant <= r < 2 b.mant < 2^54 */
        q <<= 1;
        if (r >= b.mant) {
            r -= b.mant;
            q |= 1u;
        }
        r <<= 1;
    }
    /* q in [2^53, 2^54); one more shift with the remainder folded into the sticky bit */
    exp += 1;
    return f64_normal(round_shift(0u, (q << 1) | (r != 0u ? 1u : 0u), 2u, &exp), exp, neg);
}

tp_f64 tp_real_scale(uint32_t s_in_bits, uint32_t s_w_bits, uint32_t s_out_bits)
{
    return tp_f64_div(tp_f64_mul(tp_f64_of_f32_bits(s_in_bits), tp_f64_of_f32_bits(s_w_bits)),
                      tp_f64_of_f32_bits(s_out_bits));
}

int64_t tp_requantize_double(int64_t acc, const tp_f64 *real_scale)
{
    const int64_t limit = (int64_t)1 << 32; /* beyond any int8 result, inside int64 */
    tp_f64 v = tp_f64_mul(tp_f64_of_i64(acc), *real_scale);
    uint64_t t, frac;
    uint32_t k;
    if (v.cls == TP_F64_NAN) {
        return 0;
    }
    if (v.cls == TP_F64_INF || (v.mant != 0u && v.exp + 52 >= 32)) { /* |v| >= 2^32 */
        return v.neg ? -limit : limit;
    }
    if (v.mant == 0u || v.exp <= -64) { /* |v| < 2^53 * 2^-64: rounds to 0 */
        return 0;
    }
    /* |v| < 2^32, so exp < -20: trunc, then half away from zero */
    k = (uint32_t)(-v.exp);
    t = v.mant >> k;
    frac = v.mant & (((uint64_t)1 << k) - 1u);
    t += frac >= ((uint64_t)1 << (k - 1u)) ? 1u : 0u;
    return v.neg ? -(int64_t)t : (int64_t)t;
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
    int32_t poly =
        rdpot(tp_wrap32((int64_t)mul(tp_wrap32((int64_t)x4_over_4 + x3), one_third) + x2), 1);
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
