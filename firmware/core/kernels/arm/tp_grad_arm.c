/* tp_grad_arm.c - gradients with integer maps for Cortex-M with the DSP extension, bit for bit
 * the reference kernels (kernels/ref/tp_weighted_gradq.c), in the reference kernels' scratch:
 * the input gradients of 1x1 CONV_2D and 3x3 DEPTHWISE_CONV_2D and the weight gradient of 1x1
 * CONV_2D; other shapes run the reference kernels.
 *
 * Every input-gradient sum is exact in int32 (the fold's bits bound W^T dY' below 2^31,
 * tp_gm_fold_bits), so the order of the multiply-accumulates is free and SMLAD takes two at a
 * time. A weight gradient's int32 sums are exact when its bound, sum |dY| * 128, is below 2^31
 * (checked per row; else the reference's int64 sums); the result is the same int64, so the same
 * float32.
 *
 * - 1x1 input gradient, dX[p, i] = sum_o W[o, i] dY'[p, o]: a pixel's dY' folded once into the
 *   reference's int16 buffer; four inputs' sums in registers over all o, two output channels'
 *   weights (two words, four SXTB16) times (dY'[o], dY'[o + 1]) in eight SMLAxy; with trained
 *   rows held apart, (W[o, i], W[o + 1, i]) pairs, each one SMLAD.
 * - 3x3 depthwise input gradient (depth multiplier 1, strides 1 and 2), the correlation with the
 *   kernel turned around: per dX row and channel, the (up to three) dY rows it meets folded into
 *   zero-padded int16 planes on the stack (a stride-2 plane has zeros between its values, so
 *   both strides take the stride-1 sum), then per output two SMLADs a kernel row.
 * - 1x1 weight gradient, dW[o, i] = sum_p dY[p, o] x[p, i] - zp sum_p dY[p, o]: four inputs of a
 *   pixel unpacked from one word, each multiplied by dY[p, o] in one SMLAD with (dY, 0) or (0, dY).
 */
#include "tp_dsp.h"

#if TP_KERNELS_DSP

/* The widest dX row the depthwise kernel's stack planes take (wider maps: the reference). */
#define TP_GRAD_DW_MAX_W 128u
#define TP_GRAD_DW_PLANE (TP_GRAD_DW_MAX_W + 6u)

static int pw_covered(const tp_conv_params *p, const tp_shape *in_shape)
{
    return p->k[0] == 1u && p->k[1] == 1u && p->stride[0] == 1u && p->stride[1] == 1u &&
           p->pad[0] == 0u && p->pad[1] == 0u && (in_shape->c & 3) == 0;
}

static int dw_covered(const tp_conv_params *p, const tp_shape *in_shape, const tp_shape *out_shape)
{
    uint32_t s = p->stride[1];
    return p->k[0] == 3u && p->k[1] == 3u && p->depth_multiplier == 1 &&
           (p->stride[0] == 1u || p->stride[0] == 2u) && (s == 1u || s == 2u) &&
           p->pad[0] <= 2u && p->pad[1] <= 2u && (uint32_t)in_shape->w <= TP_GRAD_DW_MAX_W &&
           out_shape->w > 0 && s * ((uint32_t)out_shape->w - 1u) <= (uint32_t)in_shape->w + 1u;
}

/* Two int16 (lo, hi) as a word. */
static inline uint32_t pack16(int32_t lo, int32_t hi)
{
    return ((uint32_t)lo & 0xFFFFu) | ((uint32_t)hi << 16);
}

static inline uint32_t rd_pair(const int16_t *p)
{
    uint32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}

/* tp_gm_fold_one with the channel's shift at hand (sh = top - k). */
static inline int32_t fold_fast(int32_t q, uint32_t m, int32_t sh, int32_t lim)
{
    int64_t v = (int64_t)q * (int64_t)m;
    if (sh >= 9 && sh <= 31) { /* the usual case, in 32-bit halves: |v| / 2^sh < 2^30 */
        uint64_t u = (uint64_t)v;
        uint32_t lo = (uint32_t)u, hi = (uint32_t)(u >> 32), s = (uint32_t)sh;
        int32_t r = tp_dsp_i32((lo >> s) | (hi << (32u - s))); /* the floor */
        uint32_t rem = lo & ((1u << s) - 1u), half = 1u << (s - 1u);
        r += (rem > half || (rem == half && (r & 1))) ? 1 : 0;
        return r > lim ? lim : r < -lim ? -lim : r;
    }
    if (sh <= 0) {
        uint32_t l = sh < -62 ? 62u : (uint32_t)-sh;
        v = (int64_t)((uint64_t)v << l);
    } else if (sh > 40) {
        v = 0; /* |q m| < 2^39: below one half */
    } else {
        uint64_t u = (uint64_t)v + 0x8000000000000000ull, mask = ((uint64_t)1 << sh) - 1u;
        uint64_t rem = u & mask, half = (uint64_t)1 << (sh - 1);
        v = (int64_t)((u >> sh) - (0x8000000000000000ull >> sh));
        v += (rem > half || (rem == half && (v & 1))) ? 1 : 0;
    }
    return (int32_t)(v > lim ? lim : v < -lim ? -lim : v);
}

/* ---- 1x1 input gradient ---- */

/* a[i..] += sum over the pair o, o+1 of W[o, i] dY'[o]: rows r0, r1, g the dY' pair. */
static TP_DSP_NOINLINE void pw_pair(int32_t *a, const int8_t *r0, const int8_t *r1, uint32_t g,
                                    uint32_t n)
{
    uint32_t i;
    for (i = 0; i < n; i += 4u) {
        uint32_t w0 = tp_dsp_rd32(r0 + i), w1 = tp_dsp_rd32(r1 + i);
        uint32_t e0 = tp_sxtb16(w0), o0 = tp_sxtb16(w0 >> 8);
        uint32_t e1 = tp_sxtb16(w1), o1 = tp_sxtb16(w1 >> 8);
        a[i] = tp_smlad((e0 & 0xFFFFu) | (e1 << 16), g, a[i]);
        a[i + 1u] = tp_smlad((o0 & 0xFFFFu) | (o1 << 16), g, a[i + 1u]);
        a[i + 2u] = tp_smlad((e0 >> 16) | (e1 & 0xFFFF0000u), g, a[i + 2u]);
        a[i + 3u] = tp_smlad((o0 >> 16) | (o1 & 0xFFFF0000u), g, a[i + 3u]);
    }
}

/* a[i] = sum_o W[o, i] dY'[o] for all i (a multiple of 4) when the weights are one contiguous
 * [oc][ic] array (no trained rows held apart): four sums in registers over all o. */
static TP_DSP_NOINLINE void pw_pixel(int32_t *a, const int8_t *wt, const int16_t *fy,
                                     uint32_t ic, uint32_t oc)
{
    uint32_t i, o;
    for (i = 0; i < ic; i += 4u) {
        const int8_t *r = wt + i;
        int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        for (o = 0; o + 1u < oc; o += 2u, r += 2u * ic) {
            uint32_t w0 = tp_dsp_rd32(r), w1 = tp_dsp_rd32(r + ic), g = rd_pair(fy + o);
            uint32_t e0 = tp_sxtb16(w0), o0 = tp_sxtb16(w0 >> 8);
            uint32_t e1 = tp_sxtb16(w1), o1 = tp_sxtb16(w1 >> 8);
            /* g = (dY'[o], dY'[o + 1]); e0 = (W[o, i], W[o, i + 2]), o0 the odd inputs */
            a0 = tp_smlabt(e1, g, tp_smlabb(e0, g, a0));
            a1 = tp_smlabt(o1, g, tp_smlabb(o0, g, a1));
            a2 = tp_smlatt(e1, g, tp_smlatb(e0, g, a2));
            a3 = tp_smlatt(o1, g, tp_smlatb(o0, g, a3));
        }
        if (o < oc) { /* an odd last channel */
            uint32_t w0 = tp_dsp_rd32(r), g = pack16(fy[o], 0);
            uint32_t e0 = tp_sxtb16(w0), o0 = tp_sxtb16(w0 >> 8);
            a0 = tp_smlad(e0 & 0xFFFFu, g, a0);
            a1 = tp_smlad(o0 & 0xFFFFu, g, a1);
            a2 = tp_smlad(e0 >> 16, g, a2);
            a3 = tp_smlad(o0 >> 16, g, a3);
        }
        a[i] = a0;
        a[i + 1u] = a1;
        a[i + 2u] = a2;
        a[i + 3u] = a3;
    }
}

void tp_arm_conv2d_input_grad_q(const tp_conv_params *p, const tp_shape *in_shape,
                                const tp_shape *out_shape, const tp_weights *w,
                                const tp_gm_fold *f, const tp_gmap *dy, tp_gm_writer *dx,
                                void *scratch)
{
    uint32_t iw = (uint32_t)in_shape->w, ic = (uint32_t)in_shape->c, oc = (uint32_t)out_shape->c;
    int32_t *acc = (int32_t *)scratch, lim = ((int32_t)1 << f->bits) - 1;
    int16_t *fy = (int16_t *)(void *)(acc + iw * ic);
    uint32_t y, x, o, i, m, step;
    int32_t k;
    if (!pw_covered(p, in_shape) || !f->live) {
        tp_conv2d_input_grad_q(p, in_shape, out_shape, w, f, dy, dx, scratch);
        return;
    }
    for (y = 0; y < (uint32_t)in_shape->h; y++) {
        for (x = 0; x < iw; x++) {
            uint32_t at = (y * iw + x) * oc;
            int32_t *a = acc + x * ic;
            for (o = 0; o < oc; o++) {
                tp_gm_scale_parts(tp_weights_scale(w, o), &m, &k);
                fy[o] = (int16_t)fold_fast(tp_gm_get(dy, at + o), m, f->top - k, lim);
            }
            if (w->held_map == 0) {
                pw_pixel(a, w->data, fy, ic, oc);
                continue;
            }
            for (i = 0; i < ic; i++) {
                a[i] = 0;
            }
            for (o = 0; o + 1u < oc; o += 2u) {
                const int8_t *r0 = tp_weights_row(w, o, &step), *r1 = tp_weights_row(w, o + 1u,
                                                                                    &step);
                pw_pair(a, r0, r1, pack16(fy[o], fy[o + 1u]), ic);
            }
            if (o < oc) { /* an odd last channel: its pair's other half zero */
                const int8_t *r0 = tp_weights_row(w, o, &step);
                pw_pair(a, r0, r0, pack16(fy[o], 0), ic);
            }
        }
        tp_gm_row_i32(dx, y, acc);
    }
}

/* ---- 3x3 depthwise input gradient ---- */

void tp_arm_depthwise_conv2d_input_grad_q(const tp_conv_params *p, const tp_shape *in_shape,
                                          const tp_shape *out_shape, const tp_weights *w,
                                          const tp_gm_fold *f, const tp_gmap *dy,
                                          tp_gm_writer *dx, void *scratch)
{
    uint32_t c = (uint32_t)in_shape->c, iw = (uint32_t)in_shape->w, ow = (uint32_t)out_shape->w;
    uint32_t s0 = p->stride[0], s1 = p->stride[1], y, ch, kh, x, ox, m, step;
    int32_t *acc = (int32_t *)scratch, lim = ((int32_t)1 << f->bits) - 1, k;
    int32_t src[3];
    int16_t plane[3][TP_GRAD_DW_PLANE];
    if (!dw_covered(p, in_shape, out_shape) || !f->live) {
        tp_depthwise_conv2d_input_grad_q(p, in_shape, out_shape, w, f, dy, dx, scratch);
        return;
    }
    for (kh = 0; kh < 3u; kh++) {
        for (x = 0; x < TP_GRAD_DW_PLANE; x++) {
            plane[kh][x] = 0;
        }
    }
    for (y = 0; y < (uint32_t)in_shape->h; y++) {
        for (kh = 0; kh < 3u; kh++) { /* the dY row this dX row meets through kernel row kh */
            int32_t num = (int32_t)y + (int32_t)p->pad[0] - (int32_t)kh;
            src[kh] = num < 0 || num % (int32_t)s0 != 0 ||
                              (uint32_t)num / s0 >= (uint32_t)out_shape->h
                          ? -1
                          : num / (int32_t)s0;
        }
        for (ch = 0; ch < c; ch++) {
            const int8_t *wo = tp_weights_row(w, ch, &step);
            uint32_t w21[3], w0[3], live[3];
            int32_t sh;
            tp_gm_scale_parts(tp_weights_scale(w, ch), &m, &k);
            sh = f->top - k;
            for (kh = 0; kh < 3u; kh++) {
                /* dX[x] takes W[kh, kw] from plane index 2 + x + pad - kw: (w2, w1) at x + pad,
                 * (w0, 0) at x + pad + 2 */
                w21[kh] = pack16(wo[(3u * kh + 2u) * step], wo[(3u * kh + 1u) * step]);
                w0[kh] = pack16(wo[3u * kh * step], 0);
                live[kh] = src[kh] >= 0;
                if (live[kh]) {
                    uint32_t at = (uint32_t)src[kh] * ow * c + ch;
                    for (ox = 0; ox < ow; ox++) {
                        plane[kh][2u + s1 * ox] =
                            (int16_t)fold_fast(tp_gm_get(dy, at + ox * c), m, sh, lim);
                    }
                }
            }
            for (x = 0; x < iw; x++) {
                uint32_t b = x + p->pad[1];
                int32_t a = 0;
                for (kh = 0; kh < 3u; kh++) {
                    if (live[kh]) {
                        a = tp_smlad(rd_pair(&plane[kh][b]), w21[kh], a);
                        a = tp_smlad(rd_pair(&plane[kh][b + 2u]), w0[kh], a);
                    }
                }
                acc[x * c + ch] = a;
            }
        }
        tp_gm_row_i32(dx, y, acc);
    }
}

/* ---- 1x1 weight gradient ---- */

void tp_arm_conv2d_weight_grad_q(const tp_conv_params *p, const tp_shape *in_shape,
                                 const int8_t *x, int32_t x_zp, float x_scale,
                                 const tp_shape *out_shape, const tp_gmap *dy, uint32_t o,
                                 float *row)
{
    uint32_t ic = (uint32_t)in_shape->c, oc = (uint32_t)out_shape->c, n, q, i;
    int64_t g_sum = 0, bound = 0;
    n = (uint32_t)in_shape->h * (uint32_t)in_shape->w;
    if (pw_covered(p, in_shape)) {
        for (q = 0; q < n; q++) {
            int32_t g = tp_gm_get(dy, q * oc + o);
            g_sum += g;
            bound += g < 0 ? -g : g;
        }
    }
    if (!pw_covered(p, in_shape) || bound * 128 >= ((int64_t)1 << 31)) {
        tp_conv2d_weight_grad_q(p, in_shape, x, x_zp, x_scale, out_shape, dy, o, row);
        return;
    }
    for (i = 0; i < ic; i += 4u) {
        int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        const int8_t *xp = x + i;
        for (q = 0; q < n; q++, xp += ic) {
            int32_t g = tp_gm_get(dy, q * oc + o);
            uint32_t v = tp_dsp_rd32(xp), e = tp_sxtb16(v), d = tp_sxtb16(v >> 8);
            uint32_t glo = (uint32_t)g & 0xFFFFu, ghi = (uint32_t)g << 16;
            a0 = tp_smlad(e, glo, a0);
            a1 = tp_smlad(d, glo, a1);
            a2 = tp_smlad(e, ghi, a2);
            a3 = tp_smlad(d, ghi, a3);
        }
        row[i] = tp_gm_to_f32(a0 - (int64_t)x_zp * g_sum, dy->e, x_scale);
        row[i + 1u] = tp_gm_to_f32(a1 - (int64_t)x_zp * g_sum, dy->e, x_scale);
        row[i + 2u] = tp_gm_to_f32(a2 - (int64_t)x_zp * g_sum, dy->e, x_scale);
        row[i + 3u] = tp_gm_to_f32(a3 - (int64_t)x_zp * g_sum, dy->e, x_scale);
    }
}

#else
typedef int tp_grad_arm_unused; /* ISO C wants a declaration in every translation unit */
#endif
