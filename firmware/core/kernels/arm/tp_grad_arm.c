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
 *   TP_PW_BLOCK, in pairs (o, o + 1): each pair's weight rows (held apart or not) and the
 *   block's fold parameters (the weight scale's parts, hoisted out of the pixel loop) in a table
 *   on the stack; per four pixels of a row (then the last one to three), the block's dY' folded
 *   (int8 dY: one SMMULR a value where no tie can happen, see pw_prepare; else in int32, see
 *   pw_round8) into the table as (dY'[p, o], dY'[p, o + 1]) words, then per two inputs of the
 *   four pixels eight sums in registers over the block: per pair, two halfwords of weights
 *   made (W[o, i], W[o + 1, i]) and (W[o, i + 1], W[o + 1, i + 1]) by one ORR and two SXTB16,
 *   eight SMLADs (16 MACs) with the four pixels' words.
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

/* Output channels per block: a block's table (pw_pair) and fold parameters live on the stack. */
#define TP_PW_BLOCK 32u

/* The fold's right shift below relies on >> of a negative int32 being arithmetic (as the
 * requantization in tp_dsp.h does): GCC and Clang define it so. */
typedef char tp_pw_asr_check[(-5 >> 1) == -3 ? 1 : -1];

/* Output channels o, o + 1 of a block: their weight rows and the folded dY' of up to four
 * pixels p, g[p] = (dY'[p, o] low, dY'[p, o + 1] high), read in pairs (LDRD) by the
 * multiply-accumulate loops. A block's odd last channel is paired with itself, its high
 * halves 0. */
typedef struct {
    const int8_t *row0, *row1;
    uint32_t g[4];
} pw_pair;

/* A block's fold parameters: m[j] its channel's mantissa and s[j] the shift (top - k) for
 * fold_fast; or, in a PW_ROUND8 block, s[j] = sh | (2^(sh-1) - 1) << 8 with 1 <= sh <= 25 (m 0
 * for a channel whose dY' is 0); or, in a PW_SMM block, m[j] = 2^sa and s[j] = m 2^sb (both 0
 * for a zero channel). */
typedef struct {
    int32_t m[TP_PW_BLOCK];
    uint32_t s[TP_PW_BLOCK];
    uint32_t ties; /* PW_SMM: bit j for a channel folded as in PW_ROUND8 (its parameters so) */
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

/* round(q m / 2^sh) half up as (q 2^sa) (m 2^sb) / 2^32 rounded, sa + sb = 32 - sh, one
 * SMMULR (floor((a b + 2^31) / 2^32)); without the DSP instructions, the same in int64. */
static inline int32_t pw_smmulr(int32_t a, int32_t b)
{
#if defined(__ARM_FEATURE_DSP) && !defined(TP_KERNELS_DSP_EMULATION)
    int32_t r;
    __asm__("smmulr %0, %1, %2" : "=r"(r) : "r"(a), "r"(b));
    return r;
#else
    return (int32_t)(((int64_t)a * b + 0x80000000LL) >> 32); /* >> of int64: arithmetic */
#endif
}

/* The fold modes of a block (pw_prepare). */
enum { PW_ANY, PW_ROUND8, PW_SMM };

/* Block [o0, o0 + nb)'s rows (in pairs) and fold parameters; returns its mode: PW_ANY
 * (fold_fast); PW_ROUND8, the int8 fold pw_round8: int8 dY (|q| <= 127, m < 2^24: q m fits
 * int32 with room for the rounding constant while sh <= 25), every shift in [1, 25] or the
 * channel's dY' zero (sh >= 32 with |q m| < 2^31: below one half); PW_SMM, for int8 dY and 15
 * bits when every channel is zero (m 0 or sh >= 32) or has 1 <= sh <= 31 and meets no tie:
 * m[j] = 2^sa, s[j] = m 2^sb for pw_smmulr (both 0 for a zero channel). No tie: q m / 2^sh is
 * halfway only when q m has sh - 1 trailing zeros, tz(q) + tz(m) with tz(q) <= 7 for a nonzero
 * int8 q, so never when d = sh - 1 - tz(m) is outside 0..7; then half up is half to even (a
 * channel with d in 0..7 and sh <= 25 takes PW_ROUND8's parameters and its bit in `ties`).
 * sa = 24 (sh <= 8) or 32 - sh keeps q 2^sa within int32 (|q| <= 128) and m 2^sb below 2^31. */
static int pw_prepare(pw_pair *t, pw_fold_params *fp, const tp_weights *w, const tp_gm_fold *f,
                      uint32_t o0, uint32_t nb, int int8)
{
    uint32_t j, m, step, ties = 0u;
    int32_t k, fast = int8, smm = int8 && f->bits == 15u;
    for (j = 0; j < nb; j++) {
        int32_t sh;
        const int8_t *row = tp_weights_row(w, o0 + j, &step);
        if ((j & 1u) == 0u) {
            t[j >> 1].row0 = row;
        }
        t[j >> 1].row1 = row;
        tp_gm_scale_parts(tp_weights_scale(w, o0 + j), &m, &k);
        sh = f->top - k;
        fp->m[j] = (int32_t)m;
        fp->s[j] = (uint32_t)sh;
        if (!(m == 0u || sh >= 32 || (sh >= 1 && sh <= 25))) {
            fast = 0;
        }
        if (smm && !(m == 0u || sh >= 32)) {
            int32_t d = sh - 1 - (int32_t)__builtin_ctz(m);
            if (sh < 1) {
                smm = 0;
            } else if (d >= 0 && d <= 7) { /* a tie can happen: pw_round8's rounding */
                if (sh > 25) {
                    smm = 0;
                }
                ties |= 1u << j;
            }
        }
    }
    fp->ties = smm ? ties : 0u;
    if (fast || smm) {
        for (j = 0; j < nb; j++) {
            int32_t sh = (int32_t)fp->s[j];
            if (fp->m[j] == 0 || sh >= 32) {
                fp->m[j] = 0;
                fp->s[j] = smm ? 0u : 1u;
            } else if (smm && !(fp->ties >> j & 1u)) {
                uint32_t sa = sh <= 8 ? 24u : 32u - (uint32_t)sh;
                fp->s[j] = (uint32_t)fp->m[j] << (32u - (uint32_t)sh - sa);
                fp->m[j] = (int32_t)(1u << sa);
            } else {
                fp->s[j] = (uint32_t)sh | ((1u << (sh - 1)) - 1u) << 8;
            }
        }
    }
    return smm ? PW_SMM : fast ? PW_ROUND8 : PW_ANY;
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

/* (v0, v1) clamped to +-(2^15 - 1) as a word: SSAT to 16 bits, then both halves negated
 * twice by QSUB16 from 0, which turns -2^15 into -(2^15 - 1) and leaves the rest. */
static inline uint32_t pw_pack_clamp15(int32_t v0, int32_t v1)
{
#if defined(__ARM_FEATURE_DSP) && !defined(TP_KERNELS_DSP_EMULATION)
    uint32_t g = pack16(__ssat(v0, 16), __ssat(v1, 16)), n, z = 0u;
    __asm__("qsub16 %0, %1, %2" : "=r"(n) : "r"(z), "r"(g));
    __asm__("qsub16 %0, %1, %2" : "=r"(g) : "r"(z), "r"(n));
    return g;
#else
    return pack16(pw_clamp15(v0), pw_clamp15(v1));
#endif
}

/* Channel j's dY' at dY offset a (a block of `mode`; dY `bytes` wide); PW_SMM: not clamped
 * (pw_pack_clamp15 does). */
TP_DSP_INLINE int32_t pw_val(const pw_fold_params *fp, uint32_t j, const void *dq, uint32_t a,
                             int32_t lim, int mode, uint32_t bytes)
{
    if (mode == PW_SMM) {
        return pw_smmulr(((const int8_t *)dq)[a] * fp->m[j], (int32_t)fp->s[j]);
    } else if (mode == PW_ROUND8) {
        int32_t v = pw_round8(((const int8_t *)dq)[a] * fp->m[j], fp->s[j]);
        return v > lim ? lim : v < -lim ? -lim : v;
    } else {
        int32_t q = bytes == 2u ? ((const int16_t *)dq)[a] : ((const int8_t *)dq)[a];
        return fold_fast(q, (uint32_t)fp->m[j], (int32_t)fp->s[j], lim);
    }
}

/* The block's dY' of np (1..4) pixels, the first at dY offset `at`, the others oc apart, into
 * the table's pairs. */
TP_DSP_INLINE void pw_fold_body(pw_pair *t, const pw_fold_params *fp, const void *dq,
                                uint32_t at, uint32_t oc, uint32_t np, uint32_t nb, int32_t lim,
                                int mode, uint32_t bytes)
{
    uint32_t j, p;
    for (j = 0; j < nb; j += 2u, t++) {
        for (p = 0; p < np; p++) {
            uint32_t a = at + p * oc + j;
            int32_t v0 = pw_val(fp, j, dq, a, lim, mode, bytes);
            int32_t v1 = j + 1u < nb ? pw_val(fp, j + 1u, dq, a + 1u, lim, mode, bytes) : 0;
            t->g[p] = mode == PW_SMM ? pw_pack_clamp15(v0, v1) : pack16(v0, v1);
        }
    }
}

/* pw_fold_smm's pairs, the parameters in registers over the pixels (an odd last channel's
 * partner reads the channel again, times 0). */
TP_DSP_INLINE void pw_fold_smm_pairs(pw_pair *t, const pw_fold_params *fp, const int8_t *dq,
                                     uint32_t at, uint32_t oc, uint32_t np, uint32_t nb)
{
    uint32_t j, p;
    for (j = 0; j < nb; j += 2u, t++) {
        const int8_t *d0 = dq + at + j, *d1 = j + 1u < nb ? d0 + 1 : d0;
        int32_t qs0 = fp->m[j], b0 = (int32_t)fp->s[j], qs1 = 0, b1 = 0;
        if (j + 1u < nb) {
            qs1 = fp->m[j + 1u];
            b1 = (int32_t)fp->s[j + 1u];
        }
        for (p = 0; p < np; p++, d0 += oc, d1 += oc) {
            t->g[p] = pw_pack_clamp15(pw_smmulr(*d0 * qs0, b0), pw_smmulr(*d1 * qs1, b1));
        }
    }
}

static TP_DSP_NOINLINE void pw_fold_smm(pw_pair *t, const pw_fold_params *fp, const int8_t *dq,
                                        uint32_t at, uint32_t oc, uint32_t np, uint32_t nb)
{
    uint32_t j, p, ties = fp->ties;
    if (np == 4u) {
        pw_fold_smm_pairs(t, fp, dq, at, oc, 4u, nb);
    } else {
        pw_fold_smm_pairs(t, fp, dq, at, oc, np, nb);
    }
    while (ties != 0u) { /* the channels that may meet a tie, again */
        uint32_t sh;
        j = (uint32_t)__builtin_ctz(ties);
        sh = 16u * (j & 1u);
        ties &= ties - 1u;
        for (p = 0; p < np; p++) {
            int32_t v = pw_val(fp, j, dq, at + p * oc + j, 32767, PW_ROUND8, 1u);
            uint32_t *g = &t[j >> 1].g[p];
            *g = (*g & ~(0xFFFFu << sh)) | ((uint32_t)v & 0xFFFFu) << sh;
        }
    }
}

static TP_DSP_NOINLINE void pw_fold_r8(pw_pair *t, const pw_fold_params *fp, const int8_t *dq,
                                       uint32_t at, uint32_t oc, uint32_t np, uint32_t nb,
                                       int32_t lim)
{
    pw_fold_body(t, fp, dq, at, oc, np, nb, lim, PW_ROUND8, 1u);
}

static TP_DSP_NOINLINE void pw_fold16(pw_pair *t, const pw_fold_params *fp, const void *dq,
                                      uint32_t at, uint32_t oc, uint32_t np, uint32_t nb,
                                      int32_t lim)
{
    pw_fold_body(t, fp, dq, at, oc, np, nb, lim, PW_ANY, 2u);
}

static TP_DSP_NOINLINE void pw_fold8_any(pw_pair *t, const pw_fold_params *fp, const void *dq,
                                         uint32_t at, uint32_t oc, uint32_t np, uint32_t nb,
                                         int32_t lim)
{
    pw_fold_body(t, fp, dq, at, oc, np, nb, lim, PW_ANY, 1u);
}

static void pw_fold(pw_pair *t, const pw_fold_params *fp, int mode, const tp_gmap *dy,
                    uint32_t at, uint32_t oc, uint32_t np, uint32_t nb, int32_t lim)
{
    if (mode == PW_SMM) {
        pw_fold_smm(t, fp, (const int8_t *)dy->q, at, oc, np, nb);
    } else if (mode == PW_ROUND8) {
        pw_fold_r8(t, fp, (const int8_t *)dy->q, at, oc, np, nb, lim);
    } else if (dy->bytes == 2u) {
        pw_fold16(t, fp, dy->q, at, oc, np, nb, lim);
    } else {
        pw_fold8_any(t, fp, dy->q, at, oc, np, nb, lim);
    }
}

/* A pair's weights of inputs i, i + 1: (W[o, i], W[o + 1, i]) and (W[o, i + 1], W[o + 1, i + 1]),
 * from two halfwords. */
static inline uint32_t pw_w2(const pw_pair *e, uint32_t i, uint32_t *od)
{
    uint16_t a, b;
    uint32_t v;
    __builtin_memcpy(&a, e->row0 + i, 2);
    __builtin_memcpy(&b, e->row1 + i, 2);
    v = (uint32_t)a | (uint32_t)b << 16;
    *od = pw_sxtb16_odd(v);
    return tp_sxtb16(v);
}

/* dX[p, i], dX[p, i + 1] (+)= sum over the block's channel pairs of SMLAD of the pair's
 * weights and g[p], for the np (1, 2 or 4) pixels p whose sums start at a + p ic, every even i
 * below ic; `add`: add to what a holds (a later block). */
TP_DSP_INLINE void pw_mac_c(int32_t *a, const pw_pair *t, uint32_t npairs, uint32_t ic, int add,
                            uint32_t np)
{
    uint32_t i, p;
    for (i = 0; i < ic; i += 2u) {
        const pw_pair *e;
        int32_t s0[4], s1[4];
        for (p = 0; p < np; p++) {
            s0[p] = add ? a[p * ic + i] : 0;
            s1[p] = add ? a[p * ic + i + 1u] : 0;
        }
        for (e = t; e != t + npairs; e++) {
            uint32_t od, ev = pw_w2(e, i, &od);
            for (p = 0; p < np; p++) {
                s0[p] = tp_smlad(ev, e->g[p], s0[p]);
                s1[p] = tp_smlad(od, e->g[p], s1[p]);
            }
        }
        for (p = 0; p < np; p++) {
            a[p * ic + i] = s0[p];
            a[p * ic + i + 1u] = s1[p];
        }
    }
}

#if defined(__ARM_FEATURE_DSP) && !defined(TP_KERNELS_DSP_EMULATION)
/* One pair, four pixels: 16 instructions for 16 MACs. */
#define PW_Q4                                                                                  \
    "ldrd %[r], %[u], [%[e]], #24\n\t"                                                          \
    "ldrh %[r], [%[r], %[i]]\n\t"                                                               \
    "ldrh %[u], [%[u], %[i]]\n\t"                                                               \
    "orr %[r], %[r], %[u], lsl #16\n\t"                                                         \
    "sxtb16 %[u], %[r]\n\t"                                                                     \
    "sxtb16 %[r], %[r], ror #8\n\t"                                                             \
    "ldrd %[ga], %[gb], [%[e], #-16]\n\t"                                                       \
    "smlad %[x0], %[u], %[ga], %[x0]\n\t"                                                       \
    "smlad %[x1], %[r], %[ga], %[x1]\n\t"                                                       \
    "smlad %[y0], %[u], %[gb], %[y0]\n\t"                                                       \
    "smlad %[y1], %[r], %[gb], %[y1]\n\t"                                                       \
    "ldrd %[ga], %[gb], [%[e], #-8]\n\t"                                                        \
    "smlad %[z0], %[u], %[ga], %[z0]\n\t"                                                       \
    "smlad %[z1], %[r], %[ga], %[z1]\n\t"                                                       \
    "smlad %[w0], %[u], %[gb], %[w0]\n\t"                                                       \
    "smlad %[w1], %[r], %[gb], %[w1]\n\t"
#define PW_Q4_OUT                                                                              \
    [x0] "+r"(x0), [x1] "+r"(x1), [y0] "+r"(y0), [y1] "+r"(y1), [z0] "+r"(z0), [z1] "+r"(z1),  \
        [w0] "+r"(w0), [w1] "+r"(w1), [e] "+r"(e), [r] "=&r"(r), [u] "=&r"(u),                 \
        [ga] "=&r"(ga), [gb] "=&r"(gb)
/* One pair, two pixels: 11 instructions for 8 MACs. */
#define PW_Q2                                                                                  \
    "ldrd %[r], %[u], [%[e]], #24\n\t"                                                          \
    "ldrh %[r], [%[r], %[i]]\n\t"                                                               \
    "ldrh %[u], [%[u], %[i]]\n\t"                                                               \
    "orr %[r], %[r], %[u], lsl #16\n\t"                                                         \
    "sxtb16 %[u], %[r]\n\t"                                                                     \
    "sxtb16 %[r], %[r], ror #8\n\t"                                                             \
    "ldrd %[ga], %[gb], [%[e], #-16]\n\t"                                                       \
    "smlad %[x0], %[u], %[ga], %[x0]\n\t"                                                       \
    "smlad %[x1], %[r], %[ga], %[x1]\n\t"                                                       \
    "smlad %[y0], %[u], %[gb], %[y0]\n\t"                                                       \
    "smlad %[y1], %[r], %[gb], %[y1]\n\t"
#define PW_Q2_OUT                                                                              \
    [x0] "+r"(x0), [x1] "+r"(x1), [y0] "+r"(y0), [y1] "+r"(y1), [e] "+r"(e), [r] "=&r"(r),     \
        [u] "=&r"(u), [ga] "=&r"(ga), [gb] "=&r"(gb)

/* pw_mac_c for four pixels: pairs two a step, then an odd last one. */
static TP_DSP_NOINLINE void pw_mac4(int32_t *a, const pw_pair *t, uint32_t npairs, uint32_t ic,
                                    int add)
{
    uint32_t i;
    for (i = 0; i < ic; i += 2u) {
        const pw_pair *e = t, *end2 = t + (npairs & ~1u);
        int32_t x0 = 0, x1 = 0, y0 = 0, y1 = 0, z0 = 0, z1 = 0, w0 = 0, w1 = 0;
        uint32_t r, u, ga, gb;
        if (add) {
            x0 = a[i];
            x1 = a[i + 1u];
            y0 = a[ic + i];
            y1 = a[ic + i + 1u];
            z0 = a[2u * ic + i];
            z1 = a[2u * ic + i + 1u];
            w0 = a[3u * ic + i];
            w1 = a[3u * ic + i + 1u];
        }
        if (e != end2) {
            __asm__ volatile("1:\n\t" PW_Q4 PW_Q4 "ldr %[r], %[end]\n\t"
                             "cmp %[e], %[r]\n\t"
                             "bne 1b"
                             : PW_Q4_OUT
                             : [end] "m"(end2), [i] "r"(i)
                             : "cc", "memory");
        }
        if (npairs & 1u) {
            __asm__ volatile(PW_Q4 : PW_Q4_OUT : [i] "r"(i) : "memory");
        }
        a[i] = x0;
        a[i + 1u] = x1;
        a[ic + i] = y0;
        a[ic + i + 1u] = y1;
        a[2u * ic + i] = z0;
        a[2u * ic + i + 1u] = z1;
        a[3u * ic + i] = w0;
        a[3u * ic + i + 1u] = w1;
    }
}

/* pw_mac_c for two pixels: pairs two a step, then an odd last one. */
static TP_DSP_NOINLINE void pw_mac2(int32_t *a, const pw_pair *t, uint32_t npairs, uint32_t ic,
                                    int add)
{
    uint32_t i;
    for (i = 0; i < ic; i += 2u) {
        const pw_pair *e = t, *end2 = t + (npairs & ~1u);
        int32_t x0 = 0, x1 = 0, y0 = 0, y1 = 0;
        uint32_t r, u, ga, gb;
        if (add) {
            x0 = a[i];
            x1 = a[i + 1u];
            y0 = a[ic + i];
            y1 = a[ic + i + 1u];
        }
        if (e != end2) {
            __asm__ volatile("1:\n\t" PW_Q2 PW_Q2 "cmp %[e], %[end]\n\t"
                             "bne 1b"
                             : PW_Q2_OUT
                             : [end] "r"(end2), [i] "r"(i)
                             : "cc", "memory");
        }
        if (npairs & 1u) {
            __asm__ volatile(PW_Q2 : PW_Q2_OUT : [i] "r"(i) : "memory");
        }
        a[i] = x0;
        a[i + 1u] = x1;
        a[ic + i] = y0;
        a[ic + i + 1u] = y1;
    }
}

/* One pair, three pixels: 14 instructions for 12 MACs. */
#define PW_Q3                                                                                  \
    "ldrd %[r], %[u], [%[e]], #24\n\t"                                                          \
    "ldrh %[r], [%[r], %[i]]\n\t"                                                               \
    "ldrh %[u], [%[u], %[i]]\n\t"                                                               \
    "orr %[r], %[r], %[u], lsl #16\n\t"                                                         \
    "sxtb16 %[u], %[r]\n\t"                                                                     \
    "sxtb16 %[r], %[r], ror #8\n\t"                                                             \
    "ldrd %[ga], %[gb], [%[e], #-16]\n\t"                                                       \
    "smlad %[x0], %[u], %[ga], %[x0]\n\t"                                                       \
    "smlad %[x1], %[r], %[ga], %[x1]\n\t"                                                       \
    "smlad %[y0], %[u], %[gb], %[y0]\n\t"                                                       \
    "smlad %[y1], %[r], %[gb], %[y1]\n\t"                                                       \
    "ldr %[ga], [%[e], #-8]\n\t"                                                                \
    "smlad %[z0], %[u], %[ga], %[z0]\n\t"                                                       \
    "smlad %[z1], %[r], %[ga], %[z1]\n\t"
#define PW_Q3_OUT                                                                              \
    [x0] "+r"(x0), [x1] "+r"(x1), [y0] "+r"(y0), [y1] "+r"(y1), [z0] "+r"(z0), [z1] "+r"(z1),  \
        [e] "+r"(e), [r] "=&r"(r), [u] "=&r"(u), [ga] "=&r"(ga), [gb] "=&r"(gb)
/* One pair, one pixel: 9 instructions for 4 MACs. */
#define PW_Q1                                                                                  \
    "ldrd %[r], %[u], [%[e]], #24\n\t"                                                          \
    "ldrh %[r], [%[r], %[i]]\n\t"                                                               \
    "ldrh %[u], [%[u], %[i]]\n\t"                                                               \
    "orr %[r], %[r], %[u], lsl #16\n\t"                                                         \
    "sxtb16 %[u], %[r]\n\t"                                                                     \
    "sxtb16 %[r], %[r], ror #8\n\t"                                                             \
    "ldr %[ga], [%[e], #-16]\n\t"                                                               \
    "smlad %[x0], %[u], %[ga], %[x0]\n\t"                                                       \
    "smlad %[x1], %[r], %[ga], %[x1]\n\t"
#define PW_Q1_OUT                                                                              \
    [x0] "+r"(x0), [x1] "+r"(x1), [e] "+r"(e), [r] "=&r"(r), [u] "=&r"(u), [ga] "=&r"(ga)

/* pw_mac_c for three pixels: pairs two a step, then an odd last one. */
static TP_DSP_NOINLINE void pw_mac3(int32_t *a, const pw_pair *t, uint32_t npairs, uint32_t ic,
                                    int add)
{
    uint32_t i;
    for (i = 0; i < ic; i += 2u) {
        const pw_pair *e = t, *end2 = t + (npairs & ~1u);
        int32_t x0 = 0, x1 = 0, y0 = 0, y1 = 0, z0 = 0, z1 = 0;
        uint32_t r, u, ga, gb;
        if (add) {
            x0 = a[i];
            x1 = a[i + 1u];
            y0 = a[ic + i];
            y1 = a[ic + i + 1u];
            z0 = a[2u * ic + i];
            z1 = a[2u * ic + i + 1u];
        }
        if (e != end2) {
            /* the end in memory, as pw_mac4's: at -Os (the nRF and MicroPython builds) GCC
             * has no register left for it */
            __asm__ volatile("1:\n\t" PW_Q3 PW_Q3 "ldr %[r], %[end]\n\t"
                             "cmp %[e], %[r]\n\t"
                             "bne 1b"
                             : PW_Q3_OUT
                             : [end] "m"(end2), [i] "r"(i)
                             : "cc", "memory");
        }
        if (npairs & 1u) {
            __asm__ volatile(PW_Q3 : PW_Q3_OUT : [i] "r"(i) : "memory");
        }
        a[i] = x0;
        a[i + 1u] = x1;
        a[ic + i] = y0;
        a[ic + i + 1u] = y1;
        a[2u * ic + i] = z0;
        a[2u * ic + i + 1u] = z1;
    }
}

/* pw_mac_c for one pixel: pairs two a step, then an odd last one. */
static TP_DSP_NOINLINE void pw_mac1(int32_t *a, const pw_pair *t, uint32_t npairs, uint32_t ic,
                                    int add)
{
    uint32_t i;
    for (i = 0; i < ic; i += 2u) {
        const pw_pair *e = t, *end2 = t + (npairs & ~1u);
        int32_t x0 = add ? a[i] : 0, x1 = add ? a[i + 1u] : 0;
        uint32_t r, u, ga;
        if (e != end2) {
            __asm__ volatile("1:\n\t" PW_Q1 PW_Q1 "cmp %[e], %[end]\n\t"
                             "bne 1b"
                             : PW_Q1_OUT
                             : [end] "r"(end2), [i] "r"(i)
                             : "cc", "memory");
        }
        if (npairs & 1u) {
            __asm__ volatile(PW_Q1 : PW_Q1_OUT : [i] "r"(i) : "memory");
        }
        a[i] = x0;
        a[i + 1u] = x1;
    }
}
#else
static TP_DSP_NOINLINE void pw_mac3(int32_t *a, const pw_pair *t, uint32_t npairs, uint32_t ic,
                                    int add)
{
    pw_mac_c(a, t, npairs, ic, add, 3u);
}

static TP_DSP_NOINLINE void pw_mac1(int32_t *a, const pw_pair *t, uint32_t npairs, uint32_t ic,
                                    int add)
{
    pw_mac_c(a, t, npairs, ic, add, 1u);
}

static TP_DSP_NOINLINE void pw_mac4(int32_t *a, const pw_pair *t, uint32_t npairs, uint32_t ic,
                                    int add)
{
    pw_mac_c(a, t, npairs, ic, add, 4u);
}

static TP_DSP_NOINLINE void pw_mac2(int32_t *a, const pw_pair *t, uint32_t npairs, uint32_t ic,
                                    int add)
{
    pw_mac_c(a, t, npairs, ic, add, 2u);
}
#endif

void tp_arm_conv2d_input_grad_q(const tp_conv_params *p, const tp_shape *in_shape,
                                const tp_shape *out_shape, const tp_weights *w,
                                const tp_gm_fold *f, const tp_gmap *dy, tp_gm_writer *dx,
                                void *scratch)
{
    uint32_t iw = (uint32_t)in_shape->w, ic = (uint32_t)in_shape->c, oc = (uint32_t)out_shape->c;
    int32_t *acc = (int32_t *)scratch, lim = ((int32_t)1 << f->bits) - 1;
    uint32_t y, x, o0, nb;
    int mode = PW_ANY;
    pw_pair t[TP_PW_BLOCK / 2u];
    pw_fold_params fp;
    if (!pw_covered(p, in_shape) || !f->live) {
        tp_conv2d_input_grad_q(p, in_shape, out_shape, w, f, dy, dx, scratch);
        return;
    }
    for (y = 0; y < (uint32_t)in_shape->h; y++) {
        for (o0 = 0; o0 < oc; o0 += nb) {
            uint32_t at = y * iw * oc + o0, np;
            int add = o0 != 0u;
            nb = oc - o0 < TP_PW_BLOCK ? oc - o0 : TP_PW_BLOCK;
            np = (nb + 1u) >> 1;
            if (y == 0u || oc > TP_PW_BLOCK) { /* one block: prepared once */
                mode = pw_prepare(t, &fp, w, f, o0, nb, dy->bytes == 1u);
            }
            for (x = 0; x + 4u <= iw; x += 4u, at += 4u * oc) {
                pw_fold(t, &fp, mode, dy, at, oc, 4u, nb, lim);
                pw_mac4(acc + x * ic, t, np, ic, add);
            }
            if (x < iw) { /* the last one to three pixels */
                pw_fold(t, &fp, mode, dy, at, oc, iw - x, nb, lim);
                if (iw - x == 3u) {
                    pw_mac3(acc + x * ic, t, np, ic, add);
                } else if (iw - x == 2u) {
                    pw_mac2(acc + x * ic, t, np, ic, add);
                } else {
                    pw_mac1(acc + x * ic, t, np, ic, add);
                }
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
 * trailing zeros, tz(q) <= 7), then clamped to +-lim when q = -128's reaches beyond (the
 * SMMULR's 64-bit product holds any q m). Returns 0 when the channel does not qualify, 1 when
 * no dY' needs the clamp, 2 when some may. */
static inline int dw_smm_of(uint32_t m, int32_t sh, int32_t lim, int32_t *qs, int32_t *b)
{
    uint32_t sa, sb;
    int32_t d;
    if (m == 0u || sh < 1 || sh > 31) {
        return 0;
    }
    d = sh - 1 - (int32_t)__builtin_ctz(m);
    if (d >= 0 && d <= 7) {
        return 0;
    }
    sa = sh <= 8 ? 24u : 32u - (uint32_t)sh;
    sb = 32u - (uint32_t)sh - sa;
    *qs = (int32_t)(1u << sa);
    *b = (int32_t)(m << sb);
    return dw_smmulr(-128 * *qs, *b) >= -lim ? 1 : 2;
}

/* One dY' by SMMULR (dw_smm_of's qs, b), clamped to +-lim when sat. */
TP_DSP_INLINE int32_t dw_smm_one(int32_t q, int32_t qs, int32_t b, int sat, int32_t lim)
{
    int32_t r = dw_smmulr(q * qs, b);
    return sat ? (r > lim ? lim : r < -lim ? -lim : r) : r;
}

/* n dY' of each of k (1 to 3, a constant) int8 rows (q0, q1, q2, c apart) folded by SMMULR
 * into planes d, d + TP_GRAD_DW_PLANE and d + 2 TP_GRAD_DW_PLANE: one loop for the k. */
TP_DSP_INLINE void dw_fold_smmk(int16_t *d, const int8_t *q0, const int8_t *q1, const int8_t *q2,
                                uint32_t c, uint32_t n, int32_t qs, int32_t b, int sat,
                                int32_t lim, uint32_t k)
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
            int32_t qs = 0, b = 0, sh;
            uint32_t s2;
            int smm;
            dw_scale_parts(tp_weights_scale(w, ch), &m, &k);
            sh = f->top - k;
            if (n == 0u || m == 0u || (bytes == 1u && sh >= 32) || sh > 40) {
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
                    wa[r] = pack16(wo[s2], wo[step]);
                    wb[r] = pack16(wo[step], wo[0]);
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
    uint32_t i, j, r, ph, kh, kw, bound = 0, jr[2][2];
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
    /* tp_gm_to_f32 of an int32 sum: its float32 (rounded to nearest even, as i64_to_f32 does)
     * times the same float32 factor */
    cf = x_scale * tp_gm_pow2(dy->e);
    for (kh = 0; kh < k0; kh++) {
        if (k1 == 3u) { /* a kernel row's three taps from one read of each dY pair */
            const int16_t *x0 = xp + kh * rs, *x1 = x0 + (1u % s1) * pw + 1u / s1;
            const int16_t *x2 = x0 + (2u % s1) * pw + 2u / s1, *g = d;
            int32_t a0 = 0, a1 = 0, a2 = 0;
            for (i = 0; i < oh; i++, x0 += s0 * rs, x1 += s0 * rs, x2 += s0 * rs, g += dw) {
                for (j = 0; j < dw; j += 2u) {
                    uint32_t gj = rd_pair(g + j);
                    a0 = tp_smlad(gj, rd_pair(x0 + j), a0);
                    a1 = tp_smlad(gj, rd_pair(x1 + j), a1);
                    a2 = tp_smlad(gj, rd_pair(x2 + j), a2);
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
