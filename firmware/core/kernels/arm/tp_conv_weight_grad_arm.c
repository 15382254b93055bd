/* tp_conv_weight_grad_arm.c - the weight gradient of 1x1 CONV_2D and the bias sums with integer
 * maps for Cortex-M with the DSP extension, bit for bit the reference kernels
 * (kernels/ref/tp_weighted_gradq.c); other shapes run the reference kernel.
 *
 * dW[o, i] = sum_p dY[p, o] x[p, i] - zp sum_p dY[p, o]: dY's column gathered in blocks as
 * (dY[p], dY[p + 1]) pairs on the stack; per four inputs, two positions' words of x unpacked by
 * SXTB16 for eight SMLAxy; the int32 sums in the row, then made float32 by one conversion and
 * one product each. The int32 sums (and their difference with zp sum dY) are exact when
 * sum |dY| * 255 is below 2^31 (checked per row; else the reference's int64 sums); the result is
 * the same integer, so the same float32. Inputs at the zero point everywhere (x_live's clear
 * bits: VWW's inputs from pruned channels) sum zp dY without their products: a quad of them
 * takes no load, a quad with one other input takes that one alone (two positions an SMLAD).
 */
#include "tinyprop.h"
#include "tp_dsp.h"

#if TP_KERNELS_DSP

/* Positions per block of packed dY pairs on the stack (even). */
#define TP_WG_BLOCK 64u
/* The bound on sum |dY| below which the int32 path is exact: sum |dY| * 256 <= 2^31 (then the
 * sums, |x| <= 128, the difference, |x - zp| <= 255, and a one-block row's sums started at
 * -zp sum dY, within 256 sum |dY|, fit int32). */
#define TP_WG_BOUND 8388608u

/* dY[p, o] of positions [p0, p0 + np) packed in pairs (dY[p], dY[p + 1]) into gp (a last odd
 * one with 0); returns sum dY and adds sum |dY| to *bound. */
TP_DSP_INLINE int32_t wg_gather(const void *dq, uint32_t at, uint32_t oc, uint32_t np, uint32_t *gp,
                                uint32_t *bound, uint32_t bytes)
{
    uint32_t j, b = 0u;
    int32_t sum = 0;
    for (j = 0; j < np; j += 2u, at += 2u * oc) {
        int32_t g0 = bytes == 2u ? ((const int16_t *)dq)[at] : ((const int8_t *)dq)[at], g1 = 0;
        if (j + 1u < np) {
            g1 = bytes == 2u ? ((const int16_t *)dq)[at + oc] : ((const int8_t *)dq)[at + oc];
        }
        sum += g0 + g1;
        b += (uint32_t)(g0 < 0 ? -g0 : g0) + (uint32_t)(g1 < 0 ? -g1 : g1);
        gp[j >> 1] = tp_dsp_pack16(g0, g1);
    }
    *bound += b;
    return sum;
}

static TP_DSP_NOINLINE int32_t wg_gather8(const void *dq, uint32_t at, uint32_t oc, uint32_t np,
                                          uint32_t *gp, uint32_t *bound)
{
    return wg_gather(dq, at, oc, np, gp, bound, 1u);
}

static TP_DSP_NOINLINE int32_t wg_gather16(const void *dq, uint32_t at, uint32_t oc, uint32_t np,
                                           uint32_t *gp, uint32_t *bound)
{
    return wg_gather(dq, at, oc, np, gp, bound, 2u);
}

/* sum over the block's positions of dY[p] x[p] for one input (x at the block's first position,
 * ic apart), added to a: two positions an SMLAD of (x[p], x[p + 1]) and the pair's dY. */
static inline int32_t wg_one(int32_t a, const int8_t *x, uint32_t ic, const uint32_t *gp,
                             uint32_t np)
{
    const uint32_t *g = gp, *gend = gp + (np >> 1);
    for (; g != gend; g++, x += 2u * ic) {
        a = tp_smlad(tp_pkhbt16((uint32_t)(int32_t)x[0], (uint32_t)(int32_t)x[ic]), *g, a);
    }
    if (np & 1u) { /* the odd last position */
        a = tp_smlabb((uint32_t)(int32_t)x[0], *g, a);
    }
    return a;
}

/* s[0..3] (+)= sum over positions p of the block of dY[p] x[p, i..i+3], for every quad i of
 * ic, the sums starting at init where they start (!add); x at the block's first position, np
 * positions (np even, or odd with the last pair's second dY 0: its x is not read). Per position
 * pair: two words of x (four inputs each), four SXTB16, eight SMLAxy with the pair's dY. An
 * input x_live marks at zp adds zp bsum (bsum: the block's dY sum), the same integer: a quad of
 * them alone, one other input by wg_one. */
static TP_DSP_NOINLINE void wg_block(int32_t *s, const int8_t *x, uint32_t ic, const uint32_t *gp,
                                     uint32_t np, int add, const uint32_t *x_live, int32_t zb,
                                     int32_t init)
{
    uint32_t i, j, pairs = np >> 1;
    for (i = 0; i < ic; i += 4u) {
        const int8_t *xp = x + i;
        const uint32_t *g = gp, *gend = gp + pairs;
        int32_t a0 = init, a1 = init, a2 = init, a3 = init;
        uint32_t live = x_live != NULL ? x_live[i >> 5] >> (i & 31u) & 15u : 15u;
        if (live == 0u) { /* all four at zp */
            if (add) {
                s[i] += zb;
                s[i + 1u] += zb;
                s[i + 2u] += zb;
                s[i + 3u] += zb;
            } else {
                s[i] = s[i + 1u] = s[i + 2u] = s[i + 3u] = init + zb;
            }
            continue;
        }
        if ((live & (live - 1u)) == 0u) { /* one of the four off zp */
            for (j = 0; j < 4u; j++) {
                int32_t a = add ? s[i + j] : init;
                s[i + j] = (live >> j & 1u) != 0u ? wg_one(a, xp + j, ic, gp, np) : a + zb;
            }
            continue;
        }
        if (add) {
            a0 = s[i];
            a1 = s[i + 1u];
            a2 = s[i + 2u];
            a3 = s[i + 3u];
        }
        for (; g != gend; g++, xp += 2u * ic) {
            uint32_t v0 = tp_dsp_rd32(xp), v1 = tp_dsp_rd32(xp + ic), gg = *g;
            uint32_t e0 = tp_sxtb16(v0), o0 = tp_sxtb16_odd(v0);
            uint32_t e1 = tp_sxtb16(v1), o1 = tp_sxtb16_odd(v1);
            a0 = tp_smlabt(e1, gg, tp_smlabb(e0, gg, a0));
            a2 = tp_smlatt(e1, gg, tp_smlatb(e0, gg, a2));
            a1 = tp_smlabt(o1, gg, tp_smlabb(o0, gg, a1));
            a3 = tp_smlatt(o1, gg, tp_smlatb(o0, gg, a3));
        }
        if (np & 1u) { /* the odd last position */
            uint32_t v0 = tp_dsp_rd32(xp), gg = *g;
            uint32_t e0 = tp_sxtb16(v0), o0 = tp_sxtb16_odd(v0);
            a0 = tp_smlabb(e0, gg, a0);
            a2 = tp_smlatb(e0, gg, a2);
            a1 = tp_smlabb(o0, gg, a1);
            a3 = tp_smlatb(o0, gg, a3);
        }
        s[i] = a0;
        s[i + 1u] = a1;
        s[i + 2u] = a2;
        s[i + 3u] = a3;
    }
}

/* row[i] = (float)acc[i] * c for n values in place (acc: the row's int32 words): eight a turn
 * by VLDM, VCVT, VMUL and VSTM on the FPU (the conversion rounds to nearest even, as C's does),
 * the rest (or all, without the FPU's registers) one at a time: the same conversion and product. */
static void wg_to_f32(float *row, uint32_t n, float c)
{
    uint32_t i = 0u;
#if defined(__ARM_FP) && (__ARM_FP & 4) && defined(__thumb2__) && !defined(TP_KERNELS_DSP_EMULATION)
    float *r = row;
    for (; i + 8u <= n; i += 8u) {
        __asm__ volatile("vldmia %[r], {s8-s15}\n\t"
                         "vcvt.f32.s32 s8, s8\n\t"
                         "vcvt.f32.s32 s9, s9\n\t"
                         "vcvt.f32.s32 s10, s10\n\t"
                         "vcvt.f32.s32 s11, s11\n\t"
                         "vcvt.f32.s32 s12, s12\n\t"
                         "vcvt.f32.s32 s13, s13\n\t"
                         "vcvt.f32.s32 s14, s14\n\t"
                         "vcvt.f32.s32 s15, s15\n\t"
                         "vmul.f32 s8, s8, %[c]\n\t"
                         "vmul.f32 s9, s9, %[c]\n\t"
                         "vmul.f32 s10, s10, %[c]\n\t"
                         "vmul.f32 s11, s11, %[c]\n\t"
                         "vmul.f32 s12, s12, %[c]\n\t"
                         "vmul.f32 s13, s13, %[c]\n\t"
                         "vmul.f32 s14, s14, %[c]\n\t"
                         "vmul.f32 s15, s15, %[c]\n\t"
                         "vstmia %[r]!, {s8-s15}"
                         : [r] "+r"(r)
                         : [c] "t"(c)
                         : "s8", "s9", "s10", "s11", "s12", "s13", "s14", "s15", "memory");
    }
#endif
    for (; i < n; i++) {
        int32_t a;
        __builtin_memcpy(&a, row + i, 4);
        row[i] = (float)a * c;
    }
}

/* dW[o, i] = sum_p dY[p, o] x[p, i] - zp sum_p dY[p, o] as float32: its int32 sums, made in the
 * row itself (int32 words, then each replaced by its float32), exact while sum |dY| is below
 * TP_WG_BOUND (else the reference's int64 sums, the same value), then one int32 -> float32
 * conversion (round to nearest even, as tp_gm_to_f32's) and one product with scale * 2^e (the
 * same float32 product). The row's sums are bounded as a whole, so positions go in blocks
 * (TP_WG_BLOCK) whatever their number; a row of one block (VWW's trained 6x6 and 3x3 maps)
 * knows its dY sum before its sums start, and starts them at -zp sum dY. */
void tp_arm_conv2d_weight_grad_q(const tp_conv_params *p, const tp_shape *in_shape, const int8_t *x,
                                 int32_t x_zp, float x_scale, const tp_shape *out_shape,
                                 const tp_gmap *dy, uint32_t o, float *row, const uint32_t *x_live)
{
    uint32_t ic = (uint32_t)in_shape->c, oc = (uint32_t)out_shape->c, n, q, i, np, bound = 0u;
    int32_t *acc = (int32_t *)(void *)row, g_sum = 0, off;
    int summed = 0, one; /* one: a row of one block, its sums started at -zp sum dY */
    uint32_t gp[TP_WG_BLOCK / 2u];
    float c;
    n = (uint32_t)in_shape->h * (uint32_t)in_shape->w;
    one = n <= TP_WG_BLOCK;
    if (!tp_dsp_grad_pointwise(p, in_shape)) {
        tp_conv2d_weight_grad_q(p, in_shape, x, x_zp, x_scale, out_shape, dy, o, row, x_live);
        return;
    }
    /* the bound is checked before a block's sums can pass it: |dY| < 2^15, a block's sum of
     * |dY| below 2^21, so `bound` (uint32) cannot wrap before the check */
    for (q = 0; q < n; q += np) {
        uint32_t before = bound;
        int32_t bsum;
        np = n - q < TP_WG_BLOCK ? n - q : TP_WG_BLOCK;
        bsum = dy->bytes == 2u ? wg_gather16(dy->q, q * oc + o, oc, np, gp, &bound)
                               : wg_gather8(dy->q, q * oc + o, oc, np, gp, &bound);
        g_sum += bsum;
        if (bound >= TP_WG_BOUND) {
            tp_conv2d_weight_grad_q(p, in_shape, x, x_zp, x_scale, out_shape, dy, o, row, x_live);
            return;
        }
        if (bound != before) { /* a block of zero dY adds nothing (a dead channel: all) */
            wg_block(acc, x + q * ic, ic, gp, np, summed, x_live, x_zp * bsum,
                     one ? -x_zp * bsum : 0);
            summed = 1;
        }
    }
    c = x_scale * tp_gm_pow2(dy->e);
    if (!summed) { /* dY is zero at every position (a dead channel): so is the row */
        tp_dsp_zero32(acc, ic);
        if (c >= 0.0f && c <= 3.4028235e38f) {
            return; /* every (float)0 * c is +0.0f, whose bits are the int32 0's */
        }
    }
    off = one ? 0 : -x_zp * g_sum; /* one block: in the sums already */
    for (i = 0; off != 0 && i < ic; i++) {
        acc[i] += off;
    }
    wg_to_f32(row, ic, c);
}

/* Positions per run of the bias sums' halfword lanes: 256 values of at most 128 in magnitude sum
 * within [-32768, 32512], exact in an int16 lane. */
#define TP_BIAS_RUN 256u

/* The bias sums of an int8 map four channels a word: per position, SXTAB16 adds channels 0 and
 * 2 of the word to one pair of halfword lanes and (rotated by 8) channels 1 and 3 to another;
 * the lanes are added to int64 sums every TP_BIAS_RUN positions. Other maps, channel counts and
 * an odd last one to three channels: the reference. */
void tp_arm_bias_sums_q(const tp_gmap *dy, uint32_t positions, uint32_t n_out, uint32_t o0,
                        uint32_t nc, int64_t *sums)
{
    uint32_t j = 0u;
    if (dy->bytes == 1u && n_out % 4u == 0u && o0 % 4u == 0u) {
        for (; j + 4u <= nc; j += 4u) {
            const int8_t *q = (const int8_t *)dy->q + o0 + j;
            int64_t t0 = 0, t1 = 0, t2 = 0, t3 = 0;
            uint32_t i, k, n;
            for (i = 0; i < positions; i += n) {
                uint32_t ev = 0u, od = 0u; /* lanes (channel 0, 2) and (1, 3) */
                n = positions - i > TP_BIAS_RUN ? TP_BIAS_RUN : positions - i;
                for (k = 0; k + 4u <= n; k += 4u, q += 4u * n_out) {
                    uint32_t w0 = tp_dsp_rd32(q), w1 = tp_dsp_rd32(q + n_out);
                    uint32_t w2 = tp_dsp_rd32(q + 2u * n_out), w3 = tp_dsp_rd32(q + 3u * n_out);
                    ev = tp_sxtab16(tp_sxtab16(tp_sxtab16(tp_sxtab16(ev, w0), w1), w2), w3);
                    od = tp_sxtab16_odd(tp_sxtab16_odd(tp_sxtab16_odd(tp_sxtab16_odd(od, w0), w1),
                                                       w2),
                                        w3);
                }
                for (; k < n; k++, q += n_out) {
                    uint32_t w0 = tp_dsp_rd32(q);
                    ev = tp_sxtab16(ev, w0);
                    od = tp_sxtab16_odd(od, w0);
                }
                t0 += tp_lane_lo(ev);
                t2 += tp_lane_hi(ev);
                t1 += tp_lane_lo(od);
                t3 += tp_lane_hi(od);
            }
            sums[j] = t0;
            sums[j + 1u] = t1;
            sums[j + 2u] = t2;
            sums[j + 3u] = t3;
        }
    }
    if (j < nc) {
        tp_bias_sums_q(dy, positions, n_out, o0 + j, nc - j, sums + j);
    }
}

#else
/* ISO C wants a declaration in every translation unit */
typedef int tp_conv_weight_grad_arm_unused;
#endif
