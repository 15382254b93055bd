/* tp_grad_arm.c - gradients with integer maps for Cortex-M with the DSP extension, bit for bit
 * the reference kernels (kernels/ref/tp_weighted_gradq.c), in the reference kernels' scratch:
 * the input gradients of 1x1 CONV_2D and 3x3 DEPTHWISE_CONV_2D and the weight gradient of 1x1
 * CONV_2D; other shapes run the reference kernels.
 *
 * Every input-gradient sum is exact in int32 (the fold's bits bound W^T dY' below 2^31,
 * tp_gm_fold_bits), so the order of the multiply-accumulates is free and SMLAD takes two at a
 * time. A weight gradient's int32 sums (and their difference with zp sum dY) are exact when
 * sum |dY| * 255 is below 2^31 (checked per row; else the reference's int64 sums); the result is
 * the same integer, so the same float32.
 *
 * - 1x1 input gradient, dX[p, i] = sum_o W[o, i] dY'[p, o]: output channels in blocks of
 *   TP_PW_BLOCK, each block's weight rows (held apart or not) and fold parameters (the weight
 *   scale's parts, hoisted out of the pixel loop) in a table on the stack; per pixel pair, the
 *   block's dY' folded (int8 dY: in int32, see pw_round8) into the table as (dY'[p0], dY'[p1]),
 *   then per four inputs of both pixels eight sums in registers over the block, one word of
 *   weights unpacked by two SXTB16 for sixteen SMLAxy.
 * - 3x3 depthwise input gradient (depth multiplier 1, strides 1 and 2), the correlation with the
 *   kernel turned around: per dX row and channel, the (up to three) dY rows it meets folded into
 *   zero-padded int16 planes on the stack (a stride-2 plane has zeros between its values, so
 *   both strides take the stride-1 sum), then per output two SMLADs a kernel row.
 * - 1x1 weight gradient, dW[o, i] = sum_p dY[p, o] x[p, i] - zp sum_p dY[p, o]: dY's column
 *   gathered in blocks as (dY[p], dY[p + 1]) pairs on the stack; per four inputs, two positions'
 *   words of x unpacked by SXTB16 for eight SMLAxy; the int32 sums in the row, then made float32
 *   by one conversion and one product each.
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

/* Output channels per block: a block's table (pw_ent) and fold parameters live on the stack. */
#define TP_PW_BLOCK 32u

/* The fold's right shift below relies on >> of a negative int32 being arithmetic (as the
 * requantization in tp_dsp.h does): GCC and Clang define it so. */
typedef char tp_pw_asr_check[(-5 >> 1) == -3 ? 1 : -1];

/* One output channel o of a block: its weight row and the folded dY' of the current pixel pair
 * (dY'[p0, o] low, dY'[p1, o] high), read together (LDRD) by the multiply-accumulate loop. */
typedef struct {
    const int8_t *row;
    uint32_t g;
} pw_ent;

/* A block's fold parameters: m[j] its channel's mantissa and s[j] the shift (top - k) for
 * fold_fast; or, in a block pw_prepare calls fast, s[j] = sh | (2^(sh-1) - 1) << 8 with
 * 1 <= sh <= 25 (m 0 for a channel whose dY' is 0). */
typedef struct {
    int32_t m[TP_PW_BLOCK];
    uint32_t s[TP_PW_BLOCK];
} pw_fold_params;

/* SXTB16 of x rotated right by 8 (the odd bytes), one instruction on the target. */
static inline uint32_t pw_sxtb16_odd(uint32_t x)
{
#if defined(__ARM_FEATURE_DSP) && !defined(TP_KERNELS_DSP_EMULATION)
    uint32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
    return r;
#else
    return tp_sxtb16(x >> 8);
#endif
}

/* Block [o0, o0 + nb)'s rows and fold parameters; returns 1 when the block may take the int8
 * fold pw_fold8: int8 dY (|q| <= 127, m < 2^24: q m fits int32 with room for the rounding
 * constant while sh <= 25), every shift in [1, 25] or the channel's dY' zero (sh >= 32 with
 * |q m| < 2^31: below one half). */
static int pw_prepare(pw_ent *t, pw_fold_params *fp, const tp_weights *w, const tp_gm_fold *f,
                      uint32_t o0, uint32_t nb, int int8)
{
    uint32_t j, m, step;
    int32_t k, fast = int8;
    for (j = 0; j < nb; j++) {
        int32_t sh;
        t[j].row = tp_weights_row(w, o0 + j, &step);
        t[j].g = 0u;
        tp_gm_scale_parts(tp_weights_scale(w, o0 + j), &m, &k);
        sh = f->top - k;
        fp->m[j] = (int32_t)m;
        fp->s[j] = (uint32_t)sh;
        if (!(m == 0u || sh >= 32 || (sh >= 1 && sh <= 25))) {
            fast = 0;
        }
    }
    if (fast) {
        for (j = 0; j < nb; j++) {
            int32_t sh = (int32_t)fp->s[j];
            if (fp->m[j] == 0 || sh >= 32) {
                fp->m[j] = 0;
                fp->s[j] = 1u;
            } else {
                fp->s[j] = (uint32_t)sh | ((1u << (sh - 1)) - 1u) << 8;
            }
        }
    }
    return fast;
}

/* round(q m / 2^sh) half to even, sh = s & 0xFF in [1, 25], b = s >> 8 = 2^(sh-1) - 1: adding
 * b plus the floor's parity carries into the quotient exactly when the remainder is above one
 * half, or one half with an odd floor. |q m| + b + 1 < 2^31. */
static inline int32_t pw_round8(int32_t v, uint32_t s)
{
    uint32_t sh = s & 0xFFu;
    return (v + (int32_t)(s >> 8) + ((v >> sh) & 1)) >> sh;
}

/* v clamped to +-lim, lim = 2^15 - 1 (the fold's usual bits): SSAT to 16 bits, then -2^15. */
static inline int32_t pw_clamp15(int32_t v)
{
#if defined(__ARM_FEATURE_DSP) && !defined(TP_KERNELS_DSP_EMULATION)
    v = __ssat(v, 16);
#else
    v = v > 32767 ? 32767 : v < -32768 ? -32768 : v;
#endif
    return v < -32767 ? -32767 : v;
}

/* The block's dY' of pixels p0 (d0) and p1 (d1), int8 dY, a fast block; lim 2^15 - 1 when
 * `b15`. */
TP_DSP_INLINE void pw_fold8_body(pw_ent *t, const pw_fold_params *fp, const int8_t *d0,
                                 const int8_t *d1, uint32_t nb, int32_t lim, int b15)
{
    uint32_t j;
    for (j = 0; j < nb; j++) {
        int32_t m = fp->m[j];
        uint32_t s = fp->s[j];
        int32_t v0 = pw_round8(d0[j] * m, s), v1 = pw_round8(d1[j] * m, s);
        if (b15) {
            v0 = pw_clamp15(v0);
            v1 = pw_clamp15(v1);
        } else {
            v0 = v0 > lim ? lim : v0 < -lim ? -lim : v0;
            v1 = v1 > lim ? lim : v1 < -lim ? -lim : v1;
        }
        t[j].g = pack16(v0, v1);
    }
}

static TP_DSP_NOINLINE void pw_fold8(pw_ent *t, const pw_fold_params *fp, const int8_t *d0,
                                     const int8_t *d1, uint32_t nb, int32_t lim)
{
    if (lim == 32767) {
        pw_fold8_body(t, fp, d0, d1, nb, lim, 1);
    } else {
        pw_fold8_body(t, fp, d0, d1, nb, lim, 0);
    }
}

/* The same for any block: fold_fast, dY int16 (bytes 2) or int8. */
TP_DSP_INLINE void pw_fold_any(pw_ent *t, const pw_fold_params *fp, const void *dq, uint32_t a0,
                               uint32_t a1, uint32_t nb, int32_t lim, uint32_t bytes)
{
    uint32_t j;
    for (j = 0; j < nb; j++) {
        int32_t q0 = bytes == 2u ? ((const int16_t *)dq)[a0 + j] : ((const int8_t *)dq)[a0 + j];
        int32_t q1 = bytes == 2u ? ((const int16_t *)dq)[a1 + j] : ((const int8_t *)dq)[a1 + j];
        uint32_t m = (uint32_t)fp->m[j];
        int32_t sh = (int32_t)fp->s[j];
        t[j].g = pack16(fold_fast(q0, m, sh, lim), fold_fast(q1, m, sh, lim));
    }
}

static TP_DSP_NOINLINE void pw_fold16(pw_ent *t, const pw_fold_params *fp, const void *dq,
                                      uint32_t a0, uint32_t a1, uint32_t nb, int32_t lim)
{
    pw_fold_any(t, fp, dq, a0, a1, nb, lim, 2u);
}

static TP_DSP_NOINLINE void pw_fold8_any(pw_ent *t, const pw_fold_params *fp, const void *dq,
                                         uint32_t a0, uint32_t a1, uint32_t nb, int32_t lim)
{
    pw_fold_any(t, fp, dq, a0, a1, nb, lim, 1u);
}

/* dX[p, i..i+3] (+)= sum over the block's channels o of W[o, i..i+3] dY'[p, o] for pixel p0
 * (into a0) and, when `two`, p1 (into a1), every i a multiple of 4 below ic; `add`: add to
 * what a0, a1 hold (a later block). Per channel: one word of weights (four inputs) unpacked by
 * two SXTB16 into (W[i], W[i+2]) and (W[i+1], W[i+3]), times both pixels' dY' (the entry's
 * halves): eight SMLAxy, sixteen with two pixels. */
TP_DSP_INLINE void pw_mac(int32_t *a0, int32_t *a1, const pw_ent *t, uint32_t nb, uint32_t ic,
                          int add, int two)
{
    const pw_ent *end = t + nb;
    uint32_t i;
    for (i = 0; i < ic; i += 4u) {
        const pw_ent *e;
        int32_t x0 = 0, x1 = 0, x2 = 0, x3 = 0, y0 = 0, y1 = 0, y2 = 0, y3 = 0;
        if (add) {
            x0 = a0[i];
            x1 = a0[i + 1u];
            x2 = a0[i + 2u];
            x3 = a0[i + 3u];
            if (two) {
                y0 = a1[i];
                y1 = a1[i + 1u];
                y2 = a1[i + 2u];
                y3 = a1[i + 3u];
            }
        }
        for (e = t; e != end; e++) {
            uint32_t v = tp_dsp_rd32(e->row + i), g = e->g;
            uint32_t ev = tp_sxtb16(v), od = pw_sxtb16_odd(v);
            x0 = tp_smlabb(ev, g, x0);
            x2 = tp_smlatb(ev, g, x2);
            x1 = tp_smlabb(od, g, x1);
            x3 = tp_smlatb(od, g, x3);
            if (two) {
                y0 = tp_smlabt(ev, g, y0);
                y2 = tp_smlatt(ev, g, y2);
                y1 = tp_smlabt(od, g, y1);
                y3 = tp_smlatt(od, g, y3);
            }
        }
        a0[i] = x0;
        a0[i + 1u] = x1;
        a0[i + 2u] = x2;
        a0[i + 3u] = x3;
        if (two) {
            a1[i] = y0;
            a1[i + 1u] = y1;
            a1[i + 2u] = y2;
            a1[i + 3u] = y3;
        }
    }
}

static TP_DSP_NOINLINE void pw_mac2(int32_t *a0, int32_t *a1, const pw_ent *t, uint32_t nb,
                                    uint32_t ic, int add)
{
    if (add) {
        pw_mac(a0, a1, t, nb, ic, 1, 1);
    } else {
        pw_mac(a0, a1, t, nb, ic, 0, 1);
    }
}

static TP_DSP_NOINLINE void pw_mac1(int32_t *a0, const pw_ent *t, uint32_t nb, uint32_t ic,
                                    int add)
{
    if (add) {
        pw_mac(a0, a0, t, nb, ic, 1, 0);
    } else {
        pw_mac(a0, a0, t, nb, ic, 0, 0);
    }
}

/* The block's dY' of pixels at dY offsets a0 and a1 (a1 = a0 for a lone pixel). */
static void pw_fold(pw_ent *t, const pw_fold_params *fp, int fast, const tp_gmap *dy, uint32_t a0,
                    uint32_t a1, uint32_t nb, int32_t lim)
{
    if (fast) {
        pw_fold8(t, fp, (const int8_t *)dy->q + a0, (const int8_t *)dy->q + a1, nb, lim);
    } else if (dy->bytes == 2u) {
        pw_fold16(t, fp, dy->q, a0, a1, nb, lim);
    } else {
        pw_fold8_any(t, fp, dy->q, a0, a1, nb, lim);
    }
}

void tp_arm_conv2d_input_grad_q(const tp_conv_params *p, const tp_shape *in_shape,
                                const tp_shape *out_shape, const tp_weights *w,
                                const tp_gm_fold *f, const tp_gmap *dy, tp_gm_writer *dx,
                                void *scratch)
{
    uint32_t iw = (uint32_t)in_shape->w, ic = (uint32_t)in_shape->c, oc = (uint32_t)out_shape->c;
    int32_t *acc = (int32_t *)scratch, lim = ((int32_t)1 << f->bits) - 1;
    uint32_t y, x, o0, nb;
    int fast = 0;
    pw_ent t[TP_PW_BLOCK];
    pw_fold_params fp;
    if (!pw_covered(p, in_shape) || !f->live) {
        tp_conv2d_input_grad_q(p, in_shape, out_shape, w, f, dy, dx, scratch);
        return;
    }
    for (y = 0; y < (uint32_t)in_shape->h; y++) {
        for (o0 = 0; o0 < oc; o0 += nb) {
            uint32_t at = y * iw * oc + o0;
            int add = o0 != 0u;
            nb = oc - o0 < TP_PW_BLOCK ? oc - o0 : TP_PW_BLOCK;
            if (y == 0u || oc > TP_PW_BLOCK) { /* one block: prepared once */
                fast = pw_prepare(t, &fp, w, f, o0, nb, dy->bytes == 1u);
            }
            for (x = 0; x + 1u < iw; x += 2u, at += 2u * oc) {
                pw_fold(t, &fp, fast, dy, at, at + oc, nb, lim);
                pw_mac2(acc + x * ic, acc + (x + 1u) * ic, t, nb, ic, add);
            }
            if (x < iw) { /* an odd last pixel */
                pw_fold(t, &fp, fast, dy, at, at, nb, lim);
                pw_mac1(acc + x * ic, t, nb, ic, add);
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

/* Positions per block of packed dY pairs on the stack (even). */
#define TP_WG_BLOCK 64u
/* The bound on sum |dY| below which the int32 path is exact: sum |dY| * 255 < 2^31 (then the
 * sums, |x| <= 128, and the difference, |x - zp| <= 255, fit int32). */
#define TP_WG_BOUND 8421505u

/* dY[p, o] of positions [p0, p0 + np) packed in pairs (dY[p], dY[p + 1]) into gp (a last odd
 * one with 0); returns sum dY and adds sum |dY| to *bound. */
TP_DSP_INLINE int32_t wg_gather(const void *dq, uint32_t at, uint32_t oc, uint32_t np,
                                uint32_t *gp, uint32_t *bound, uint32_t bytes)
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
        gp[j >> 1] = pack16(g0, g1);
    }
    *bound += b;
    return sum;
}

static TP_DSP_NOINLINE int32_t wg_gather8(const void *dq, uint32_t at, uint32_t oc, uint32_t np,
                                          uint32_t *gp, uint32_t *bound)
{
    return wg_gather(dq, at, oc, np, gp, bound, 1u);
}

static TP_DSP_NOINLINE int32_t wg_gather16(const void *dq, uint32_t at, uint32_t oc,
                                           uint32_t np, uint32_t *gp, uint32_t *bound)
{
    return wg_gather(dq, at, oc, np, gp, bound, 2u);
}

/* s[0..3] (+)= sum over positions p of the block of dY[p] x[p, i..i+3], for every quad i of
 * ic; x at the block's first position, np positions (np even, or odd with the last pair's
 * second dY 0: its x is not read). Per position pair: two words of x (four inputs each),
 * four SXTB16, eight SMLAxy with the pair's dY. */
static TP_DSP_NOINLINE void wg_block(int32_t *s, const int8_t *x, uint32_t ic, const uint32_t *gp,
                                     uint32_t np, int add)
{
    uint32_t i, pairs = np >> 1;
    for (i = 0; i < ic; i += 4u) {
        const int8_t *xp = x + i;
        const uint32_t *g = gp, *gend = gp + pairs;
        int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        if (add) {
            a0 = s[i];
            a1 = s[i + 1u];
            a2 = s[i + 2u];
            a3 = s[i + 3u];
        }
        for (; g != gend; g++, xp += 2u * ic) {
            uint32_t v0 = tp_dsp_rd32(xp), v1 = tp_dsp_rd32(xp + ic), gg = *g;
            uint32_t e0 = tp_sxtb16(v0), o0 = pw_sxtb16_odd(v0);
            uint32_t e1 = tp_sxtb16(v1), o1 = pw_sxtb16_odd(v1);
            a0 = tp_smlabt(e1, gg, tp_smlabb(e0, gg, a0));
            a2 = tp_smlatt(e1, gg, tp_smlatb(e0, gg, a2));
            a1 = tp_smlabt(o1, gg, tp_smlabb(o0, gg, a1));
            a3 = tp_smlatt(o1, gg, tp_smlatb(o0, gg, a3));
        }
        if (np & 1u) { /* the odd last position */
            uint32_t v0 = tp_dsp_rd32(xp), gg = *g;
            uint32_t e0 = tp_sxtb16(v0), o0 = pw_sxtb16_odd(v0);
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

/* dW[o, i] = sum_p dY[p, o] x[p, i] - zp sum_p dY[p, o] as float32: its int32 sums, made in the
 * row itself (int32 words, then each replaced by its float32), exact while sum |dY| is below
 * TP_WG_BOUND (else the reference's int64 sums, the same value), then one int32 -> float32
 * conversion (round to nearest even, as tp_gm_to_f32's) and one product with scale * 2^e (the
 * same float32 product). The row's sums are bounded as a whole, so positions go in blocks
 * (TP_WG_BLOCK) whatever their number. */
void tp_arm_conv2d_weight_grad_q(const tp_conv_params *p, const tp_shape *in_shape,
                                 const int8_t *x, int32_t x_zp, float x_scale,
                                 const tp_shape *out_shape, const tp_gmap *dy, uint32_t o,
                                 float *row)
{
    uint32_t ic = (uint32_t)in_shape->c, oc = (uint32_t)out_shape->c, n, q, i, np, bound = 0u;
    int32_t *acc = (int32_t *)(void *)row, g_sum = 0, off;
    uint32_t gp[TP_WG_BLOCK / 2u];
    float c;
    n = (uint32_t)in_shape->h * (uint32_t)in_shape->w;
    if (!pw_covered(p, in_shape)) {
        tp_conv2d_weight_grad_q(p, in_shape, x, x_zp, x_scale, out_shape, dy, o, row);
        return;
    }
    /* the bound is checked before a block's sums can pass it: |dY| < 2^15, a block's sum of
     * |dY| below 2^21, so `bound` (uint32) cannot wrap before the check */
    for (q = 0; q < n; q += np) {
        np = n - q < TP_WG_BLOCK ? n - q : TP_WG_BLOCK;
        g_sum += dy->bytes == 2u ? wg_gather16(dy->q, q * oc + o, oc, np, gp, &bound)
                                 : wg_gather8(dy->q, q * oc + o, oc, np, gp, &bound);
        if (bound >= TP_WG_BOUND) {
            tp_conv2d_weight_grad_q(p, in_shape, x, x_zp, x_scale, out_shape, dy, o, row);
            return;
        }
        wg_block(acc, x + q * ic, ic, gp, np, q != 0u);
    }
    c = x_scale * tp_gm_pow2(dy->e);
    off = -x_zp * g_sum;
    for (i = 0; i < ic; i++) {
        int32_t a;
        __builtin_memcpy(&a, acc + i, 4);
        row[i] = (float)(a + off) * c;
    }
}

#else
typedef int tp_grad_arm_unused; /* ISO C wants a declaration in every translation unit */
#endif
