/* tp_dsp.c - per-channel requantization parameters of the Cortex-M DSP kernels, and the
 * gradient kernels' fold of one value (tp_dsp.h). */
#include "tp_dsp.h"
#include "tinyprop.h"

#if TP_KERNELS_DSP

/* The largest |x - zp| of an int8 input with zero point zp. */
static int64_t max_deviation(int32_t zp)
{
    return zp + 128 > 127 - zp ? zp + 128 : 127 - zp;
}

/* Whether |acc| <= bound keeps the fast requantization exact (tp_dsp.h): |acc << left| < 2^30
 * and e <= 22; then fills hz. */
static int fits(tp_dsp_rq *rq, int64_t bound, uint32_t left, int32_t out_zp)
{
    if (rq->e > 22u || bound >= ((int64_t)1 << 30) >> left) {
        return 0;
    }
    rq->hz = (rq->e > 0u ? (int32_t)1 << (rq->e - 1u) : 0) + out_zp * ((int32_t)1 << rq->e);
    return 1;
}

/* Whether n weights from row (contiguous) are all zero: four words a turn, stopping at the
 * first that is not. */
static int all_zero(const int8_t *row, uint32_t n)
{
    uint32_t i = 0;
    for (; i + 16u <= n; i += 16u) {
        if ((tp_dsp_rd32(row + i) | tp_dsp_rd32(row + i + 4u) | tp_dsp_rd32(row + i + 8u) |
             tp_dsp_rd32(row + i + 12u)) != 0u) {
            return 0;
        }
    }
    for (; i < n; i++) {
        if (row[i] != 0) {
            return 0;
        }
    }
    return 1;
}

/* tp_mbqm(x, m, -e) for an int32 x, m in [0, 2^31) and 0 <= e <= 31, in 32-bit halves: the
 * doubling high multiply (its 64-bit product by SMULL, rounded half away from zero, truncated),
 * then the rounding right shift. A pruned channel's constant output (VWW has hundreds). */
int32_t tp_dsp_mbqm32(int32_t x, int32_t m, uint32_t e)
{
    int64_t ab = (int64_t)x * m;
    uint64_t v = (uint64_t)ab + (ab >= 0 ? (uint64_t)1 << 30 : 1u - ((uint64_t)1 << 30));
    uint32_t neg = (uint32_t)(v >> 63);
    uint32_t mag = (uint32_t)((neg ? 0u - v : v) >> 31); /* below 2^31 */
    int32_t r = neg ? -(int32_t)mag : (int32_t)mag;
    uint32_t mask = (1u << e) - 1u;
    uint32_t threshold = (mask >> 1) + (r < 0 ? 1u : 0u);
    return (r >> e) + (((uint32_t)r & mask) > threshold ? 1 : 0);
}

int tp_dsp_prepare(const tp_conv_params *p, const tp_requant *q, uint32_t o, const int8_t *row,
                   uint32_t step, uint32_t n, tp_dsp_rq *rq)
{
    /* little-endian int32s at any alignment: one LDR each on the M4 */
    int32_t bias = q->bias != 0 ? tp_dsp_i32(tp_dsp_rd32((const int8_t *)q->bias + 4u * o)) : 0;
    int32_t shift = tp_dsp_i32(tp_dsp_rd32((const int8_t *)q->shift + 4u * o));
    uint32_t left = shift > 0 ? (uint32_t)shift : 0u, i;
    int64_t dev = max_deviation(p->in_zp), abs_bias = bias < 0 ? -(int64_t)bias : bias, sum = 0;
    rq->bias = bias;
    rq->mult = tp_dsp_i32(tp_dsp_rd32((const int8_t *)q->mult + 4u * o));
    rq->s1 = 1u + left;
    rq->e = shift < 0 ? (uint32_t)-shift : 0u;
    rq->nm = rq->e > 0u ? -1 : 0;
    /* first the bound every weight allows (|w| <= 128), then the row's own */
    if (fits(rq, abs_bias + (int64_t)n * 128 * dev, left, p->out_zp)) {
        return 1;
    }
    i = 0;
    if (step == 1u && all_zero(row, n)) {
        i = n; /* a pruned channel's row (VWW has hundreds): sum 0 */
    }
    if (step == 1u) {
        /* |w| = |(w + 128) - 128| on unsigned bytes: USADA8 sums four at a time, in runs of
         * 2^16 weights (at most 2^23 in 32 bits) */
        while (i + 4u <= n) {
            uint32_t run = 0u, end = n - i > 65536u ? i + 65536u : n & ~3u;
            /* four words a turn: a pruned channel's row is summed whole (VWW has hundreds) */
            for (; i + 16u <= end; i += 16u) {
                run = tp_usada8(tp_dsp_rd32(row + i) ^ 0x80808080u, 0x80808080u, run);
                run = tp_usada8(tp_dsp_rd32(row + i + 4u) ^ 0x80808080u, 0x80808080u, run);
                run = tp_usada8(tp_dsp_rd32(row + i + 8u) ^ 0x80808080u, 0x80808080u, run);
                run = tp_usada8(tp_dsp_rd32(row + i + 12u) ^ 0x80808080u, 0x80808080u, run);
            }
            for (; i < end; i += 4u) {
                run = tp_usada8(tp_dsp_rd32(row + i) ^ 0x80808080u, 0x80808080u, run);
            }
            sum += run;
        }
    }
    for (; i < n; i++) {
        sum += row[i * step] < 0 ? -row[i * step] : row[i * step];
    }
    if (sum == 0) {
        /* no weights: every output is the bias requantized, v. With mult 0, e 1 and hz 2 v + 1
         * the formula gives (2 v + 1 - [acc < 0]) >> 1 = v for either sign, so the channel
         * rounds like the others (nm = -1) */
        int64_t c = shift <= 0 && shift >= -31 ? tp_dsp_mbqm32(bias, rq->mult, rq->e)
                                               : tp_mbqm(bias, rq->mult, shift);
        int32_t v = tp_clamp_act(c + p->out_zp, p->act_min, p->act_max);
        rq->hz = 2 * v + 1;
        rq->mult = 0;
        rq->nm = -1;
        rq->s1 = 1u;
        rq->e = 1u;
        return 1;
    }
    return fits(rq, abs_bias + sum * dev, left, p->out_zp);
}

/* The name in parentheses: the function, not tp_dsp.h's macro to the inline version. */
int32_t(tp_dsp_fold)(int32_t q, uint32_t m, int32_t sh, int32_t lim)
{
    return tp_dsp_fold_inline(q, m, sh, lim);
}

#else
typedef int tp_dsp_unused; /* ISO C wants a declaration in every translation unit */
#endif
