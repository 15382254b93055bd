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

/* A band of stride 1 both ways for dw_chan_s1: plane r holds dY row y + 1 + pad - r (zero
 * outside the map; src[0] that of plane lo), dX row y + t (acc[t], 0 for a row without dY:
 * never row y, whose dY rows y + pad - 2 to y + pad end no later than row y + 1's) its three
 * planes from plane 1 - t, with kernel rows 0, 1, 2: every band one path. Of stride 2 both
 * ways for dw_chan_s2: plane r holds dY row (y + 1 + pad) / 2 - r, dX row y + t reads from
 * plane pk[t], two planes (kernel rows 0 and 2) when y + t + pad is even (t + par: y is),
 * else one (kernel row 1). */
typedef struct {
    int16_t (*plane)[TP_GRAD_DW_PLANE];
    const uint8_t *const *src;
    int32_t *acc[2];
    const tp_weights *w;
    const tp_gm_fold *f;
    uint32_t c, ow, iw, pad, nu, lo, bytes, by_map, par, pk[2];
    int32_t lim;
} dw_cb;

/* Stride-1 columns: a channel's dX row (c apart in a) from n planes (rows of pl, TP_GRAD_DW_PLANE
 * apart, pl[x] the first of output x's three dY': plane F[j] = dY'[j - 2] advanced by the left
 * padding). Per plane r, w[2r] = wa = (w2, w1) and w[2r + 1] = wb = (w1, w0), its kernel row's
 * weights. Two outputs share two words a plane: A = (F[b], F[b + 1]), B = (F[b + 2], F[b + 3]);
 * out(b) = A.(w2, w1) + w0 B.lo, out(b + 1) = w2 A.hi + B.(w1, w0). */
#if TP_DSP_ASM14
/* The byte offsets of a plane's words A and B after the first load's post-increment. */
#define DW_P1A "248" /* 2 TP_GRAD_DW_PLANE - 4 */
#define DW_P1B "252"
#define DW_P2A "500"
#define DW_P2B "504"
#define DW_P3B "756"
#define DW_P1B2 "250" /* the second plane's word after a post-increment of 2 */
typedef char dw_plane_offsets[2u * TP_GRAD_DW_PLANE == 252u ? 1 : -1];
/* The loop's end compared from a register, or at -Os (the nRF and MicroPython builds, whose
 * callers keep one register more) from memory; DW_END_UP moves it a plane up. */
#ifdef __OPTIMIZE_SIZE__
#define DW_END "ldr %[A], %[pend]\n\tcmp %[pl], %[A]\n\t"
#define DW_END_UP "ldr %[A], %[pend]\n\tsub %[A], %[A], #" DW_P1B "\n\tstr %[A], %[pend]\n\t"
#define DW_END_IO(x) "+m"(x)
#else
#define DW_END "cmp %[pl], %[pend]\n\t"
#define DW_END_UP "sub %[pend], %[pend], #" DW_P1B "\n\t"
#define DW_END_IO(x) "+r"(x)
#endif
/* One pair of dw_out_s1_3's loop. */
#define DW_S1_PAIR                         \
    "ldr %[A], [%[pl]], #4\n\t"            \
    "ldr %[B], [%[pl]]\n\t"                \
    "smuad %[a0], %[A], %[u0]\n\t"         \
    "smulbt %[a1], %[u0], %[A]\n\t"        \
    "smlatb %[a0], %[v0], %[B], %[a0]\n\t" \
    "smlad %[a1], %[B], %[v0], %[a1]\n\t"  \
    "ldr %[A], [%[pl], #" DW_P1A "]\n\t"   \
    "ldr %[B], [%[pl], #" DW_P1B "]\n\t"   \
    "smlad %[a0], %[A], %[u1], %[a0]\n\t"  \
    "smlabt %[a1], %[u1], %[A], %[a1]\n\t" \
    "smlatb %[a0], %[v1], %[B], %[a0]\n\t" \
    "smlad %[a1], %[B], %[v1], %[a1]\n\t"  \
    "ldr %[A], [%[pl], #" DW_P2A "]\n\t"   \
    "ldr %[B], [%[pl], #" DW_P2B "]\n\t"   \
    "smlad %[a0], %[A], %[u2], %[a0]\n\t"  \
    "smlabt %[a1], %[u2], %[A], %[a1]\n\t" \
    "smlatb %[a0], %[v2], %[B], %[a0]\n\t" \
    "smlad %[a1], %[B], %[v2], %[a1]\n\t"  \
    "str %[a0], [%[a]]\n\t"                \
    "str %[a1], [%[a], %[c4]]\n\t"         \
    "add %[a], %[a], %[c4], lsl #1\n\t" DW_END
/* dw_chan_s1's pairs of outputs from three planes, pl to pend (pl[x], x even; w the six weight
 * words, loaded before the loop), then, unless a1 is 0, those of the row whose planes are one
 * up (output a1, from pl - TP_GRAD_DW_PLANE): one call a channel and band. Per plane its two
 * words by single loads, the second pipelined after the first, and four multiplies (the first
 * plane's two without an accumulator); 14 registers (TP_DSP_ASM14, its callers TP_DSP_REGS14). */
static TP_DSP_NOINLINE TP_DSP_REGS14 void dw_out_s1_3(int32_t *a, uint32_t c4, const int16_t *pl,
                                                      const int16_t *pend, const uint32_t *w,
                                                      int32_t *a1)
{
    uint32_t A, B, u0 = w[0], v0 = w[1], u1 = w[2], v1 = w[3], u2 = w[4], v2 = w[5];
    uint32_t back = 2u * (uint32_t)(pend - pl) + 2u * TP_GRAD_DW_PLANE; /* bytes */
    int32_t a0, a2;
    __asm__ volatile("1:\n\t" DW_S1_PAIR "bne 1b\n\t"
                     "ldr %[a], %[next]\n\t"
                     "cmp %[a], #0\n\t"
                     "beq 3f\n\t"
                     "ldr %[A], %[back]\n\t"
                     "sub %[pl], %[pl], %[A]\n\t" DW_END_UP "2:\n\t" DW_S1_PAIR "bne 2b\n\t"
                     "3:"
                     : [a] "+r"(a), [pl] "+r"(pl), [pend] DW_END_IO(pend), [A] "=&r"(A),
                       [B] "=&r"(B), [a0] "=&r"(a0), [a1] "=&r"(a2)
                     : [c4] "r"(c4), [u0] "r"(u0), [v0] "r"(v0), [u1] "r"(u1), [v1] "r"(v1),
                       [u2] "r"(u2), [v2] "r"(v2), [next] "m"(a1), [back] "m"(back)
                     : "cc", "memory");
}

/* dw_out_s2's pairs of outputs from one or two planes (n), q to qend (q the pair's word, two
 * bytes on a pair): the planes' words by single loads, the second pipelined; twelve registers
 * at most, inlined in dw_out. */
TP_DSP_INLINE void dw_out_s2_pairs(int32_t *a, uint32_t c4, const int16_t *q, const int16_t *qend,
                                   uint32_t u0, uint32_t v0, uint32_t u1, uint32_t v1, uint32_t n)
{
    uint32_t A, B;
    int32_t a0, a1;
    if (n == 2u) {
        __asm__ volatile(
            "1:\n\t"
            "ldr %[A], [%[q]], #2\n\t"
            "ldr %[B], [%[q], #" DW_P1B2 "]\n\t"
            "smuad %[a0], %[A], %[u0]\n\t"
            "smlad %[a0], %[B], %[u1], %[a0]\n\t"
            "smulbt %[a1], %[v0], %[A]\n\t"
            "smlabt %[a1], %[v1], %[B], %[a1]\n\t"
            "str %[a0], [%[a]]\n\t"
            "str %[a1], [%[a], %[c4]]\n\t"
            "add %[a], %[a], %[c4], lsl #1\n\t"
            "cmp %[q], %[qend]\n\t"
            "bne 1b"
            : [a] "+r"(a), [q] "+r"(q), [A] "=&r"(A), [B] "=&r"(B), [a0] "=&r"(a0), [a1] "=&r"(a1)
            : [c4] "r"(c4), [qend] "r"(qend), [u0] "r"(u0), [v0] "r"(v0), [u1] "r"(u1), [v1] "r"(v1)
            : "cc", "memory");
    } else {
        __asm__ volatile("1:\n\t"
                         "ldr %[A], [%[q]], #2\n\t"
                         "smuad %[a0], %[A], %[u0]\n\t"
                         "smulbt %[a1], %[v0], %[A]\n\t"
                         "str %[a0], [%[a]]\n\t"
                         "str %[a1], [%[a], %[c4]]\n\t"
                         "add %[a], %[a], %[c4], lsl #1\n\t"
                         "cmp %[q], %[qend]\n\t"
                         "bne 1b"
                         : [a] "+r"(a), [q] "+r"(q), [A] "=&r"(A), [a0] "=&r"(a0), [a1] "=&r"(a1)
                         : [c4] "r"(c4), [qend] "r"(qend), [u0] "r"(u0), [v0] "r"(v0)
                         : "cc", "memory");
    }
}
#endif

TP_DSP_INLINE void dw_out_s1(int32_t *a, uint32_t c, const int16_t *pl, const uint32_t *w,
                             uint32_t n, uint32_t iw)
{
    uint32_t x = 0, r, wa0, wb0, wa1, wb1, wa2, wb2;
    wa0 = w[0];
    wb0 = w[1];
    wa1 = n > 1u ? w[2] : 0u;
    wb1 = n > 1u ? w[3] : 0u;
    wa2 = n > 2u ? w[4] : 0u;
    wb2 = n > 2u ? w[5] : 0u;
    for (; x + 1u < iw; x += 2u, pl += 2, a += 2u * c) {
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
TP_DSP_INLINE void dw_out_s2(int32_t *a, uint32_t c, const int16_t *pl, const uint32_t *w,
                             uint32_t n, uint32_t iw, uint32_t pad)
{
    uint32_t b = pad, end = pad + iw, r, wa0 = w[0], wb0 = w[1], wa1 = n > 1u ? w[2] : 0u;
    uint32_t wb1 = n > 1u ? w[3] : 0u, wa2 = n > 2u ? w[4] : 0u, wb2 = n > 2u ? w[5] : 0u;
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
#if TP_DSP_ASM14
    if (n <= 2u && b + 1u < end) {
        uint32_t pairs = (end - b) / 2u;
        dw_out_s2_pairs(a, 4u * c, pl + b / 2u, pl + b / 2u + pairs, wa0, wb0, wa1, wb1, n);
        a += 2u * pairs * c;
        b += 2u * pairs;
    }
#endif
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
TP_DSP_INLINE void dw_out_row(int32_t *a, uint32_t c, const int16_t *pl, const uint32_t *w,
                              uint32_t n, uint32_t iw, uint32_t s1, uint32_t pad)
{
    if (s1 == 1u) {
        pl += pad;
        if (n == 3u) {
            dw_out_s1(a, c, pl, w, 3u, iw);
        } else if (n == 2u) {
            dw_out_s1(a, c, pl, w, 2u, iw);
        } else {
            dw_out_s1(a, c, pl, w, 1u, iw);
        }
    } else if (n == 2u) {
        dw_out_s2(a, c, pl, w, 2u, iw, pad);
    } else if (n == 1u) {
        dw_out_s2(a, c, pl, w, 1u, iw, pad);
    } else {
        dw_out_s2(a, c, pl, w, 3u, iw, pad);
    }
}

/* A channel's SMMULR fold from an int8 map: m its scale's mantissa, sh = top - k. Returns 0 when
 * the fold does not apply (m 0, sh outside 1..31, or a tie possible: tp_dsp_fold_may_tie), else
 * its factors (tp_dsp_smm_factors) in qs and b and 1 when no dY' needs the clamp to +-lim (the
 * fold's no_clamp, or q = -128's stays within), 2 when some may (then the workers take
 * dw_fold_row's DW_I8_SAT: one SMMULR loop less each). */
static inline int dw_smm_of(const tp_gm_fold *f, uint32_t m, int32_t sh, int32_t lim, int32_t *qs,
                            int32_t *b)
{
    if (m == 0u || sh < 1 || sh > 31 || tp_dsp_fold_may_tie(m, sh)) {
        return 0;
    }
    tp_dsp_smm_factors(m, sh, qs, b);
    return f->no_clamp || tp_smmulr(-128 * *qs, *b) >= -lim ? 1 : 2;
}

/* One dY' by SMMULR (dw_smm_of's qs, b; its 1: no clamp). */
TP_DSP_INLINE int32_t dw_smm_one(int32_t q, int32_t qs, int32_t b)
{
    return tp_smmulr(q * qs, b);
}

/* n dY' of each of k (1 to 4, a constant) int8 rows (q0 to q3, c apart) folded by SMMULR into
 * planes d, d + TP_GRAD_DW_PLANE, ...: one loop for the k. */
TP_DSP_INLINE void dw_fold_smmk(int16_t *d, const int8_t *q0, const int8_t *q1, const int8_t *q2,
                                const int8_t *q3, uint32_t c, uint32_t n, int32_t qs, int32_t b,
                                uint32_t k)
{
    uint32_t x;
    for (x = 0; x < n; x++, q0 += c, q1 += c, q2 += c, q3 += c) {
        int32_t v0 = *q0, v1 = k > 1u ? *q1 : 0, v2 = k > 2u ? *q2 : 0, v3 = k > 3u ? *q3 : 0;
#if !defined(TP_KERNELS_DSP_EMULATION)
        if (k == 4u) { /* the four loaded first: each after the first pipelines */
            __asm__("" : "+r"(v0), "+r"(v1), "+r"(v2), "+r"(v3));
        }
#endif
        d[x] = (int16_t)dw_smm_one(v0, qs, b);
        if (k > 1u) {
            d[x + TP_GRAD_DW_PLANE] = (int16_t)dw_smm_one(v1, qs, b);
        }
        if (k > 2u) {
            d[x + 2u * TP_GRAD_DW_PLANE] = (int16_t)dw_smm_one(v2, qs, b);
        }
        if (k > 3u) {
            d[x + 3u * TP_GRAD_DW_PLANE] = (int16_t)dw_smm_one(v3, qs, b);
        }
    }
}

/* dw_fold_smmk of four consecutive int8 rows, q the lowest's (plane 3's)
 * first dY value, rs the rows' distance, qs = 2^sa: one pointer and three offsets; in asm, the
 * four loads pipelined, 13 registers (TP_DSP_ASM14). */
#if TP_DSP_ASM14
static TP_DSP_NOINLINE TP_DSP_REGS14 void dw_fold_smm4(int16_t *d, const int8_t *q, uint32_t rs,
                                                       uint32_t c, uint32_t n, uint32_t sa,
                                                       int32_t b)
{
    const int8_t *end = q + n * c;
    uint32_t r2 = 2u * rs, r3 = 3u * rs;
    int32_t v0, v1, v2, v3;
    __asm__ volatile(
        "1:\n\t"
        "ldrsb %[v3], [%[q]]\n\t"
        "ldrsb %[v2], [%[q], %[rs]]\n\t"
        "ldrsb %[v1], [%[q], %[r2]]\n\t"
        "ldrsb %[v0], [%[q], %[r3]]\n\t"
        "add %[q], %[q], %[c]\n\t"
        "lsl %[v0], %[v0], %[sa]\n\t"
        "lsl %[v1], %[v1], %[sa]\n\t"
        "lsl %[v2], %[v2], %[sa]\n\t"
        "lsl %[v3], %[v3], %[sa]\n\t"
        "smmulr %[v0], %[v0], %[b]\n\t"
        "smmulr %[v1], %[v1], %[b]\n\t"
        "smmulr %[v2], %[v2], %[b]\n\t"
        "smmulr %[v3], %[v3], %[b]\n\t"
        "strh %[v1], [%[d], #" DW_P1B "]\n\t"
        "strh %[v2], [%[d], #" DW_P2B "]\n\t"
        "strh %[v3], [%[d], #" DW_P3B "]\n\t"
        "strh %[v0], [%[d]], #2\n\t"
        "cmp %[q], %[end]\n\t"
        "bne 1b"
        : [q] "+r"(q), [d] "+r"(d), [v0] "=&r"(v0), [v1] "=&r"(v1), [v2] "=&r"(v2), [v3] "=&r"(v3)
        : [rs] "r"(rs), [r2] "r"(r2), [r3] "r"(r3), [c] "r"(c), [end] "r"(end), [sa] "r"(sa),
          [b] "r"(b)
        : "cc", "memory");
}
#else
static void dw_fold_smm4(int16_t *d, const int8_t *q, uint32_t rs, uint32_t c, uint32_t n,
                         uint32_t sa, int32_t b)
{
    uint32_t x;
    for (x = 0; x < n; x++, q += c) {
        d[x] = (int16_t)dw_smm_one(q[3u * rs], (int32_t)(1u << sa), b);
        d[x + TP_GRAD_DW_PLANE] = (int16_t)dw_smm_one(q[2u * rs], (int32_t)(1u << sa), b);
        d[x + 2u * TP_GRAD_DW_PLANE] = (int16_t)dw_smm_one(q[rs], (int32_t)(1u << sa), b);
        d[x + 3u * TP_GRAD_DW_PLANE] = (int16_t)dw_smm_one(q[0], (int32_t)(1u << sa), b);
    }
}
#endif

/* The n (1 to 4) dY rows src[] of channel ch folded by SMMULR (dw_smm_of's 1) into planes
 * from d. */
TP_DSP_INLINE void dw_fold_smm_n(int16_t *d, const uint8_t *const *src, uint32_t ch, uint32_t c,
                                 uint32_t ow, uint32_t n, int32_t qs, int32_t b)
{
    const int8_t *q0 = (const int8_t *)src[0] + ch; /* rows past n: q0, never read */
    const int8_t *q1 = n > 1u ? (const int8_t *)src[1] + ch : q0;
    const int8_t *q2 = n > 2u ? (const int8_t *)src[2] + ch : q0;
    const int8_t *q3 = n > 3u ? (const int8_t *)src[3] + ch : q0;
    if (n == 4u) {
        dw_fold_smmk(d, q0, q1, q2, q3, c, ow, qs, b, 4u);
    } else if (n == 3u) {
        dw_fold_smmk(d, q0, q1, q2, q3, c, ow, qs, b, 3u);
    } else if (n == 2u) {
        dw_fold_smmk(d, q0, q1, q2, q3, c, ow, qs, b, 2u);
    } else {
        dw_fold_smmk(d, q0, q1, q2, q3, c, ow, qs, b, 1u);
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

/* A band of dX rows (one or two) and the dY rows they meet: src[0..nu) the union, dY rows
 * top, top - 1, ... (every dX row meets a run of consecutive ones); per band row t, the first
 * of its run (at), how many (n, 0: none) and their kernel rows (kh, two bits each). */
typedef struct {
    const uint8_t *src[4];
    uint32_t nu, rows, top, at[2], n[2], kh[2];
} dw_band;

/* The band of dX rows y (and y + 1 when rows is 2). */
static void dw_band_of(dw_band *bd, const tp_conv_params *p, const tp_shape *out_shape,
                       const tp_gmap *dy, uint32_t y, uint32_t rows, uint32_t c)
{
    uint32_t t, r, s0 = p->stride[0], ow = (uint32_t)out_shape->w;
    uint32_t first[2] = {0u, 0u}, top = 0u, bottom = 0u, any = 0u;
    bd->rows = rows;
    for (t = 0; t < rows; t++) {
        bd->n[t] = 0u;
        bd->kh[t] = 0u;
        for (r = 0; r < 3u; r++) {
            int32_t num = (int32_t)(y + t) + (int32_t)p->pad[0] - (int32_t)r;
            if (num >= 0 && num % (int32_t)s0 == 0 && (uint32_t)num / s0 < (uint32_t)out_shape->h) {
                uint32_t j = (uint32_t)num / s0;
                if (bd->n[t] == 0u) {
                    first[t] = j;
                }
                bd->kh[t] |= r << (2u * bd->n[t]++);
                top = any == 0u || j > top ? j : top;
                bottom = any++ == 0u || j < bottom ? j : bottom;
            }
        }
    }
    bd->nu = any != 0u ? top - bottom + 1u : 0u;
    bd->top = top;
    for (t = 0; t < rows; t++) {
        bd->at[t] = top - first[t];
    }
    for (r = 0; r < bd->nu; r++) {
        bd->src[r] = (const uint8_t *)dy->q + (top - r) * ow * c * dy->bytes;
    }
}

/* A kernel row's weight words w[0] = wa, w[1] = wb (its taps w0, w1, w2 at e, step apart) for
 * dw_out_s1 (wa = (w2, w1), wb = (w1, w0)) or dw_out_s2 (wa = (w2, w0), wb = (w1, 0)), a PKHBT
 * each. */
TP_DSP_INLINE void dw_weight_words(const int8_t *e, uint32_t step, uint32_t s1, uint32_t *w)
{
    uint32_t w0 = (uint32_t)e[0], w1 = (uint32_t)e[step], w2 = (uint32_t)e[2u * step];
    w[0] = s1 == 1u ? tp_pkhbt16(w2, w1) : tp_pkhbt16(w2, w0);
    w[1] = s1 == 1u ? tp_pkhbt16(w1, w0) : tp_pkhbt16(w1, 0u);
}

/* The band's dX rows of channel ch (kernel row weights wo, step apart), each from its live
 * planes (dw_out_row) with the weight words of the kernel rows it reads (bd->kh): one call a
 * channel and band. */
static TP_DSP_NOINLINE void dw_out_band(int32_t *const *acc, uint32_t ch, uint32_t c,
                                        const int16_t (*plane)[TP_GRAD_DW_PLANE], const dw_band *bd,
                                        const int8_t *wo, uint32_t step, uint32_t iw, uint32_t s1,
                                        uint32_t pad)
{
    uint32_t t, r, n, wv[6];
    for (t = 0; t < bd->rows; t++) {
        for (n = bd->n[t], r = 0; r < n; r++) {
            dw_weight_words(wo + 3u * ((bd->kh[t] >> (2u * r)) & 3u) * step, step, s1, &wv[2u * r]);
        }
        if (n != 0u) {
            dw_out_row(acc[t] + ch, c, plane[bd->at[t]], wv, n, iw, s1, pad);
        }
    }
}

/* Planes 0 to n - 1 zeroed over the columns a row of iw outputs reads. */
static void dw_zero_planes(int16_t (*plane)[TP_GRAD_DW_PLANE], uint32_t n, uint32_t iw)
{
    uint32_t r, x;
    for (r = 0; r < n; r++) {
        for (x = 0; x < iw + 6u; x++) {
            plane[r][x] = 0;
        }
    }
}

/* Channel ch's weight row (*wo, *step), scale mantissa (*m) and shift (*sh) for a band's
 * channel (dw_chan_s1, dw_chan_s2, the driver's mixed strides); 0, its dX columns of the band
 * zeroed, when every dY' is zero (dw_fold_of). */
TP_DSP_INLINE int dw_chan_live(const dw_cb *k, uint32_t ch, const int8_t **wo, uint32_t *step,
                               uint32_t *m, int32_t *sh)
{
    uint32_t t, x, c = k->c;
    int32_t e;
    *wo = tp_weights_row(k->w, ch, step);
    tp_gm_scale_parts(tp_weights_scale(k->w, ch), m, &e);
    *sh = k->f->top - e;
    if (*m == 0u || (k->bytes == 1u && *sh >= 32) || *sh > 40 ||
        (!k->by_map && dw_rows_zero(k->src, k->nu, ch, c, k->ow, k->bytes))) {
        for (t = 0; t < 2u; t++) {
            for (x = 0; k->acc[t] != 0 && x < k->iw; x++) {
                k->acc[t][x * c + ch] = 0;
            }
        }
        return 0;
    }
    return 1;
}

/* Channel ch's dY rows of a dw_cb band folded by dw_fold_row into planes lo on, from column
 * col (the general fold; inlined: a call here costs the workers' registers elsewhere). */
TP_DSP_INLINE void dw_fold_rows(const dw_cb *k, uint32_t ch, uint32_t m, int32_t sh, uint32_t col)
{
    uint32_t r;
    dw_fold d;
    dw_fold_of(&d, k->bytes, m, sh, k->lim);
    for (r = 0; r < k->nu; r++) {
        dw_fold_row(&k->plane[k->lo + r][col], k->src[r] + ch * k->bytes, k->bytes, k->c, k->ow,
                    &d);
    }
}

/* Channel ch's dX rows of a dw_cb band: its weight words first (nothing but the band and ch
 * live across the fold), its dY rows folded into planes lo to lo + nu - 1, then each row. */
static TP_DSP_NOINLINE void dw_chan_s1(const dw_cb *k, uint32_t ch)
{
    uint32_t x = 0, t, step, m, wv[6], c = k->c;
    const int8_t *wo;
    int32_t sh, qs = 0, b = 0;
    int smm;
    if (!dw_chan_live(k, ch, &wo, &step, &m, &sh)) {
        return;
    }
    dw_weight_words(wo, step, 1u, &wv[0]);
    dw_weight_words(wo + 3u * step, step, 1u, &wv[2]);
    dw_weight_words(wo + 6u * step, step, 1u, &wv[4]);
    smm = k->bytes == 1u ? dw_smm_of(k->f, m, sh, k->lim, &qs, &b) : 0;
    if (smm == 1 && k->nu == 4u) { /* the common case: rows src[3] + 3 ow c to src[3] */
        dw_fold_smm4(&k->plane[0][2], (const int8_t *)k->src[3] + ch, k->ow * c, c, k->ow,
                     (uint32_t)__builtin_ctz((uint32_t)qs), b);
    } else if (smm == 1) {
        dw_fold_smm_n(&k->plane[k->lo][2], k->src, ch, c, k->ow, k->nu, qs, b);
    } else { /* and SMMULR's clamped fold (code size) */
        dw_fold_rows(k, ch, m, sh, 2u);
    }
#if TP_DSP_ASM14
    if (k->iw >= 2u) { /* the pairs of both rows in one call, an odd end below */
        const int16_t *p1 = k->plane[1] + k->pad;
        x = k->iw & ~1u;
        dw_out_s1_3(k->acc[0] + ch, 4u * c, p1, p1 + x, wv, k->acc[1] != 0 ? k->acc[1] + ch : 0);
    }
#endif
    for (t = 0; t < 2u && x < k->iw; t++) {
        if (k->acc[t] != 0) {
            dw_out_s1(k->acc[t] + ch + x * c, c, k->plane[1u - t] + k->pad + x, wv, 3u, k->iw - x);
        }
    }
}

/* Channel ch's dX rows of a dw_cb band of stride 2 both ways, as dw_chan_s1 (planes from
 * column 1: stride-2 columns); its weight words in the order of kernel rows 0, 2, 1. */
static TP_DSP_NOINLINE void dw_chan_s2(const dw_cb *k, uint32_t ch)
{
    uint32_t t, step, m, wv[6], c = k->c;
    const int8_t *wo;
    int32_t sh, qs = 0, b = 0;
    int smm;
    if (!dw_chan_live(k, ch, &wo, &step, &m, &sh)) {
        return;
    }
    dw_weight_words(wo, step, 2u, &wv[0]);
    dw_weight_words(wo + 6u * step, step, 2u, &wv[2]);
    dw_weight_words(wo + 3u * step, step, 2u, &wv[4]);
    smm = k->bytes == 1u ? dw_smm_of(k->f, m, sh, k->lim, &qs, &b) : 0;
    if (smm == 1) {
        dw_fold_smm_n(&k->plane[k->lo][1], k->src, ch, c, k->ow, k->nu, qs, b);
    } else { /* and SMMULR's clamped fold (code size) */
        dw_fold_rows(k, ch, m, sh, 1u);
    }
    for (t = 0; t < 2u; t++) {
        if (k->acc[t] == 0) {
            continue;
        }
        if (((t + k->par) & 1u) == 0u) {
            dw_out_s2(k->acc[t] + ch, c, k->plane[k->pk[t]], wv, 2u, k->iw, k->pad);
        } else {
            dw_out_s2(k->acc[t] + ch, c, k->plane[k->pk[t]], &wv[4], 1u, k->iw, k->pad);
        }
    }
}

/* Per band of two dX rows (one at an odd end): the dY rows they meet (dw_band_of); per
 * channel, its dY' of each of those rows folded once into a zero-padded plane (compact:
 * stride-2 columns take one dY' a plane per two outputs), then its dX values of each row; with
 * stride 1 both ways, dw_chan_s1 a channel, with stride 2 both ways dw_chan_s2 (the map's edge
 * bands too: zero planes for the missing rows). */
void tp_arm_depthwise_conv2d_input_grad_q(const tp_conv_params *p, const tp_shape *in_shape,
                                          const tp_shape *out_shape, const tp_weights *w,
                                          const tp_gm_fold *f, const tp_gmap *dy, tp_gm_writer *dx,
                                          void *scratch)
{
    uint32_t c = (uint32_t)in_shape->c, iw = (uint32_t)in_shape->w, ow = (uint32_t)out_shape->w;
    uint32_t h = (uint32_t)in_shape->h, s1 = p->stride[1], y, cw, ch, t, m, step;
    uint32_t bytes = dy->bytes, off = s1 == 1u ? 2u : 1u, any_dead = 0u;
    int rows1 = p->stride[0] == 1u && s1 == 1u; /* every band by dw_chan_s1 */
    int rows2 = p->stride[0] == 2u && s1 == 2u; /* by dw_chan_s2 */
    int by_map = c <= TP_GM_DEAD_C;             /* f->dead holds every channel's */
    int32_t *acc[2], lim = ((int32_t)1 << f->bits) - 1;
    int16_t plane[4][TP_GRAD_DW_PLANE];
    dw_band bd;
    dw_cb k1;
    if (!dw_covered(p, in_shape, out_shape) || !f->live) {
        tp_depthwise_conv2d_input_grad_q(p, in_shape, out_shape, w, f, dy, dx, scratch);
        return;
    }
    acc[0] = (int32_t *)scratch;
    acc[1] = acc[0] + iw * c;
    if (by_map) {
        for (ch = 0; ch < c; ch += 32u) {
            any_dead |= f->dead[ch >> 5];
        }
    }
    dw_zero_planes(plane, 4u, iw);
    k1.plane = plane;
    k1.src = bd.src;
    k1.w = w;
    k1.f = f;
    k1.c = c;
    k1.ow = ow;
    k1.iw = iw;
    k1.pad = p->pad[1];
    k1.bytes = bytes;
    k1.by_map = (uint32_t)by_map;
    k1.par = p->pad[0] & 1u;
    k1.lim = lim;
    k1.lo = 0u; /* mixed strides: planes from 0 */
    for (y = 0; y < h; y += bd.rows) {
        dw_band_of(&bd, p, out_shape, dy, y, h - y >= 2u ? 2u : 1u, c);
        for (t = 0; t < bd.rows; t++) {
            /* a row without dY zero at once; dead channels' dX once an op: no band writes their
             * columns (a live channel writes all of its; tp_gm_row_i32 only reads) */
            if (bd.n[t] == 0u || (any_dead && y == 0u)) {
                tp_dsp_zero32(acc[t], iw * c);
            }
        }
        k1.nu = bd.nu;
        for (t = 0; t < 2u; t++) {
            k1.acc[t] = t < bd.rows && bd.n[t] != 0u ? acc[t] : 0;
        }
        if ((rows1 || rows2) && bd.nu != 0u) {
            /* plane r: dY row top - r, zero outside the map (dw_cb) */
            uint32_t top = rows1 ? y + 1u + p->pad[0] : (y + 1u + p->pad[0]) >> 1;
            k1.lo = top - bd.top;
            for (t = 0; t < 2u && rows2; t++) {
                k1.pk[t] = top - ((y + t + p->pad[0]) >> 1);
            }
            /* zero: the planes of rows past the map's end (those past lo + nu, rows before its
             * start, only in the first band, whose planes are still zero) */
            dw_zero_planes(plane, k1.lo, iw);
        }
        for (cw = 0; cw < c && bd.nu != 0u; cw += 32u) {
            /* the live channels of 32 (dead ones zeroed above), by their bits */
            uint32_t live = (any_dead ? ~f->dead[cw >> 5] : ~0u) &
                            (c - cw >= 32u ? ~0u : (1u << (c - cw)) - 1u);
            for (; live != 0u; live &= live - 1u) {
                const int8_t *wo;
                int32_t sh;
                ch = cw + (uint32_t)__builtin_ctz(live);
                if (rows1) {
                    dw_chan_s1(&k1, ch);
                } else if (rows2) {
                    dw_chan_s2(&k1, ch);
                } else if (dw_chan_live(&k1, ch, &wo, &step, &m, &sh)) {
                    /* mixed strides: planes from 0, no SMMULR fold (code size) */
                    dw_fold_rows(&k1, ch, m, sh, off);
                    dw_out_band(acc, ch, c, plane, &bd, wo, step, iw, s1, p->pad[1]);
                }
            }
        }
        for (t = 0; t < bd.rows; t++) {
            tp_gm_row_i32(dx, y + t, acc[t]);
        }
    }
}

#else
/* ISO C wants a declaration in every translation unit */
typedef int tp_depthwise_input_grad_arm_unused;
#endif
