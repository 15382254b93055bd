/* tp_depthwise_weight_grad_arm.c - the weight gradient of DEPTHWISE_CONV_2D (up to 3 x 3,
 * strides 1 and 2) with integer maps for Cortex-M with the DSP extension, bit for bit the
 * reference kernel (kernels/ref/tp_weighted_gradq.c); other shapes run the reference kernel.
 *
 * Row o (its kh x kw taps): channel o's dY gathered into an int16 plane (rows padded to an even
 * width with zeros) and its input channel's x - zp into a zero-padded int16 plane (each row's
 * columns split by phase mod the stride, so that a tap reads consecutive values), both on the
 * stack; a tap's sum is then the plane's dot product with a window of the input plane, two
 * products an SMLAD. Padding contributes zeros, as the reference's tap ranges leave those
 * positions out. Stride 1 with three taps a row (VWW's 6x6 and 3x3 maps) lays the dY plane out
 * as wide as the input plane, zeros past its columns: each kernel row's three taps are then
 * dot products over the whole planes, one loop. Exact in int32 when sum |dY| * 255 is below 2^31
 * (|x - zp| <= 255); larger planes or sums: the reference.
 */
#include "tinyprop.h"
#include "tp_dsp.h"

#if TP_KERNELS_DSP

#define TP_GRAD_DWW_D 144u /* dY values of a row held (12 x 12) */
#define TP_GRAD_DWW_X 208u /* input values held (14 x 14 with stride 1) */

/* Whether channel ch of x (n positions, ic apart) is at zp everywhere (VWW's pruned channels):
 * then every x - zp is 0, and so is each tap's sum. A live one stops at its first other value. */
static int dww_at_zp(const int8_t *x, uint32_t n, uint32_t ic, int32_t zp)
{
    uint32_t p;
    for (p = 0; p < n; p++, x += ic) {
        if (*x != zp) {
            return 0;
        }
    }
    return 1;
}

/* A row whose every sum is 0: each tap's (float)0 times scale 2^e, as tp_gm_to_f32 makes it. */
static void dww_zero_row(float *row, uint32_t taps, float x_scale, int32_t e)
{
    uint32_t k;
    float cf = x_scale * tp_gm_pow2(e);
    for (k = 0; k < taps; k++) {
        row[k] = (float)0 * cf;
    }
}

void tp_arm_depthwise_conv2d_weight_grad_q(const tp_conv_params *p, const tp_shape *in_shape,
                                           const int8_t *x, int32_t x_zp, float x_scale,
                                           const tp_shape *out_shape, const tp_gmap *dy, uint32_t o,
                                           float *row)
{
    uint32_t s0 = p->stride[0], s1 = p->stride[1], k0 = p->k[0], k1 = p->k[1];
    uint32_t oh = (uint32_t)out_shape->h, ow = (uint32_t)out_shape->w, oc = (uint32_t)out_shape->c;
    uint32_t ih = (uint32_t)in_shape->h, iw = (uint32_t)in_shape->w, ic = (uint32_t)in_shape->c;
    uint32_t dw = (ow + 1u) & ~1u, pw = dw + (k1 - 1u) / (s1 ? s1 : 1u), rs = s1 * pw;
    uint32_t xh = (oh - 1u) * s0 + k0, ch = o / (uint32_t)p->depth_multiplier;
    uint32_t i, j, r, ph, kh, kw, bound = 0, jr[2][2], ds;
    int flat;
    float cf;
    int16_t d[TP_GRAD_DWW_D], xp[TP_GRAD_DWW_X];
    if (k0 < 1u || k0 > 3u || k1 < 1u || k1 > 3u || s0 < 1u || s0 > 2u || s1 < 1u || s1 > 2u ||
        oh == 0u || ow == 0u || oh * dw > TP_GRAD_DWW_D || xh * rs > TP_GRAD_DWW_X) {
        tp_depthwise_conv2d_weight_grad_q(p, in_shape, x, x_zp, x_scale, out_shape, dy, o, row);
        return;
    }
    /* flat: stride 1 with three taps a row, the dY plane as wide as the input plane (zeros past
     * ow) and two more input values: a kernel row's taps are dot products over the whole planes */
    flat = s0 == 1u && s1 == 1u && k1 == 3u && oh * pw <= TP_GRAD_DWW_D &&
           xh * rs + 2u <= TP_GRAD_DWW_X;
    ds = flat ? pw : dw;
    if (dww_at_zp(x + ch, ih * iw, ic, x_zp)) { /* every x - zp 0: every sum 0 */
        dww_zero_row(row, k0 * k1, x_scale, dy->e);
        return;
    }
    for (i = 0; i < oh; i++) {
        int16_t *dr = d + i * ds;
        if (dy->bytes == 1u) {
            const int8_t *q = (const int8_t *)dy->q + i * ow * oc + o;
            for (j = 0; j < ow; j++, q += oc) {
                int32_t g = *q;
                dr[j] = (int16_t)g;
                bound += (uint32_t)(g < 0 ? -g : g);
            }
        } else {
            const int16_t *q = (const int16_t *)dy->q + i * ow * oc + o;
            for (j = 0; j < ow; j++, q += oc) {
                int32_t g = *q;
                dr[j] = (int16_t)g;
                bound += (uint32_t)(g < 0 ? -g : g);
            }
        }
        for (j = ow; j < ds; j++) {
            dr[j] = 0;
            __asm__("" : "+r"(j)); /* short runs: no call to the C library's memset */
        }
    }
    if (bound >= (1u << 31) / 255u) { /* below 2^23 per value: no overflow on the way */
        tp_depthwise_conv2d_weight_grad_q(p, in_shape, x, x_zp, x_scale, out_shape, dy, o, row);
        return;
    }
    if (bound == 0u) { /* a dead channel (all of its dY zero): every sum 0 */
        dww_zero_row(row, k0 * k1, x_scale, dy->e);
        return;
    }
    if (flat) { /* the plane and the two values past it zeroed, then each live row's columns */
        uint32_t nx = iw < pw - p->pad[1] ? iw : pw - p->pad[1];
        for (j = 0; j < xh * rs + 2u; j += 2u) {
            xp[j] = 0;
            xp[j + 1u] = 0;
        }
        for (r = p->pad[0]; r < xh && r - p->pad[0] < ih; r++) {
            const int8_t *xs = x + (r - p->pad[0]) * iw * ic + ch;
            int16_t *xr = xp + r * pw + p->pad[1];
            for (j = 0; j < nx; j++, xs += ic) {
                xr[j] = (int16_t)(*xs - x_zp);
            }
        }
    } else {
        for (ph = 0; ph < s1; ph++) { /* padded column j s1 + ph: input column j s1 + ph - pad */
            /* the first j with j s1 + ph >= pad, and the end of those with ix < iw */
            uint32_t j0 = ph >= p->pad[1] ? 0u : (p->pad[1] - ph + s1 - 1u) / s1;
            uint32_t j1 = (iw + p->pad[1] - ph + s1 - 1u) / s1;
            j1 = j1 < pw ? j1 : pw;
            jr[ph][0] = j0 < j1 ? j0 : j1;
            jr[ph][1] = j1;
        }
        for (r = 0; r < xh; r++) { /* padded row r is input row r - pad[0] */
            int32_t iy = (int32_t)r - (int32_t)p->pad[0];
            int live = iy >= 0 && (uint32_t)iy < ih;
            for (ph = 0; ph < s1; ph++) {
                int16_t *xr = xp + r * rs + ph * pw;
                uint32_t j0 = live ? jr[ph][0] : 0u, j1 = live ? jr[ph][1] : 0u;
                for (j = 0; j < j0; j++) { /* short runs: no call to the C library's memset */
                    xr[j] = 0;
                    __asm__("" : "+r"(j));
                }
                if (j0 < j1) {
                    const int8_t *xs = x + ((uint32_t)iy * iw + j0 * s1 + ph - p->pad[1]) * ic + ch;
                    uint32_t sx = s1 * ic;
                    for (; j + 1u < j1; j += 2u, xs += 2u * sx) {
                        xr[j] = (int16_t)(xs[0] - x_zp);
                        xr[j + 1u] = (int16_t)(xs[sx] - x_zp);
                    }
                    if (j < j1) {
                        xr[j++] = (int16_t)(xs[0] - x_zp);
                    }
                }
                for (; j < pw; j++) {
                    xr[j] = 0;
                    __asm__("" : "+r"(j));
                }
            }
        }
    }
    /* tp_gm_to_f32 of an int32 sum: its float32 (rounded to nearest even, as i64_to_f32 does)
     * times the same float32 factor */
    cf = x_scale * tp_gm_pow2(dy->e);
    if (flat) {
        const int16_t *g, *gend = d + oh * pw;
        for (kh = 0; kh < k0; kh++) { /* tap (kh, kw): sum_t d[t] xp[kh pw + kw + t] */
            const int16_t *x0 = xp + kh * pw;
            int32_t a0 = 0, a1 = 0, a2 = 0;
            for (g = d; g != gend; g += 2, x0 += 2) {
                uint32_t gj = tp_dsp_rd_pair(g);
                a0 = tp_smlad(gj, tp_dsp_rd_pair(x0), a0);
                a1 = tp_smlad(gj, tp_dsp_rd_pair(x0 + 1), a1);
                a2 = tp_smlad(gj, tp_dsp_rd_pair(x0 + 2), a2);
            }
            row[kh * 3u] = (float)a0 * cf;
            row[kh * 3u + 1u] = (float)a1 * cf;
            row[kh * 3u + 2u] = (float)a2 * cf;
        }
        return;
    }
    for (kh = 0; kh < k0; kh++) {
        if (k1 == 3u) { /* a kernel row's three taps from one read of each dY pair */
            const int16_t *x0 = xp + kh * rs, *x1 = x0 + (1u % s1) * pw + 1u / s1;
            const int16_t *x2 = x0 + (2u % s1) * pw + 2u / s1, *g = d;
            int32_t a0 = 0, a1 = 0, a2 = 0;
            for (i = 0; i < oh; i++, x0 += s0 * rs, x1 += s0 * rs, x2 += s0 * rs, g += dw) {
                for (j = 0; j < dw; j += 2u) {
                    uint32_t gj = tp_dsp_rd_pair(g + j);
                    a0 = tp_smlad(gj, tp_dsp_rd_pair(x0 + j), a0);
                    a1 = tp_smlad(gj, tp_dsp_rd_pair(x1 + j), a1);
                    a2 = tp_smlad(gj, tp_dsp_rd_pair(x2 + j), a2);
                }
            }
            row[kh * 3u] = (float)a0 * cf;
            row[kh * 3u + 1u] = (float)a1 * cf;
            row[kh * 3u + 2u] = (float)a2 * cf;
            continue;
        }
        for (kw = 0; kw < k1; kw++) {
            const int16_t *xr = xp + kh * rs + (kw % s1) * pw + kw / s1, *g = d;
            int32_t a = 0;
            for (i = 0; i < oh; i++, xr += s0 * rs, g += dw) {
                for (j = 0; j < dw; j += 2u) {
                    a = tp_smlad(tp_dsp_rd_pair(g + j), tp_dsp_rd_pair(xr + j), a);
                }
            }
            row[kh * k1 + kw] = (float)a * cf;
        }
    }
}

#else
/* ISO C wants a declaration in every translation unit */
typedef int tp_depthwise_weight_grad_arm_unused;
#endif
