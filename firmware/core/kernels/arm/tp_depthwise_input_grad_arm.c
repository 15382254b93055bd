/* tp_depthwise_input_grad_arm.c - the input gradient of 3x3 DEPTHWISE_CONV_2D (depth multiplier
 * 1, strides 1 and 2) with integer maps for Cortex-M with the DSP extension, bit for bit the
 * reference kernel (kernels/ref/tp_weighted_gradq.c), in its scratch; other shapes run the
 * reference kernel.
 *
 * The correlation with the kernel turned around: per dX row and channel, the (up to three) dY
 * rows it meets folded into zero-padded int16 planes on the stack (a stride-2 plane has zeros
 * between its values, so both strides take the stride-1 sum), then per output two SMLADs a
 * kernel row. Every sum is exact in int32 (the fold's bits bound W^T dY' below 2^31,
 * tp_gm_fold_bits), so the order of the multiply-accumulates is free.
 */
#include "tinyprop.h"
#include "tp_dsp.h"

#if TP_KERNELS_DSP

/* The widest dX row the stack planes take (wider maps: the reference). */
#define TP_GRAD_DW_MAX_W 120u
#define TP_GRAD_DW_PLANE (TP_GRAD_DW_MAX_W + 6u)

static int dw_covered(const tp_conv_params *p, const tp_shape *in_shape, const tp_shape *out_shape)
{
    uint32_t s = p->stride[1];
    return p->k[0] == 3u && p->k[1] == 3u && p->depth_multiplier == 1 &&
           (p->stride[0] == 1u || p->stride[0] == 2u) && (s == 1u || s == 2u) && p->pad[0] <= 2u &&
           p->pad[1] <= 2u && (uint32_t)in_shape->w <= TP_GRAD_DW_MAX_W && out_shape->w > 0 &&
           s * ((uint32_t)out_shape->w - 1u) <= (uint32_t)in_shape->w + 1u;
}

/* How a channel's dY values fold (dw_fold_of). */
enum { DW_ZERO, DW_I8, DW_I8_SAT, DW_I16, DW_ANY };

typedef struct {
    int32_t m, sh, hm1, lim;
    uint32_t how;
} dw_fold;

/* The fold of a channel with scale parts m (below 2^24) and shift sh = top - k from a map of
 * `bytes` bytes a value: all zero (every |q m| below half of 2^sh); from an int8 map, in int32
 * (|q m| + 2^(sh - 1) below 2^31), saturated only when q = -128 can reach the limit; from an
 * int16 map, in int64; else tp_dsp_fold. */
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
        d->how = tp_dsp_round_even(-128 * (int32_t)m, sh, d->hm1) < -lim ? DW_I8_SAT : DW_I8;
    } else {
        d->how = DW_ANY;
    }
}

TP_DSP_INLINE void dw_fold8(int16_t *dst, const int8_t *s, uint32_t c, uint32_t n, int32_t m,
                            int32_t sh, int32_t hm1, int sat, int32_t lim)
{
    uint32_t j;
    for (j = 0; j < n; j++, s += c) {
        int32_t r = tp_dsp_round_even(*s * m, sh, hm1);
        dst[j] = (int16_t)(sat ? tp_dsp_sat(r, lim) : r);
    }
}

/* n dY' of a channel (not DW_ZERO) into dst: src its first dY value (bytes wide), c apart. */
static TP_DSP_NOINLINE void dw_fold_row(int16_t *dst, const void *src, uint32_t bytes, uint32_t c,
                                        uint32_t n, const dw_fold *d)
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
            dst[j] = (int16_t)tp_dsp_fold(q, (uint32_t)d->m, d->sh, d->lim);
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
            uint32_t A = tp_dsp_rd_pair(q), B = tp_dsp_rd_pair(q + 2);
            uint32_t u = r == 0u ? wa0 : r == 1u ? wa1 : wa2;
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
            a0 = tp_smlatb(v, tp_dsp_rd_pair(q + 2), tp_smlad(tp_dsp_rd_pair(q), u, a0));
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
            uint32_t P = tp_dsp_rd_pair(pl + r * TP_GRAD_DW_PLANE + b / 2u);
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
            a0 = tp_smlad(tp_dsp_rd_pair(pl + r * TP_GRAD_DW_PLANE + b / 2u), u, a0);
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

/* A channel's SMMULR fold from an int8 map: m its scale's mantissa, sh = top - k. Returns 0 when
 * the fold does not apply (m 0, sh outside 1..31, or a tie possible: tp_dsp_fold_may_tie), else
 * its factors (tp_dsp_smm_factors) in qs and b and 1 when no dY' needs the clamp to +-lim, 2
 * when some may (q = -128's reaches beyond; SMMULR's 64-bit product holds any q m). */
static inline int dw_smm_of(uint32_t m, int32_t sh, int32_t lim, int32_t *qs, int32_t *b)
{
    if (m == 0u || sh < 1 || sh > 31 || tp_dsp_fold_may_tie(m, sh)) {
        return 0;
    }
    tp_dsp_smm_factors(m, sh, qs, b);
    return tp_smmulr(-128 * *qs, *b) >= -lim ? 1 : 2;
}

/* One dY' by SMMULR (dw_smm_of's qs, b), clamped to +-lim when sat. */
TP_DSP_INLINE int32_t dw_smm_one(int32_t q, int32_t qs, int32_t b, int sat, int32_t lim)
{
    int32_t r = tp_smmulr(q * qs, b);
    return sat ? tp_dsp_sat(r, lim) : r;
}

/* n dY' of each of k (1 to 3, a constant) int8 rows (q0, q1, q2, c apart) folded by SMMULR
 * into planes d, d + TP_GRAD_DW_PLANE and d + 2 TP_GRAD_DW_PLANE: one loop for the k. */
TP_DSP_INLINE void dw_fold_smmk(int16_t *d, const int8_t *q0, const int8_t *q1, const int8_t *q2,
                                uint32_t c, uint32_t n, int32_t qs, int32_t b, int sat, int32_t lim,
                                uint32_t k)
{
    uint32_t x;
    for (x = 0; x < n; x++, q0 += c, q1 += c, q2 += c) {
        d[x] = (int16_t)dw_smm_one(*q0, qs, b, sat, lim);
        if (k > 1u) {
            d[x + TP_GRAD_DW_PLANE] = (int16_t)dw_smm_one(*q1, qs, b, sat, lim);
        }
        if (k > 2u) {
            d[x + 2u * TP_GRAD_DW_PLANE] = (int16_t)dw_smm_one(*q2, qs, b, sat, lim);
        }
    }
}

/* The n (1 to 3) dY rows src[] of channel ch folded by SMMULR (smm: dw_smm_of's 1 or 2) into
 * planes from d. */
static void dw_fold_smm_rows(int16_t *d, const uint8_t *const *src, uint32_t ch, uint32_t c,
                             uint32_t ow, uint32_t n, int smm, int32_t qs, int32_t b, int32_t lim)
{
    const int8_t *q0 = (const int8_t *)src[0] + ch;
    const int8_t *q1 = n > 1u ? (const int8_t *)src[1] + ch : q0;
    const int8_t *q2 = n > 2u ? (const int8_t *)src[2] + ch : q0;
    if (smm == 1) {
        if (n == 3u) {
            dw_fold_smmk(d, q0, q1, q2, c, ow, qs, b, 0, 0, 3u);
        } else if (n == 2u) {
            dw_fold_smmk(d, q0, q1, q2, c, ow, qs, b, 0, 0, 2u);
        } else {
            dw_fold_smmk(d, q0, q1, q2, c, ow, qs, b, 0, 0, 1u);
        }
    } else if (n == 3u) {
        dw_fold_smmk(d, q0, q1, q2, c, ow, qs, b, 1, lim, 3u);
    } else if (n == 2u) {
        dw_fold_smmk(d, q0, q1, q2, c, ow, qs, b, 1, lim, 2u);
    } else {
        dw_fold_smmk(d, q0, q1, q2, c, ow, qs, b, 1, lim, 1u);
    }
}

/* Whether channel ch of the n dY rows src[] (ow values each, c apart, bytes wide) is all zero:
 * then so is its dX row (every fold of 0 is 0). A channel the RELU mask zeroed is (VWW's pruned
 * channels sit at their activation bound); a live one stops at its first nonzero value. */
static TP_DSP_NOINLINE int dw_rows_zero(const uint8_t *const *src, uint32_t n, uint32_t ch,
                                        uint32_t c, uint32_t ow, uint32_t bytes)
{
    uint32_t r, j, step = c * bytes;
    for (r = 0; r < n; r++) {
        const uint8_t *q = src[r] + ch * bytes;
        for (j = 0; j < ow; j++, q += step) {
            if (q[0] != 0u || (bytes == 2u && q[1] != 0u)) {
                return 0;
            }
        }
    }
    return 1;
}

/* Per dX row: the dY rows it meets (through kernel rows kh[0..n), two bits each in kh); per
 * channel, its dY' of each of those rows folded once into a zero-padded plane (compact: stride-2
 * columns take one dY' a plane per two outputs), then its dX values. */
void tp_arm_depthwise_conv2d_input_grad_q(const tp_conv_params *p, const tp_shape *in_shape,
                                          const tp_shape *out_shape, const tp_weights *w,
                                          const tp_gm_fold *f, const tp_gmap *dy, tp_gm_writer *dx,
                                          void *scratch)
{
    uint32_t c = (uint32_t)in_shape->c, iw = (uint32_t)in_shape->w, ow = (uint32_t)out_shape->w;
    uint32_t s0 = p->stride[0], s1 = p->stride[1], y, ch, r, x, m, step, n, bytes = dy->bytes;
    uint32_t off = s1 == 1u ? 2u : 1u, kh, any_dead = 0u;
    int by_map = c <= TP_GM_DEAD_C; /* f->dead holds every channel's */
    int32_t *acc = (int32_t *)scratch, lim = ((int32_t)1 << f->bits) - 1, k;
    const uint8_t *src[3];
    int16_t plane[3][TP_GRAD_DW_PLANE];
    if (!dw_covered(p, in_shape, out_shape) || !f->live) {
        tp_depthwise_conv2d_input_grad_q(p, in_shape, out_shape, w, f, dy, dx, scratch);
        return;
    }
    if (by_map) {
        for (ch = 0; ch < c; ch += 32u) {
            any_dead |= f->dead[ch >> 5];
        }
    }
    for (r = 0; r < 3u; r++) {
        for (x = 0; x < iw + 6u; x++) {
            plane[r][x] = 0;
        }
    }
    for (y = 0; y < (uint32_t)in_shape->h; y++) {
        /* the dY rows this dX row meets, kernel row r's */
        for (n = 0, r = 0, kh = 0u; r < 3u; r++) {
            int32_t num = (int32_t)y + (int32_t)p->pad[0] - (int32_t)r;
            if (num >= 0 && num % (int32_t)s0 == 0 && (uint32_t)num / s0 < (uint32_t)out_shape->h) {
                kh |= r << (2u * n);
                src[n++] = (const uint8_t *)dy->q + (uint32_t)num / s0 * ow * c * bytes;
            }
        }
        if (n == 0u || any_dead) { /* dead channels' dX (or all of it) zero at once */
            tp_dsp_zero32(acc, iw * c);
        }
        for (ch = 0; ch < c && n != 0u; ch++) {
            const int8_t *wo;
            uint32_t wa[3], wb[3];
            int32_t qs = 0, b = 0, sh;
            uint32_t s2;
            int smm;
            if (any_dead && (f->dead[ch >> 5] >> (ch & 31u) & 1u) != 0u) {
                continue;
            }
            wo = tp_weights_row(w, ch, &step);
            tp_gm_scale_parts(tp_weights_scale(w, ch), &m, &k);
            sh = f->top - k;
            if (m == 0u || (bytes == 1u && sh >= 32) || sh > 40 ||
                (!by_map && dw_rows_zero(src, n, ch, c, ow, bytes))) {
                for (x = 0; x < iw; x++) { /* every dY' is zero (dw_fold_of) */
                    acc[x * c + ch] = 0;
                }
                continue;
            }
            smm = bytes == 1u ? dw_smm_of(m, sh, lim, &qs, &b) : 0;
            if (smm != 0 && n == 3u && s1 == 1u) { /* the common case: kh = 0, 1, 2 */
                const int8_t *q0 = (const int8_t *)src[0] + ch, *q1 = (const int8_t *)src[1] + ch;
                const int8_t *q2 = (const int8_t *)src[2] + ch;
                if (smm == 1) { /* here, not by dw_fold_smm_rows: 0.27 M a step less */
                    dw_fold_smmk(&plane[0][2], q0, q1, q2, c, ow, qs, b, 0, 0, 3u);
                } else {
                    dw_fold_smmk(&plane[0][2], q0, q1, q2, c, ow, qs, b, 1, lim, 3u);
                }
                s2 = 2u * step;
                for (r = 0; r < 3u; r++, wo += 3u * step) {
                    wa[r] = tp_dsp_pack16(wo[s2], wo[step]);
                    wb[r] = tp_dsp_pack16(wo[step], wo[0]);
                }
                dw_out_s1(acc + ch, c, plane[0] + p->pad[1], wa, wb, 3u, iw);
                continue;
            }
            if (smm != 0) {
                dw_fold_smm_rows(&plane[0][off], src, ch, c, ow, n, smm, qs, b, lim);
            } else {
                dw_fold d;
                dw_fold_of(&d, bytes, m, sh, lim);
                for (r = 0; r < n; r++) {
                    dw_fold_row(&plane[r][off], src[r] + ch * bytes, bytes, c, ow, &d);
                }
            }
            for (r = 0; r < n; r++) {
                const int8_t *t = wo + 3u * ((kh >> (2u * r)) & 3u) * step;
                int32_t w0 = t[0], w1 = t[step], w2 = t[2u * step];
                wa[r] = s1 == 1u ? tp_dsp_pack16(w2, w1) : tp_dsp_pack16(w2, w0);
                wb[r] = s1 == 1u ? tp_dsp_pack16(w1, w0) : tp_dsp_pack16(w1, 0);
            }
            dw_out(acc + ch, c, plane[0], wa, wb, n, iw, s1, p->pad[1]);
        }
        tp_gm_row_i32(dx, y, acc);
    }
}

#else
/* ISO C wants a declaration in every translation unit */
typedef int tp_depthwise_input_grad_arm_unused;
#endif
