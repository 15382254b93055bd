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

/* How a channel's dY values fold (dw_fold_of). */
enum { DW_ZERO, DW_I8, DW_I8_SAT, DW_I16, DW_ANY };

typedef struct {
    int32_t m, sh, hm1, lim;
    uint32_t how;
} dw_fold;

/* tp_gm_scale_parts, inline: a float32 scale as m * 2^k. */
static inline void dw_scale_parts(float s, uint32_t *m, int32_t *k)
{
    uint32_t u, e;
    __builtin_memcpy(&u, &s, 4);
    e = (u >> 23) & 0xFFu;
    *m = e > 0u ? (u & 0x7FFFFFu) | 0x800000u : u & 0x7FFFFFu;
    *k = e > 0u ? (int32_t)e - 150 : -149;
}

/* v / 2^sh rounded half to even, 1 <= sh <= 31, v + 2^(sh - 1) within int32: the floor of
 * (v + 2^(sh - 1) - 1 + the floor's lowest bit) / 2^sh. */
static inline int32_t dw_round(int32_t v, int32_t sh, int32_t hm1)
{
    return (v + hm1 + ((v >> sh) & 1)) >> sh;
}

/* The fold of a channel with scale parts m (below 2^24) and shift sh = top - k from a map of
 * `bytes` bytes a value: all zero (every |q m| below half of 2^sh); from an int8 map, in int32
 * (|q m| + 2^(sh - 1) below 2^31), saturated only when q = -128 can reach the limit; from an
 * int16 map, in int64; else fold_fast. */
static void dw_fold_of(dw_fold *d, uint32_t bytes, uint32_t m, int32_t sh, int32_t lim)
{
    d->m = (int32_t)m;
    d->sh = sh;
    d->lim = lim;
    d->hm1 = sh >= 1 && sh <= 32 ? (int32_t)((1u << (sh - 1)) - 1u) : 0;
    if (m == 0u || (bytes == 1u && sh >= 32) || sh > 40) {
        d->how = DW_ZERO; /* |q m| < 2^31 (int8) or 2^39 (int16): below one half */
    } else if (sh <= 0) {
        d->how = DW_ANY;
    } else if (bytes == 2u) {
        d->how = DW_I16;
    } else if (127u * m + (1u << (sh - 1)) <= 0x7FFFFFFFu) {
        d->how = dw_round(-128 * (int32_t)m, sh, d->hm1) < -lim ? DW_I8_SAT : DW_I8;
    } else {
        d->how = DW_ANY;
    }
}

TP_DSP_INLINE void dw_fold8(int16_t *dst, const int8_t *s, uint32_t c, uint32_t n, int32_t m,
                            int32_t sh, int32_t hm1, int sat, int32_t lim)
{
    uint32_t j;
    for (j = 0; j < n; j++, s += c) {
        int32_t r = dw_round(*s * m, sh, hm1);
        if (sat) {
            r = r > lim ? lim : r < -lim ? -lim : r;
        }
        dst[j] = (int16_t)r;
    }
}

/* n dY' of a channel (not DW_ZERO) into dst: src its first dY value (bytes wide), c apart. */
static TP_DSP_NOINLINE void dw_fold_row(int16_t *dst, const void *src, uint32_t bytes,
                                        uint32_t c, uint32_t n, const dw_fold *d)
{
    uint32_t j;
    if (d->how == DW_I8) {
        dw_fold8(dst, (const int8_t *)src, c, n, d->m, d->sh, d->hm1, 0, 0);
    } else if (d->how == DW_I8_SAT) {
        dw_fold8(dst, (const int8_t *)src, c, n, d->m, d->sh, d->hm1, 1, d->lim);
    } else if (d->how == DW_I16) {
        const int16_t *s = (const int16_t *)src;
        int64_t hm1 = ((int64_t)1 << (d->sh - 1)) - 1;
        for (j = 0; j < n; j++, s += c) {
            int64_t v = (int64_t)*s * d->m;
            int64_t r = (v + hm1 + ((v >> d->sh) & 1)) >> d->sh;
            dst[j] = (int16_t)(r > d->lim ? d->lim : r < -d->lim ? -d->lim : r);
        }
    } else {
        for (j = 0; j < n; j++) {
            int32_t q = bytes == 2u ? ((const int16_t *)src)[j * c] : ((const int8_t *)src)[j * c];
            dst[j] = (int16_t)fold_fast(q, (uint32_t)d->m, d->sh, d->lim);
        }
    }
}

/* Stride-1 columns: a channel's dX row (c apart in a) from n planes (rows of pl, TP_GRAD_DW_PLANE
 * apart, pl[x] the first of output x's three dY': plane F[j] = dY'[j - 2] advanced by the left
 * padding). Per plane, wa = (w2, w1) and wb = (w1, w0), its kernel row's weights. Two outputs
 * share two words a plane: A = (F[b], F[b + 1]), B = (F[b + 2], F[b + 3]);
 * out(b) = A.(w2, w1) + w0 B.lo, out(b + 1) = w2 A.hi + B.(w1, w0). */
TP_DSP_INLINE void dw_out_s1(int32_t *a, uint32_t c, const int16_t *pl, const uint32_t *wa,
                             const uint32_t *wb, uint32_t n, uint32_t iw)
{
    uint32_t x, r, wa0 = wa[0], wb0 = wb[0], wa1 = n > 1u ? wa[1] : 0u;
    uint32_t wb1 = n > 1u ? wb[1] : 0u, wa2 = n > 2u ? wa[2] : 0u, wb2 = n > 2u ? wb[2] : 0u;
    for (x = 0; x + 1u < iw; x += 2u, pl += 2, a += 2u * c) {
        int32_t a0 = 0, a1 = 0;
        for (r = 0; r < n; r++) {
            const int16_t *q = pl + r * TP_GRAD_DW_PLANE;
            uint32_t A = rd_pair(q), B = rd_pair(q + 2), u = r == 0u ? wa0 : r == 1u ? wa1 : wa2;
            uint32_t v = r == 0u ? wb0 : r == 1u ? wb1 : wb2;
            a0 = tp_smlatb(v, B, tp_smlad(A, u, a0));
            a1 = tp_smlad(B, v, tp_smlabt(u, A, a1));
        }
        a[0] = a0;
        a[c] = a1;
    }
    if (x < iw) {
        int32_t a0 = 0;
        for (r = 0; r < n; r++) {
            const int16_t *q = pl + r * TP_GRAD_DW_PLANE;
            uint32_t u = r == 0u ? wa0 : r == 1u ? wa1 : wa2;
            uint32_t v = r == 0u ? wb0 : r == 1u ? wb1 : wb2;
            a0 = tp_smlatb(v, rd_pair(q + 2), tp_smlad(rd_pair(q), u, a0));
        }
        a[0] = a0;
    }
}

/* Stride-2 columns: plane F[j] = dY'[j - 1]; output x at b = x + pad (pl = F) takes
 * F[b / 2].w2 + F[b / 2 + 1].w0 when b is even, F[(b + 1) / 2].w1 when odd: one word a plane
 * for two outputs. wa = (w2, w0), wb = (w1, 0). */
TP_DSP_INLINE void dw_out_s2(int32_t *a, uint32_t c, const int16_t *pl, const uint32_t *wa,
                             const uint32_t *wb, uint32_t n, uint32_t iw, uint32_t pad)
{
    uint32_t b = pad, end = pad + iw, r, wa0 = wa[0], wb0 = wb[0], wa1 = n > 1u ? wa[1] : 0u;
    uint32_t wb1 = n > 1u ? wb[1] : 0u, wa2 = n > 2u ? wa[2] : 0u, wb2 = n > 2u ? wb[2] : 0u;
    if (b & 1u) {
        int32_t a0 = 0;
        for (r = 0; r < n; r++) {
            uint32_t v = r == 0u ? wb0 : r == 1u ? wb1 : wb2;
            a0 = tp_smlabb(v, (uint32_t)pl[r * TP_GRAD_DW_PLANE + (b + 1u) / 2u], a0);
        }
        a[0] = a0;
        a += c;
        b++;
    }
    for (; b + 1u < end; b += 2u, a += 2u * c) {
        int32_t a0 = 0, a1 = 0;
        for (r = 0; r < n; r++) {
            uint32_t P = rd_pair(pl + r * TP_GRAD_DW_PLANE + b / 2u);
            uint32_t u = r == 0u ? wa0 : r == 1u ? wa1 : wa2;
            uint32_t v = r == 0u ? wb0 : r == 1u ? wb1 : wb2;
            a0 = tp_smlad(P, u, a0);
            a1 = tp_smlabt(v, P, a1);
        }
        a[0] = a0;
        a[c] = a1;
    }
    if (b < end) {
        int32_t a0 = 0;
        for (r = 0; r < n; r++) {
            uint32_t u = r == 0u ? wa0 : r == 1u ? wa1 : wa2;
            a0 = tp_smlad(rd_pair(pl + r * TP_GRAD_DW_PLANE + b / 2u), u, a0);
        }
        a[0] = a0;
    }
}

/* One channel's dX row from n (1 to 3) live planes. */
static TP_DSP_NOINLINE void dw_out(int32_t *a, uint32_t c, const int16_t *pl, const uint32_t *wa,
                                   const uint32_t *wb, uint32_t n, uint32_t iw, uint32_t s1,
                                   uint32_t pad)
{
    if (s1 == 1u) {
        pl += pad;
        if (n == 3u) {
            dw_out_s1(a, c, pl, wa, wb, 3u, iw);
        } else if (n == 2u) {
            dw_out_s1(a, c, pl, wa, wb, 2u, iw);
        } else {
            dw_out_s1(a, c, pl, wa, wb, 1u, iw);
        }
    } else if (n == 2u) {
        dw_out_s2(a, c, pl, wa, wb, 2u, iw, pad);
    } else if (n == 1u) {
        dw_out_s2(a, c, pl, wa, wb, 1u, iw, pad);
    } else {
        dw_out_s2(a, c, pl, wa, wb, 3u, iw, pad);
    }
}

/* (a b + 2^31) / 2^32, floored: SMMULR. */
static inline int32_t dw_smmulr(int32_t a, int32_t b)
{
#if defined(__ARM_FEATURE_DSP) && !defined(TP_KERNELS_DSP_EMULATION)
    int32_t r;
    __asm__("smmulr %0, %1, %2" : "=r"(r) : "r"(a), "r"(b));
    return r;
#else
    int64_t v = (int64_t)a * b + 0x80000000LL;
    return (int32_t)(v >= 0 ? v / 0x100000000LL : -((-v + 0xFFFFFFFFLL) / 0x100000000LL));
#endif
}

/* The common fold, from an int8 map (1 <= sh <= 31): dY' = (q 2^sa * m 2^sb + 2^31) / 2^32
 * floored with sa + sb = 32 - sh, one SMMULR: q m / 2^sh rounded half up, which is half to
 * even when no q m lies halfway (d = sh - 1 - tz(m) outside 0..7: q m has tz(q) + tz(m)
 * trailing zeros, tz(q) <= 7), and needs no saturation when q = -128's does not. Returns 0
 * when the channel does not qualify. */
static inline int dw_smm_of(uint32_t m, int32_t sh, int32_t lim, int32_t *qs, int32_t *b)
{
    uint32_t sa, sb;
    int32_t d;
    if (m == 0u || sh < 1 || sh > 31) {
        return 0;
    }
    d = sh - 1 - (int32_t)__builtin_ctz(m);
    sa = sh <= 8 ? 24u : 32u - (uint32_t)sh;
    sb = 32u - (uint32_t)sh - sa;
    *qs = (int32_t)(1u << sa);
    *b = (int32_t)(m << sb);
    return (d < 0 || d > 7) && dw_smmulr(-128 * *qs, *b) >= -lim;
}

/* Per dX row: the dY rows it meets (through kernel rows kh[0..n)); per channel, its dY' of
 * each of those rows folded once into a zero-padded plane (compact: stride-2 columns take one
 * dY' a plane per two outputs), then its dX values. */
void tp_arm_depthwise_conv2d_input_grad_q(const tp_conv_params *p, const tp_shape *in_shape,
                                          const tp_shape *out_shape, const tp_weights *w,
                                          const tp_gm_fold *f, const tp_gmap *dy,
                                          tp_gm_writer *dx, void *scratch)
{
    uint32_t c = (uint32_t)in_shape->c, iw = (uint32_t)in_shape->w, ow = (uint32_t)out_shape->w;
    uint32_t s0 = p->stride[0], s1 = p->stride[1], y, ch, r, x, m, step, n, bytes = dy->bytes;
    uint32_t off = s1 == 1u ? 2u : 1u, kh[3];
    int32_t *acc = (int32_t *)scratch, lim = ((int32_t)1 << f->bits) - 1, k;
    const uint8_t *src[3];
    int16_t plane[3][TP_GRAD_DW_PLANE];
    if (!dw_covered(p, in_shape, out_shape) || !f->live) {
        tp_depthwise_conv2d_input_grad_q(p, in_shape, out_shape, w, f, dy, dx, scratch);
        return;
    }
    for (r = 0; r < 3u; r++) {
        for (x = 0; x < iw + 6u; x++) {
            plane[r][x] = 0;
        }
    }
    for (y = 0; y < (uint32_t)in_shape->h; y++) {
        for (n = 0, r = 0; r < 3u; r++) { /* the dY rows this dX row meets, kernel row r's */
            int32_t num = (int32_t)y + (int32_t)p->pad[0] - (int32_t)r;
            if (num >= 0 && num % (int32_t)s0 == 0 && (uint32_t)num / s0 < (uint32_t)out_shape->h) {
                kh[n] = r;
                src[n++] = (const uint8_t *)dy->q + (uint32_t)num / s0 * ow * c * bytes;
            }
        }
        for (ch = 0; ch < c; ch++) {
            const int8_t *wo = tp_weights_row(w, ch, &step);
            uint32_t wa[3], wb[3];
            int32_t qs, b, sh;
            dw_scale_parts(tp_weights_scale(w, ch), &m, &k);
            sh = f->top - k;
            if (n == 0u || m == 0u || (bytes == 1u && sh >= 32) || sh > 40) {
                for (x = 0; x < iw; x++) { /* every dY' is zero (dw_fold_of) */
                    acc[x * c + ch] = 0;
                }
                continue;
            }
            if (bytes == 1u && dw_smm_of(m, sh, lim, &qs, &b)) {
                for (r = 0; r < n; r++) {
                    const int8_t *q = (const int8_t *)src[r] + ch;
                    int16_t *d = &plane[r][off];
                    for (x = 0; x + 1u < ow; x += 2u, q += 2u * c) {
                        d[x] = (int16_t)dw_smmulr(q[0] * qs, b);
                        d[x + 1u] = (int16_t)dw_smmulr(q[c] * qs, b);
                    }
                    if (x < ow) {
                        d[x] = (int16_t)dw_smmulr(q[0] * qs, b);
                    }
                }
            } else {
                dw_fold d;
                dw_fold_of(&d, bytes, m, sh, lim);
                for (r = 0; r < n; r++) {
                    dw_fold_row(&plane[r][off], src[r] + ch * bytes, bytes, c, ow, &d);
                }
            }
            for (r = 0; r < n; r++) {
                const int8_t *t = wo + 3u * kh[r] * step;
                int32_t w0 = t[0], w1 = t[step], w2 = t[2u * step];
                wa[r] = s1 == 1u ? pack16(w2, w1) : pack16(w2, w0);
                wb[r] = s1 == 1u ? pack16(w1, w0) : pack16(w1, 0);
            }
            dw_out(acc + ch, c, plane[0], wa, wb, n, iw, s1, p->pad[1]);
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

/* ---- depthwise weight gradient ----
 * Row o (its kh x kw taps, up to 3 x 3, strides 1 and 2): channel o's dY gathered into an int16
 * plane (rows padded to an even width with zeros) and its input channel's x - zp into a
 * zero-padded int16 plane (each row's columns split by phase mod the stride, so that a tap
 * reads consecutive values), both on the stack; a tap's sum is then the plane's dot product
 * with a window of the input plane, two products an SMLAD. Padding contributes zeros, as the
 * reference's tap ranges leave those positions out. Exact in int32 when sum |dY| * 255 is
 * below 2^31 (|x - zp| <= 255); larger planes or sums: the reference. */
#define TP_GRAD_DWW_D 144u /* dY values of a row held (12 x 12) */
#define TP_GRAD_DWW_X 208u /* input values held (14 x 14 with stride 1) */

void tp_arm_depthwise_conv2d_weight_grad_q(const tp_conv_params *p, const tp_shape *in_shape,
                                           const int8_t *x, int32_t x_zp, float x_scale,
                                           const tp_shape *out_shape, const tp_gmap *dy,
                                           uint32_t o, float *row)
{
    uint32_t s0 = p->stride[0], s1 = p->stride[1], k0 = p->k[0], k1 = p->k[1];
    uint32_t oh = (uint32_t)out_shape->h, ow = (uint32_t)out_shape->w, oc = (uint32_t)out_shape->c;
    uint32_t ih = (uint32_t)in_shape->h, iw = (uint32_t)in_shape->w, ic = (uint32_t)in_shape->c;
    uint32_t dw = (ow + 1u) & ~1u, pw = dw + (k1 - 1u) / (s1 ? s1 : 1u), rs = s1 * pw;
    uint32_t xh = (oh - 1u) * s0 + k0, ch = o / (uint32_t)p->depth_multiplier;
    uint32_t i, j, r, ph, kh, kw, bound = 0;
    float cf;
    int16_t d[TP_GRAD_DWW_D], xp[TP_GRAD_DWW_X];
    if (k0 < 1u || k0 > 3u || k1 < 1u || k1 > 3u || s0 < 1u || s0 > 2u || s1 < 1u || s1 > 2u ||
        oh == 0u || ow == 0u || oh * dw > TP_GRAD_DWW_D || xh * rs > TP_GRAD_DWW_X) {
        tp_depthwise_conv2d_weight_grad_q(p, in_shape, x, x_zp, x_scale, out_shape, dy, o, row);
        return;
    }
    for (i = 0; i < oh; i++) {
        int16_t *dr = d + i * dw;
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
        if (ow < dw) {
            dr[ow] = 0;
        }
    }
    if (bound >= (1u << 31) / 255u) { /* below 2^23 per value: no overflow on the way */
        tp_depthwise_conv2d_weight_grad_q(p, in_shape, x, x_zp, x_scale, out_shape, dy, o, row);
        return;
    }
    for (r = 0; r < xh; r++) { /* padded row r is input row r - pad[0] */
        int32_t iy = (int32_t)r - (int32_t)p->pad[0];
        for (ph = 0; ph < s1; ph++) { /* padded column j s1 + ph: input column j s1 + ph - pad */
            int16_t *xr = xp + r * rs + ph * pw;
            uint32_t j0 = 0, j1 = 0;
            if (iy >= 0 && (uint32_t)iy < ih) {
                /* the first j with j s1 + ph >= pad, and the end of those with ix < iw */
                j0 = ph >= p->pad[1] ? 0u : (p->pad[1] - ph + s1 - 1u) / s1;
                j1 = (iw + p->pad[1] - ph + s1 - 1u) / s1;
                j1 = j1 < pw ? j1 : pw;
                j0 = j0 < j1 ? j0 : j1;
            }
            for (j = 0; j < j0; j++) {
                xr[j] = 0;
            }
            if (j0 < j1) {
                const int8_t *xs = x + ((uint32_t)iy * iw + j0 * s1 + ph - p->pad[1]) * ic + ch;
                for (; j < j1; j++, xs += s1 * ic) {
                    xr[j] = (int16_t)(*xs - x_zp);
                }
            }
            for (; j < pw; j++) {
                xr[j] = 0;
            }
        }
    }
    /* tp_gm_to_f32 of an int32 sum: its float32 (rounded to nearest even, as i64_to_f32 does)
     * times the same float32 factor */
    cf = x_scale * tp_gm_pow2(dy->e);
    for (kh = 0; kh < k0; kh++) {
        for (kw = 0; kw < k1; kw++) {
            const int16_t *xr = xp + kh * rs + (kw % s1) * pw + kw / s1, *g = d;
            int32_t a = 0;
            for (i = 0; i < oh; i++, xr += s0 * rs, g += dw) {
                for (j = 0; j < dw; j += 2u) {
                    a = tp_smlad(rd_pair(g + j), rd_pair(xr + j), a);
                }
            }
            row[kh * k1 + kw] = (float)a * cf;
        }
    }
}

#else
typedef int tp_grad_arm_unused; /* ISO C wants a declaration in every translation unit */
#endif
