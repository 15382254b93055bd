/* tp_conv_input_grad_arm.c - the input gradient of 1x1 CONV_2D with integer maps for Cortex-M
 * with the DSP extension, bit for bit the reference kernel (kernels/ref/tp_weighted_gradq.c),
 * in its scratch; other shapes run the reference kernel.
 *
 * dX[p, i] = sum_o W[o, i] dY'[p, o]: every sum is exact in int32 (the fold's bits bound
 * W^T dY' below 2^31, tp_gm_fold_bits), so the order of the multiply-accumulates is free and
 * SMLAD takes two at a time. An output channel whose weight row is all zero (VWW's pruned
 * channels: about two in three of its pointwise ones) adds nothing and is left out, by its
 * current row (a trained row may leave zero, or reach it). The others go in blocks of
 * TP_PW_BLOCK, in pairs (o, o'): each pair's weight rows (held apart or not) and the block's fold
 * parameters (the weight scale's parts, hoisted out of the pixel loop) in a table on the stack; per
 * four pixels of a row (then the last one to three), the block's dY' folded (int8 dY: one SMMULR a
 * value where no tie can happen, see pw_prepare; else in int32, see pw_round8) into the table as
 * (dY'[p, o], dY'[p, o']) words, a pair whose words are all zero left out (pw_next), then per
 * two inputs of the four pixels eight sums in registers over the block: per pair, two halfwords
 * of weights made (W[o, i], W[o', i]) and (W[o, i + 1], W[o', i + 1]) by one ORR and two
 * SXTB16, eight SMLADs (16 MACs) with the four pixels' words. Pairs of inputs whose two weight
 * columns are zero in every row the blocks take (VWW's inputs from pruned channels) have dX 0:
 * the sums run over the others' runs (pw_live_inputs), the row zeroed once.
 */
#include "tinyprop.h"
#include "tp_dsp.h"

#if TP_KERNELS_DSP

/* Output channels per block: a block's table (pw_pair) and fold parameters live on the stack. */
#define TP_PW_BLOCK 32u

/* Blocks whose fold parameters are kept over the rows (an op of more keeps the first
 * TP_PW_KEPT - 1 and prepares the others at each row in the last place). */
#define TP_PW_KEPT 2u

/* Output channels whose rows are checked for zeros (a bitmap on the stack); those past it are
 * taken whatever their rows hold. */
#define TP_PW_CHECKED 512u

/* Output channels o, o' of a block: their weight rows and the folded dY' of up to four
 * pixels p, g[p] = (dY'[p, o] low, dY'[p, o'] high), read in pairs (LDRD) by the
 * multiply-accumulate loops. A block's odd last channel is paired with itself, its high
 * halves 0. The fold writes each pair's rows with its g (pw_next). */
typedef struct {
    const int8_t *row0, *row1;
    uint32_t g[4];
} pw_pair;

/* A pair of a block's channels j, j + 1 (index i = 0, 1): m[i] the channel's mantissa and s[i]
 * the shift (top - k, k its scale's exponent) for tp_dsp_fold; or, in a PW_ROUND8 block, s[i] =
 * sh | (2^(sh-1) - 1) << 8 with 1 <= sh <= 25 (m 0 for a channel whose dY' is 0); or, in a
 * PW_SMM block, m[i] = 2^sa and s[i] = m 2^sb (both 0 for a zero channel). Laid out for
 * pw_fold_fast's LDM (eight words, in the order of its registers). */
typedef struct {
    int32_t m[2];
    uint32_t s[2];
    const int8_t *row[2]; /* the channels' weight rows (an odd last one's twice) */
    uint16_t ch[2];       /* the output channels */
    uint32_t pad;         /* 32 bytes: a pair's offset a shift of its index */
} pw_chan2;

/* A block's fold parameters, its channel j's in pair j / 2 (PW_M and kin). */
typedef struct {
    pw_chan2 pair[TP_PW_BLOCK / 2u];
    uint32_t ties;  /* PW_SMM: bit j for a channel folded as in PW_ROUND8 (its parameters so) */
    uint32_t clamp; /* PW_SMM: 0 when no dY' can reach +-2^15 (the fold's no_clamp) */
} pw_fold_params;
#define PW_M(fp, j) ((fp)->pair[(j) >> 1].m[(j)&1u])
#define PW_S(fp, j) ((fp)->pair[(j) >> 1].s[(j)&1u])
#define PW_ROW(fp, j) ((fp)->pair[(j) >> 1].row[(j)&1u])
#define PW_CH(fp, j) ((fp)->pair[(j) >> 1].ch[(j)&1u])

/* The fold modes of a block (pw_prepare). */
enum { PW_ANY, PW_ROUND8, PW_SMM };

/* Bit o of zero[o / 32] for each output channel o < TP_PW_CHECKED that adds nothing to dX:
 * its dY is zero everywhere (f->dead: oc at most TP_GM_DEAD_C; every fold of 0 is 0), or else
 * its weight row (ic weights) is all zero; returns how many others there are. */
static uint32_t pw_zero_rows(uint32_t *zero, const tp_weights *w, const tp_gm_fold *f, uint32_t oc,
                             uint32_t ic)
{
    uint32_t o, i, step, live = oc, by_dead = oc <= TP_GM_DEAD_C;
    for (o = 0; o < oc && o < TP_PW_CHECKED; o++) {
        const int8_t *row = tp_weights_row(w, o, &step);
        uint32_t any = 0u;
        if ((o & 31u) == 0u) {
            zero[o >> 5] = 0u;
        }
        if (by_dead && (f->dead[o >> 5] >> (o & 31u) & 1u) != 0u) {
            i = ic; /* left out without reading its row */
        } else {
            i = 0u;
        }
        /* four words a turn: a zero row is read whole */
        for (; i + 16u <= ic && any == 0u; i += 16u) {
            any = tp_dsp_rd32(row + i) | tp_dsp_rd32(row + i + 4u) | tp_dsp_rd32(row + i + 8u) |
                  tp_dsp_rd32(row + i + 12u);
        }
        for (; i + 4u <= ic && any == 0u; i += 4u) {
            any = tp_dsp_rd32(row + i);
        }
        for (; i < ic && any == 0u; i++) {
            any = (uint8_t)row[i];
        }
        if (any == 0u) {
            zero[o >> 5] |= 1u << (o & 31u);
            live--;
        }
    }
    return live;
}

/* The nb channels of the next block: those from *o on whose rows are not zero; *o past them. */
static void pw_gather(pw_fold_params *fp, const uint32_t *zero, uint32_t *o, uint32_t nb)
{
    uint32_t j, c = *o;
    for (j = 0; j < nb; c++) {
        if (c >= TP_PW_CHECKED || !(zero[c >> 5] >> (c & 31u) & 1u)) {
            PW_CH(fp, j) = (uint16_t)c;
            j++;
        }
    }
    *o = c;
}

/* The nb channels of the next block from PWIG's list (u16 LE at live). */
static void pw_listed(pw_fold_params *fp, const uint8_t *live, uint32_t nb)
{
    uint32_t j;
    for (j = 0; j < nb; j++) {
        PW_CH(fp, j) = (uint16_t)tp_rd_u16(live + 2u * j);
    }
}

/* Runs of input pairs the kernel keeps (past them, the gaps before the last one's end are taken).
 */
#define TP_PW_RUNS 16u

/* The inputs whose sums are made, as runs [start, end) of pairs (i, i + 1), i even: those with a
 * nonzero weight in column i or i + 1 of a weight row the blocks take. A pair zero in both
 * columns of every such row (VWW's inputs from pruned channels: 30 to 78 % of the pairs of ops
 * 16 to 26) has dX 0 at every pixel: left where the kernel zeroed it (dead: some are). */
typedef struct {
    uint32_t n, dead;
    uint32_t run[TP_PW_RUNS][2];
} pw_inputs;

/* Whether every pair of inputs has a nonzero halfword in ors (n4 words). */
static int pw_all_pairs(const uint32_t *ors, uint32_t n4)
{
    uint32_t j;
    for (j = 0; j < n4; j++) {
        if ((ors[j] & 0xFFFFu) == 0u || (ors[j] >> 16) == 0u) {
            return 0;
        }
    }
    return 1;
}

/* ors[j] |= word j of four rows, n4 words. */
static void pw_or4(uint32_t *ors, const int8_t *const *rows, uint32_t n4)
{
    const int8_t *r0 = rows[0], *r1 = rows[1], *r2 = rows[2], *r3 = rows[3];
    uint32_t j;
    for (j = 0; j < 4u * n4; j += 4u) {
        *ors++ |= tp_dsp_rd32(r0 + j) | tp_dsp_rd32(r1 + j) | tp_dsp_rd32(r2 + j) |
                  tp_dsp_rd32(r3 + j);
    }
}

/* The runs of the rows the blocks take (pre: PWIG's listed channels; else those zero[] leaves),
 * their OR made in ors (ic / 4 words: the kernel's row, before its use), four rows at a time,
 * until every pair is found (checked every eight). */
static void pw_live_inputs(pw_inputs *in, uint32_t *ors, const tp_weights *w, const uint32_t *zero,
                           uint32_t oc, uint32_t ic, int pre)
{
    uint32_t o, j, k, n4 = ic / 4u, step, taken = 0u, n = pre ? w->n_live : oc;
    const int8_t *rows[4];
    in->n = 0u;
    in->dead = 0u;
    for (j = 0; j < n4; j++) {
        ors[j] = 0u;
    }
    for (o = 0; o < n; o++) {
        uint32_t ch = pre ? tp_rd_u16(w->live + 2u * o) : o;
        if (!pre && ch < TP_PW_CHECKED && (zero[ch >> 5] >> (ch & 31u) & 1u) != 0u) {
            continue;
        }
        rows[taken++ & 3u] = tp_weights_row(w, ch, &step);
        if ((taken & 3u) == 0u) {
            pw_or4(ors, rows, n4);
            if ((taken & 7u) == 0u && pw_all_pairs(ors, n4)) {
                break;
            }
        }
    }
    if ((taken & 3u) != 0u) { /* the last one to three, the first of them again in the rest */
        for (k = taken & 3u; k < 4u; k++) {
            rows[k] = rows[0];
        }
        pw_or4(ors, rows, n4);
    }
    for (k = 0; k < ic / 2u; k++) {
        uint32_t at = 2u * k;
        if ((ors[k >> 1] >> (16u * (k & 1u)) & 0xFFFFu) == 0u) {
            in->dead = 1u;
        } else if (in->n != 0u && (in->run[in->n - 1u][1] == at || in->n == TP_PW_RUNS)) {
            in->run[in->n - 1u][1] = at + 2u; /* on, or no room: the gap taken */
        } else {
            in->run[in->n][0] = at;
            in->run[in->n++][1] = at + 2u;
        }
    }
}

/* The rows and fold parameters of the block's channels PW_CH(fp, 0 .. nb - 1) (pre: the rows
 * are PWIG's, pair j / 2's at pre + (j / 2) pair_bytes, both of a pair's); returns its
 * mode: PW_ANY (tp_dsp_fold); PW_ROUND8, the int8 fold pw_round8: int8 dY (|q| <= 127, m < 2^24: q
 * m fits int32 with room for the rounding constant while sh <= 25), every shift in [1, 25] or the
 * channel's dY' zero (sh >= 32 with |q m| < 2^31: below one half); PW_SMM, for int8 dY and 15
 * bits when every channel is zero (m 0 or sh >= 32) or has 1 <= sh <= 31 and meets no tie
 * (tp_dsp_fold_may_tie): tp_dsp_smm_factors in m[j], s[j] (both 0 for a zero channel); a
 * channel that may meet a tie and has sh <= 25 takes PW_ROUND8's parameters and its bit in
 * `ties`. */
static TP_DSP_NOINLINE int pw_prepare(pw_fold_params *fp, const tp_weights *w, const tp_gm_fold *f,
                                      uint32_t nb, int int8, const uint8_t *pre,
                                      uint32_t pair_bytes)
{
    uint32_t j, m, step, ties = 0u;
    int32_t k, fast = int8, smm = int8 && f->bits == 15u;
    for (j = 0; j < nb; j++) {
        int32_t sh;
        PW_ROW(fp, j) = pre != NULL ? (const int8_t *)(pre + (j >> 1) * pair_bytes)
                                    : tp_weights_row(w, PW_CH(fp, j), &step);
        tp_gm_scale_parts(tp_weights_scale(w, PW_CH(fp, j)), &m, &k);
        sh = f->top - k;
        PW_M(fp, j) = (int32_t)m;
        PW_S(fp, j) = (uint32_t)sh;
        if (!(m == 0u || sh >= 32 || (sh >= 1 && sh <= 25))) {
            fast = 0;
        }
        if (smm && !(m == 0u || sh >= 32)) {
            if (sh < 1) {
                smm = 0;
            } else if (tp_dsp_fold_may_tie(m, sh)) { /* pw_round8's rounding */
                if (sh > 25) {
                    smm = 0;
                }
                ties |= 1u << j;
            }
        }
    }
    if (nb & 1u) { /* the last one's partner: itself, times 0 */
        PW_CH(fp, nb) = PW_CH(fp, nb - 1u);
        PW_ROW(fp, nb) = PW_ROW(fp, nb - 1u);
        PW_M(fp, nb) = 0;
        PW_S(fp, nb) = 0u;
    }
    fp->ties = smm ? ties : 0u;
    fp->clamp = f->no_clamp ? 0u : 1u;
    if (fast || smm) {
        for (j = 0; j < nb; j++) {
            int32_t sh = (int32_t)PW_S(fp, j), b;
            if (PW_M(fp, j) == 0 || sh >= 32) {
                PW_M(fp, j) = 0;
                PW_S(fp, j) = smm ? 0u : 1u;
            } else if (smm && !(fp->ties >> j & 1u)) {
                tp_dsp_smm_factors((uint32_t)PW_M(fp, j), sh, &PW_M(fp, j), &b);
                PW_S(fp, j) = (uint32_t)b;
            } else {
                PW_S(fp, j) = (uint32_t)sh | ((1u << (sh - 1)) - 1u) << 8;
            }
        }
    }
    return smm ? PW_SMM : fast ? PW_ROUND8 : PW_ANY;
}

/* round(q m / 2^sh) half to even of v = q m, sh = s & 0xFF in [1, 25] and s >> 8 = 2^(sh-1) - 1
 * (pw_prepare's PW_ROUND8 parameters); |q m| + 2^(sh-1) < 2^31. */
static inline int32_t pw_round8(int32_t v, uint32_t s)
{
    return tp_dsp_round_even(v, (int32_t)(s & 0xFFu), (int32_t)(s >> 8));
}

#if defined(__ARM_FEATURE_DSP) && !defined(TP_KERNELS_DSP_EMULATION)
/* (v0, v1) clamped to +-(2^15 - 1) as a word: SSAT to 16 bits, then both halves negated
 * twice by QSUB16 from 0, which turns -2^15 into -(2^15 - 1) and leaves the rest. */
static inline uint32_t pw_pack_clamp15(int32_t v0, int32_t v1)
{
    uint32_t g = tp_pkhbt16((uint32_t)__ssat(v0, 16), (uint32_t)__ssat(v1, 16)), n, z = 0u;
    __asm__("qsub16 %0, %1, %2" : "=r"(n) : "r"(z), "r"(g));
    __asm__("qsub16 %0, %1, %2" : "=r"(g) : "r"(z), "r"(n));
    return g;
}
#else
/* v clamped to +-lim, lim = 2^15 - 1 (the fold's usual bits) */
static inline int32_t pw_clamp15(int32_t v)
{
    return v > 32767 ? 32767 : v < -32767 ? -32767 : v;
}

static inline uint32_t pw_pack_clamp15(int32_t v0, int32_t v1)
{
    return tp_dsp_pack16(pw_clamp15(v0), pw_clamp15(v1));
}
#endif

/* The pairs' asm below takes, at four pixels, 14 core registers (pw_fold4's takes 11): built
 * where TP_DSP_ASM14 (tp_dsp.h) says, its callers TP_DSP_REGS14; elsewhere the C loops, the same
 * operations in the same order. */
/* Channel j's dY' at dY offset a (a PW_ROUND8 or PW_ANY block, or a PW_SMM block's channel
 * that may meet a tie, folded as in PW_ROUND8; dY `bytes` wide). */
TP_DSP_INLINE int32_t pw_val(const pw_fold_params *fp, uint32_t j, const void *dq, uint32_t a,
                             int32_t lim, int mode, uint32_t bytes)
{
    if (mode == PW_ROUND8) {
        return tp_dsp_sat(pw_round8(((const int8_t *)dq)[a] * PW_M(fp, j), PW_S(fp, j)), lim);
    } else {
        int32_t q = bytes == 2u ? ((const int16_t *)dq)[a] : ((const int8_t *)dq)[a];
        return tp_dsp_fold(q, (uint32_t)PW_M(fp, j), (int32_t)PW_S(fp, j), lim);
    }
}

/* Pair e's rows (the block's channels j and j + 1), and e past it unless its words g are all
 * zero (any): such a pair adds only products of 0 (mostly VWW's channels whose dY is zero at
 * these pixels, about one (pair, four pixels) in eight of the demo's), and the next pair takes
 * its place. */
TP_DSP_INLINE pw_pair *pw_next(pw_pair *e, const pw_fold_params *fp, uint32_t j, uint32_t any)
{
    e->row0 = PW_ROW(fp, j);
    e->row1 = PW_ROW(fp, j + 1u);
    return any != 0u ? e + 1 : e;
}

/* The block's dY' of np (1..4) pixels, the first's row at dY offset `at`, the others oc apart,
 * into the table's pairs, those with a nonzero g in order from t; returns how many. */
TP_DSP_INLINE uint32_t pw_fold_body(pw_pair *t, const pw_fold_params *fp, const void *dq,
                                    uint32_t at, uint32_t oc, uint32_t np, uint32_t nb, int32_t lim,
                                    int mode, uint32_t bytes)
{
    uint32_t j, p;
    pw_pair *e = t;
    for (j = 0; j < nb; j += 2u) {
        uint32_t any = 0u;
        for (p = 0; p < np; p++) {
            uint32_t a = at + p * oc;
            int32_t v0 = pw_val(fp, j, dq, a + PW_CH(fp, j), lim, mode, bytes);
            int32_t v1 = j + 1u < nb
                             ? pw_val(fp, j + 1u, dq, a + PW_CH(fp, j + 1u), lim, mode, bytes)
                             : 0;
            e->g[p] = tp_dsp_pack16(v0, v1);
            any |= e->g[p];
        }
        e = pw_next(e, fp, j, any);
    }
    return (uint32_t)(e - t);
}

/* The g of a pair of pw_fold_smm's with a channel that may meet a tie (bit 0 of tie: channel j,
 * bit 1: j + 1), which is folded as PW_ROUND8 does (its value within +-32767 already, which
 * pw_pack_clamp15 keeps); returns the OR of its words. */
static TP_DSP_NOINLINE uint32_t pw_fold_tie_pair(uint32_t *g, const pw_fold_params *fp,
                                                 const int8_t *d0, const int8_t *d1, uint32_t oc,
                                                 uint32_t np, uint32_t j, uint32_t tie)
{
    uint32_t p, any = 0u;
    for (p = 0; p < np; p++, d0 += oc, d1 += oc) {
        int32_t v0 = tie & 1u ? pw_val(fp, j, d0, 0u, 32767, PW_ROUND8, 1u)
                              : tp_smmulr(*d0 * PW_M(fp, j), (int32_t)PW_S(fp, j));
        int32_t v1 = tie & 2u ? pw_val(fp, j + 1u, d1, 0u, 32767, PW_ROUND8, 1u)
                              : tp_smmulr(*d1 * PW_M(fp, j + 1u), (int32_t)PW_S(fp, j + 1u));
        g[p] = pw_pack_clamp15(v0, v1);
        any |= g[p];
    }
    return any;
}

#if TP_DSP_ASM14
/* One pixel of pw_fold4: channel j's value at [d] and j + 1's at [d, dd] folded by SMMULR
 * (PW_FOLD_MUL), clamped to +-32767 as pw_pack_clamp15 does and packed (PW_FOLD1) or, for a
 * block whose folds stay within +-32767 (clamp 0), packed as they are, each value's low half
 * its int16 (PW_FOLD1N); stored at g[p] (pw_pair's g lies at offset 8), ORed into any; d one
 * pixel on (PW_FOLD_STORE). */
/* clang-format off */
#define PW_FOLD_MUL                                                                            \
    "ldrsb %[a], [%[d]]\n\t"                                                                   \
    "ldrsb %[b], [%[d], %[dd]]\n\t"                                                            \
    "mul %[a], %[a], %[q0]\n\t"                                                                \
    "mul %[b], %[b], %[q1]\n\t"                                                                \
    "smmulr %[a], %[a], %[s0]\n\t"                                                             \
    "smmulr %[b], %[b], %[s1]\n\t"
#define PW_FOLD_STORE(off)                                                                     \
    "str %[a], [%[e], #" off "]\n\t"                                                           \
    "add %[d], %[d], %[oc]\n\t"                                                                \
    "orr %[any], %[any], %[a]\n\t"
#define PW_FOLD1(off)                                                                          \
    PW_FOLD_MUL                                                                                \
    "ssat %[a], #16, %[a]\n\t"                                                                 \
    "ssat %[b], #16, %[b]\n\t"                                                                 \
    "pkhbt %[a], %[a], %[b], lsl #16\n\t"                                                      \
    "movs %[b], #0\n\t"                                                                        \
    "qsub16 %[a], %[b], %[a]\n\t"                                                              \
    "qsub16 %[a], %[b], %[a]\n\t"                                                              \
    PW_FOLD_STORE(off)
#define PW_FOLD1N(off) PW_FOLD_MUL "pkhbt %[a], %[a], %[b], lsl #16\n\t" PW_FOLD_STORE(off)
#define PW_FOLD4(one)                                                                          \
    __asm__(one("8") one("12") one("16") one("20")                                             \
            : [any] "+r"(any), [d] "+r"(d0), [a] "=&r"(a), [b] "=&r"(b)                        \
            : [dd] "r"(dd), [oc] "r"(oc), [q0] "r"(qs0), [s0] "r"(b0), [q1] "r"(qs1),          \
              [s1] "r"(b1), [e] "r"(e)                                                         \
            : "cc", "memory")
/* clang-format on */

/* pw_fold_smm_pairs' four pixels of pair e (channels at d0 and d0 + dd, factors qs0, b0 and
 * qs1, b1) in 60 instructions, or 40 without the clamp; returns the OR of its g. */
TP_DSP_INLINE uint32_t pw_fold4(pw_pair *e, const int8_t *d0, int32_t dd, uint32_t oc, int32_t qs0,
                                int32_t b0, int32_t qs1, int32_t b1, uint32_t clamp)
{
    uint32_t any = 0u, a, b;
    if (clamp) {
        PW_FOLD4(PW_FOLD1);
    } else {
        PW_FOLD4(PW_FOLD1N);
    }
    return any;
}
#endif

/* pw_fold_smm's pairs, the parameters in registers over the pixels (an odd last channel's
 * partner reads the channel again, times 0: its m and s past nb are 0); clamp: fp->clamp, a
 * constant in each call. */
TP_DSP_INLINE uint32_t pw_fold_smm_pairs(pw_pair *t, const pw_fold_params *fp, const int8_t *dq,
                                         uint32_t at, uint32_t oc, uint32_t np, uint32_t nb,
                                         uint32_t clamp)
{
    uint32_t j, p;
    pw_pair *e = t;
    for (j = 0; j < nb; j += 2u) {
        const int8_t *d0 = dq + at + PW_CH(fp, j),
                     *d1 = j + 1u < nb ? dq + at + PW_CH(fp, j + 1u) : d0;
        uint32_t any = 0u, tie = fp->ties >> j & 3u;
        if (tie == 0u) {
            int32_t qs0 = PW_M(fp, j), b0 = (int32_t)PW_S(fp, j), qs1 = PW_M(fp, j + 1u);
            int32_t b1 = (int32_t)PW_S(fp, j + 1u);
#pragma GCC unroll 4
            for (p = 0; p < np; p++, d0 += oc, d1 += oc) {
                int32_t v0 = tp_smmulr(*d0 * qs0, b0), v1 = tp_smmulr(*d1 * qs1, b1);
                uint32_t g = clamp ? pw_pack_clamp15(v0, v1)
                                   : tp_pkhbt16((uint32_t)v0, (uint32_t)v1);
                e->g[p] = g;
                any |= g;
            }
        } else {
            any = pw_fold_tie_pair(e->g, fp, d0, d1, oc, np, j, tie);
        }
        e = pw_next(e, fp, j, any);
    }
    return (uint32_t)(e - t);
}

#if TP_DSP_ASM14
/* pw_fold_smm_pairs for np (1 to 4) pixels of a block without ties or clamp, the pairs' records
 * from c to end (c < end): per pair its record by one LDM (factors, rows, channels and the pad:
 * r4 to r11, in its order), its rows copied, pw_fold4's folds without the clamp (PW_FF: channel
 * j's dY at [d], j + 1's at [dd], or oc on for an odd pixel, d and dd two pixels on after the
 * second: PW_FF_ON). */
/* clang-format off */
#define PW_FF(off, at, any)                                                                    \
    "ldrsb %[a], [%[d]" at "]\n\t"                                                             \
    "ldrsb %[b], [%[dd]" at "]\n\t"                                                            \
    "mul %[a], %[a], %[q0]\n\t"                                                                \
    "mul %[b], %[b], %[q1]\n\t"                                                                \
    "smmulr %[a], %[a], %[s0]\n\t"                                                             \
    "smmulr %[b], %[b], %[s1]\n\t"                                                             \
    "pkhbt %[a], %[a], %[b], lsl #16\n\t"                                                      \
    "str %[a], [%[e], #" off "]\n\t" any
#define PW_FF_ANY0 "mov %[any], %[a]\n\t"
#define PW_FF_ANY "orr %[any], %[any], %[a]\n\t"
#define PW_FF_ON "add %[d], %[d], %[oc], lsl #1\n\t" "add %[dd], %[dd], %[oc], lsl #1\n\t"
/* np pixels, the last's any (the flags set by it: Z for a pair whose words are all 0) */
#define PW_FF1(any) PW_FF("8", "", any)
#define PW_FF2(any) PW_FF1(PW_FF_ANY0) PW_FF("12", ", %[oc]", any)
#define PW_FF3(any) PW_FF2(PW_FF_ANY) PW_FF_ON PW_FF("16", "", any)
#define PW_FF4(any) PW_FF3(PW_FF_ANY) PW_FF("20", ", %[oc]", any)
#define PW_FOLD_FAST(FOLDS)                                                                    \
    __asm__ volatile("1:\n\t"                                                                 \
                     "ldmia %[c]!, {%[q0], %[q1], %[s0], %[s1], %[d], %[dd], %[a], %[b]}\n\t" \
                     "str %[d], [%[e]]\n\t"                                                   \
                     "str %[dd], [%[e], #4]\n\t"                                              \
                     "uxtah %[d], %[dq], %[a]\n\t"                                            \
                     "add %[dd], %[dq], %[a], lsr #16\n\t"                                    \
                     FOLDS                                                                     \
                     "it ne\n\t"                                                              \
                     "addne %[e], %[e], #24\n\t"                                              \
                     "cmp %[c], %[end]\n\t"                                                   \
                     "bne 1b"                                                                  \
                     : [e] "+r"(e), [c] "+r"(c), [a] "=&r"(a), [b] "=&r"(b), [d] "=&r"(d),     \
                       [dd] "=&r"(dd), [q0] "=&r"(q0), [s0] "=&r"(s0), [q1] "=&r"(q1),         \
                       [s1] "=&r"(s1), [any] "=&r"(any)                                        \
                     : [dq] "r"(dq), [oc] "r"(oc), [end] "r"(end)                              \
                     : "cc", "memory")
/* clang-format on */
TP_DSP_INLINE uint32_t pw_fold_fast(pw_pair *t, const pw_chan2 *c, const pw_chan2 *end,
                                    const int8_t *dq, uint32_t oc, uint32_t np)
{
    pw_pair *e = t;
    register uint32_t q0 __asm__("r4"), q1 __asm__("r5"), s0 __asm__("r6"), s1 __asm__("r7");
    register uint32_t d __asm__("r8"), dd __asm__("r9"), a __asm__("r10"), b __asm__("r11");
    uint32_t any;
    if (np == 4u) {
        PW_FOLD_FAST(PW_FF4("orrs %[any], %[any], %[a]\n\t"));
    } else if (np == 3u) {
        PW_FOLD_FAST(PW_FF3("orrs %[any], %[any], %[a]\n\t"));
    } else if (np == 2u) {
        PW_FOLD_FAST(PW_FF2("orrs %[any], %[any], %[a]\n\t"));
    } else {
        PW_FOLD_FAST(PW_FF1("movs %[any], %[a]\n\t"));
    }
    return (uint32_t)(e - t);
}

static TP_DSP_NOINLINE TP_DSP_REGS14 uint32_t pw_fold_smm_fast(pw_pair *t, const pw_chan2 *c,
                                                               const pw_chan2 *end,
                                                               const int8_t *dq, uint32_t oc,
                                                               uint32_t np)
{
    return pw_fold_fast(t, c, end, dq, oc, np);
}
typedef char pw_chan2_layout[sizeof(pw_chan2) == 32u ? 1 : -1];

/* pw_fold_smm_pairs for np pixels of a block with ties, without clamp: its runs of pairs without
 * a tie by pw_fold_smm_fast, those with one by pw_fold_tie_pair. */
static TP_DSP_NOINLINE uint32_t pw_fold_smm_ties(pw_pair *t, const pw_fold_params *fp,
                                                 const int8_t *dq, uint32_t oc, uint32_t nb,
                                                 uint32_t np)
{
    const pw_chan2 *c = fp->pair, *end = fp->pair + ((nb + 1u) >> 1), *stop;
    uint32_t ties = fp->ties, any, k;
    pw_pair *e = t;
    while (c != end) {
        stop = ties != 0u ? fp->pair + ((uint32_t)__builtin_ctz(ties) >> 1) : end;
        if (stop != c) {
            e += pw_fold_smm_fast(e, c, stop, dq, oc, np);
            c = stop;
        }
        if (c != end) { /* a pair with a tie */
            k = 2u * (uint32_t)(c - fp->pair);
            any = pw_fold_tie_pair(e->g, fp, dq + c->ch[0], dq + c->ch[1], oc, np, k,
                                   ties >> k & 3u);
            e->row0 = c->row[0];
            e->row1 = c->row[1];
            e = any != 0u ? e + 1 : e;
            ties &= ~(3u << k);
            c++;
        }
    }
    return (uint32_t)(e - t);
}

/* pw_fold_smm_pairs for four pixels of a block with clamp: pair by pair, pw_fold4 for a pair
 * without a tie. */
static TP_DSP_NOINLINE TP_DSP_REGS14 uint32_t pw_fold_smm4(pw_pair *t, const pw_fold_params *fp,
                                                           const int8_t *dq, uint32_t oc,
                                                           uint32_t nb)
{
    const pw_chan2 *c = fp->pair, *end = fp->pair + ((nb + 1u) >> 1);
    uint32_t ties = fp->ties, any;
    pw_pair *e = t;
    for (; c != end; c++, ties >>= 2) {
        const int8_t *d0 = dq + c->ch[0];
        if ((ties & 3u) == 0u) {
            any = pw_fold4(e, d0, (int32_t)c->ch[1] - (int32_t)c->ch[0], oc, c->m[0],
                           (int32_t)c->s[0], c->m[1], (int32_t)c->s[1], 1u);
        } else {
            any = pw_fold_tie_pair(e->g, fp, d0, dq + c->ch[1], oc, 4u,
                                   2u * (uint32_t)(c - fp->pair), ties & 3u);
        }
        e->row0 = c->row[0];
        e->row1 = c->row[1];
        e = any != 0u ? e + 1 : e;
    }
    return (uint32_t)(e - t);
}
#endif

/* The block's pairs for np pixels at dY offset `at` of a PW_SMM block. */
static TP_DSP_NOINLINE uint32_t pw_fold_smm(pw_pair *t, const pw_fold_params *fp, const int8_t *dq,
                                            uint32_t at, uint32_t oc, uint32_t np, uint32_t nb)
{
#if TP_DSP_ASM14
    if (np == 4u && fp->clamp) {
        return pw_fold_smm4(t, fp, dq + at, oc, nb);
    }
#endif
    return fp->clamp ? pw_fold_smm_pairs(t, fp, dq, at, oc, np, nb, 1u)
                     : pw_fold_smm_pairs(t, fp, dq, at, oc, np, nb, 0u);
}

static TP_DSP_NOINLINE uint32_t pw_fold_r8(pw_pair *t, const pw_fold_params *fp, const int8_t *dq,
                                           uint32_t at, uint32_t oc, uint32_t np, uint32_t nb,
                                           int32_t lim)
{
    return pw_fold_body(t, fp, dq, at, oc, np, nb, lim, PW_ROUND8, 1u);
}

static TP_DSP_NOINLINE uint32_t pw_fold16(pw_pair *t, const pw_fold_params *fp, const void *dq,
                                          uint32_t at, uint32_t oc, uint32_t np, uint32_t nb,
                                          int32_t lim)
{
    return pw_fold_body(t, fp, dq, at, oc, np, nb, lim, PW_ANY, 2u);
}

static TP_DSP_NOINLINE uint32_t pw_fold8_any(pw_pair *t, const pw_fold_params *fp, const void *dq,
                                             uint32_t at, uint32_t oc, uint32_t np, uint32_t nb,
                                             int32_t lim)
{
    return pw_fold_body(t, fp, dq, at, oc, np, nb, lim, PW_ANY, 1u);
}

/* The block's pairs for np pixels at dY offset `at` (pw_fold_body); returns how many. */
TP_DSP_INLINE uint32_t pw_fold(pw_pair *t, const pw_fold_params *fp, int mode, const tp_gmap *dy,
                               uint32_t at, uint32_t oc, uint32_t np, uint32_t nb, int32_t lim)
{
    if (mode == PW_SMM) {
#if TP_DSP_ASM14
        if (fp->ties == 0u && !fp->clamp) { /* the common case: one call */
            return pw_fold_smm_fast(t, fp->pair, fp->pair + ((nb + 1u) >> 1),
                                    (const int8_t *)dy->q + at, oc, np);
        } else if (!fp->clamp) {
            return pw_fold_smm_ties(t, fp, (const int8_t *)dy->q + at, oc, nb, np);
        }
#endif
        return pw_fold_smm(t, fp, (const int8_t *)dy->q, at, oc, np, nb);
    } else if (mode == PW_ROUND8) {
        return pw_fold_r8(t, fp, (const int8_t *)dy->q, at, oc, np, nb, lim);
    } else if (dy->bytes == 2u) {
        return pw_fold16(t, fp, dy->q, at, oc, np, nb, lim);
    }
    return pw_fold8_any(t, fp, dy->q, at, oc, np, nb, lim);
}

#if TP_DSP_ASM14
/* One pair (e, post-incremented by its first load, so g[] lies at -16..-4) for np pixels: its
 * row pointers and weights of inputs i, i + 1 loaded (PW_W), then the first two pixels' g words
 * (PW_G1, PW_G2), all single loads, each pipelined after the one before (none's address is the
 * one before's value); the weights made two words (PW_X: u even inputs, r odd ones), then per
 * pixel two SMLADs with its g word (PW_MAC1, PW_MAC2), the last two pixels' g loaded by one LDRD
 * (four) or LDR (three). Four pixels: 18 instructions for 16 MACs; three: 16 for 12; two: 13
 * for 8; one: 10 for 4. The asm's text and operand lists are laid out by hand. */
/* clang-format off */
#define PW_W                                                                                   \
    "ldr %[r], [%[e]], #24\n\t"                                                                \
    "ldr %[u], [%[e], #-20]\n\t"                                                               \
    "ldrh %[r], [%[r], %[i]]\n\t"                                                              \
    "ldrh %[u], [%[u], %[i]]\n\t"
#define PW_G1 "ldr %[ga], [%[e], #-16]\n\t"
#define PW_G2 PW_G1 "ldr %[gb], [%[e], #-12]\n\t"
#define PW_X                                                                                   \
    "orr %[r], %[r], %[u], lsl #16\n\t"                                                        \
    "sxtb16 %[u], %[r]\n\t"                                                                    \
    "sxtb16 %[r], %[r], ror #8\n\t"
#define PW_MAC2(p, q)                                                                          \
    "smlad %[" p "0], %[u], %[ga], %[" p "0]\n\t"                                               \
    "smlad %[" p "1], %[r], %[ga], %[" p "1]\n\t"                                               \
    "smlad %[" q "0], %[u], %[gb], %[" q "0]\n\t"                                               \
    "smlad %[" q "1], %[r], %[gb], %[" q "1]\n\t"
#define PW_MAC1(p)                                                                             \
    "smlad %[" p "0], %[u], %[ga], %[" p "0]\n\t"                                               \
    "smlad %[" p "1], %[r], %[ga], %[" p "1]\n\t"
/* Four pixels from a pair's weights and first two g words (W): the last two pixels' g by one
 * LDRD; MAC2 PW_MAC2, or PW_MAC2F for a sum's first pair. */
#define PW_4(W, MAC2) W MAC2("x", "y") "ldrd %[ga], %[gb], [%[e], #-8]\n\t" MAC2("z", "w")
#define PW_Q4 PW_4(PW_W PW_G2 PW_X, PW_MAC2)
#define PW_Q3 PW_W PW_G2 PW_X PW_MAC2("x", "y") "ldr %[ga], [%[e], #-8]\n\t" PW_MAC1("z")
#define PW_Q2 PW_W PW_G2 PW_X PW_MAC2("x", "y")
#define PW_Q1 PW_W PW_G1 PW_X PW_MAC1("x")
/* The same from PWIG's pairs (w->pairs): the pair's row pointer, the g words, then the pair's
 * word of inputs i, i + 1 (made by pairs_section as PW_X's ORR makes it), four single loads:
 * 16 instructions for 16 MACs at four pixels, 3 cycles fewer than PW_Q4. */
#define PW_WP1                                                                                 \
    "ldr %[r], [%[e]], #24\n\t"                                                                \
    "ldr %[ga], [%[e], #-16]\n\t"
#define PW_WP(g)                                                                               \
    g "ldr %[u], [%[r], %[i], lsl #1]\n\t"                                                      \
    "sxtb16 %[r], %[u], ror #8\n\t"                                                            \
    "sxtb16 %[u], %[u]\n\t"
#define PW_WP2 PW_WP1 "ldr %[gb], [%[e], #-12]\n\t"
#define PW_P4 PW_4(PW_WP(PW_WP2), PW_MAC2)
#define PW_P3 PW_WP(PW_WP2) PW_MAC2("x", "y") "ldr %[ga], [%[e], #-8]\n\t" PW_MAC1("z")
#define PW_P2 PW_WP(PW_WP2) PW_MAC2("x", "y")
#define PW_P1 PW_WP(PW_WP1) PW_MAC1("x")
/* One pixel's sums s0[0] (input i) and s1[0] (input i + 1), and the asm's other registers. */
#define PW_OUT1                                                                                \
    [x0] "+r"(s0[0]), [x1] "+r"(s1[0]), [e] "+r"(e), [r] "=&r"(r), [u] "=&r"(u), [ga] "=&r"(ga)
/* The loop's end compared from memory (end: "m") or from a register ("r"): for three and four
 * pixels, at -Os (the nRF and MicroPython builds) GCC has no register left for it. */
#define PW_END_m "ldr %[r], %[end]\n\t" "cmp %[e], %[r]\n\t"
#define PW_END_r "cmp %[e], %[end]\n\t"
/* pw_pairs for one pixel (Q1: PW_Q1, or PW_P1 for PWIG's pairs): pairs four a step, then two,
 * then one. */
#define PW_PAIRS1(Q1)                                                                          \
    do {                                                                                       \
        if (e != end4) {                                                                       \
            __asm__ volatile("1:\n\t" Q1 Q1 Q1 Q1 PW_END_r "bne 1b"                              \
                             : PW_OUT1                                                         \
                             : [end] "r"(end4), [i] "r"(i)                                     \
                             : "cc", "memory");                                                \
        }                                                                                      \
        if (npairs & 2u) {                                                                     \
            __asm__ volatile(Q1 Q1 : PW_OUT1 : [i] "r"(i) : "memory");                         \
        }                                                                                      \
        if (npairs & 1u) {                                                                     \
            __asm__ volatile(Q1 : PW_OUT1 : [i] "r"(i) : "memory");                            \
        }                                                                                      \
    } while (0)
/* clang-format on */
#endif

/* A pair's weights of inputs i, i + 1: (W[o, i], W[o + 1, i]) and (W[o, i + 1], W[o + 1, i + 1]),
 * from two halfwords, or (pre) PWIG's word. */
static inline uint32_t pw_w2(const pw_pair *e, uint32_t i, uint32_t *od, int pre)
{
    uint16_t a, b;
    uint32_t v;
    if (pre) {
        __builtin_memcpy(&v, e->row0 + 2u * i, 4);
    } else {
        __builtin_memcpy(&a, e->row0 + i, 2);
        __builtin_memcpy(&b, e->row1 + i, 2);
        v = (uint32_t)a | (uint32_t)b << 16;
    }
    *od = tp_sxtb16_odd(v);
    return tp_sxtb16(v);
}

/* s0[p], s1[p] += sum over the npairs pairs of t of SMLAD of the pair's weights of inputs i and
 * i + 1 and g[p], for np (1 to 4, a constant) pixels; pre (a constant): the pairs' rows are
 * PWIG's. With TP_DSP_ASM14 one pixel by PW_PAIRS1 (two to four pixels take pw_macn_asm
 * there), else the C loop. */
TP_DSP_INLINE void pw_pairs(int32_t *s0, int32_t *s1, const pw_pair *t, uint32_t npairs, uint32_t i,
                            uint32_t np, int pre)
{
    const pw_pair *e;
    uint32_t p;
#if TP_DSP_ASM14
    if (np == 1u) {
        const pw_pair *end4 = t + (npairs & ~3u);
        uint32_t r, u, ga;
        e = t;
        if (pre) {
            PW_PAIRS1(PW_P1);
        } else {
            PW_PAIRS1(PW_Q1);
        }
        return;
    }
#endif
    for (e = t; e != t + npairs; e++) {
        uint32_t od, ev = pw_w2(e, i, &od, pre);
        for (p = 0; p < np; p++) {
            s0[p] = tp_smlad(ev, e->g[p], s0[p]);
            s1[p] = tp_smlad(od, e->g[p], s1[p]);
        }
    }
}

/* dX[p, i], dX[p, i + 1] (+)= sum over the block's channel pairs of SMLAD of the pair's
 * weights and g[p], for the np (1 to 4, a constant) pixels p whose sums start at a + p ic,
 * every even i below ic; `add`: add to what a holds (a later block). The loops over the pixels
 * are unrolled at every level, so that the sums are registers for the asm: at -Os GCC may keep
 * them in memory otherwise (more code, or no register left for the asm). */
TP_DSP_INLINE void pw_mac(int32_t *a, const pw_pair *t, uint32_t npairs, uint32_t i0, uint32_t i1,
                          uint32_t ic, int add, uint32_t np, int pre)
{
    uint32_t i, p;
    for (i = i0; i < i1; i += 2u) {
        int32_t s0[4] = {0, 0, 0, 0}, s1[4] = {0, 0, 0, 0};
        if (add) {
#pragma GCC unroll 4
            for (p = 0; p < np; p++) {
                s0[p] = a[p * ic + i];
                s1[p] = a[p * ic + i + 1u];
            }
        }
        pw_pairs(s0, s1, t, npairs, i, np, pre);
#pragma GCC unroll 4
        for (p = 0; p < np; p++) {
            a[p * ic + i] = s0[p];
            a[p * ic + i + 1u] = s1[p];
        }
    }
}

#if TP_DSP_ASM14
/* The first pair of a sum's start: PW_Q or PW_P with SMUAD, no accumulator read. */
/* clang-format off */
#define PW_MAC2F(p, q)                                                                         \
    "smuad %[" p "0], %[u], %[ga]\n\t"                                                          \
    "smuad %[" p "1], %[r], %[ga]\n\t"                                                          \
    "smuad %[" q "0], %[u], %[gb]\n\t"                                                          \
    "smuad %[" q "1], %[r], %[gb]\n\t"
#define PW_MAC1F(p)                                                                            \
    "smuad %[" p "0], %[u], %[ga]\n\t"                                                          \
    "smuad %[" p "1], %[r], %[ga]\n\t"
#define PW_Q4F PW_4(PW_W PW_G2 PW_X, PW_MAC2F)
#define PW_Q3F PW_W PW_G2 PW_X PW_MAC2F("x", "y") "ldr %[ga], [%[e], #-8]\n\t" PW_MAC1F("z")
#define PW_Q2F PW_W PW_G2 PW_X PW_MAC2F("x", "y")
#define PW_P4F PW_4(PW_WP(PW_WP2), PW_MAC2F)
#define PW_P3F PW_WP(PW_WP2) PW_MAC2F("x", "y") "ldr %[ga], [%[e], #-8]\n\t" PW_MAC1F("z")
#define PW_P2F PW_WP(PW_WP2) PW_MAC2F("x", "y")
/* The np pixels' sums of inputs i, i + 1 at a + i and ic4 bytes apart: the pixels' addresses
 * made first (r, ga, gb, e: none the instruction before a store's), then loaded (op "ldr") or
 * stored ("str"). */
#define PW_AT(op, p, b) op " %[" p "0], [%[" b "]]\n\t" op " %[" p "1], [%[" b "], #4]\n\t"
#define PW_PTR2                                                                                \
    "ldr %[r], %[a]\n\t"                                                                        \
    "ldr %[u], %[ic4]\n\t"                                                                      \
    "add %[r], %[r], %[i], lsl #2\n\t"                                                          \
    "add %[ga], %[r], %[u]\n\t"
#define PW_PTR3 PW_PTR2 "add %[gb], %[ga], %[u]\n\t"
#define PW_PTR4 PW_PTR3 "add %[e], %[gb], %[u]\n\t"
#define PW_SUMS2(op) PW_PTR2 PW_AT(op, "x", "r") PW_AT(op, "y", "ga")
#define PW_SUMS3(op) PW_PTR3 PW_AT(op, "x", "r") PW_AT(op, "y", "ga") PW_AT(op, "z", "gb")
#define PW_SUMS4(op)                                                                           \
    PW_PTR4 PW_AT(op, "x", "r") PW_AT(op, "y", "ga") PW_AT(op, "z", "gb") PW_AT(op, "w", "e")
/* The entry into the loop of four pairs for the n pairs past a start's (n & 3 of them first):
 * from code (n & 3, or 4 for n = 0: straight to the stores) by PW_TABLE's byte (halfwords past
 * it; it lies after the start's jump, never run), the address (Thumb bit set) in its place,
 * once a call. */
#define PW_ENTRY                                                                               \
    "adr %[u], 9f\n\t"                                                                          \
    "ldr %[r], %[code]\n\t"                                                                     \
    "ldrb %[r], [%[u], %[r]]\n\t"                                                               \
    "add %[u], %[u], %[r], lsl #1\n\t"                                                          \
    "orr %[u], %[u], #1\n\t"                                                                    \
    "str %[u], %[code]\n\t"
#define PW_TABLE                                                                               \
    "9:\n\t"                                                                                    \
    ".byte (1f - 9b) / 2, (8f - 9b) / 2, (7f - 9b) / 2, (6f - 9b) / 2, (3f - 9b) / 2\n\t"       \
    ".p2align 1\n\t"
#define PW_SOUT2                                                                               \
    [x0] "=&r"(x0), [x1] "=&r"(x1), [y0] "=&r"(y0), [y1] "=&r"(y1)
#define PW_SOUT3 PW_SOUT2, [z0] "=&r"(z0), [z1] "=&r"(z1)
#define PW_SOUT4 PW_SOUT3, [w0] "=&r"(w0), [w1] "=&r"(w1)
/* Every pair of inputs i from i0 to i1 in one asm (np pixels): the sums started (START: a
 * later block's loaded, else the first pair's products); the entry's jump into the unrolled
 * loop (Q, four pairs a step); the sums stored; i on. Its state in memory: the pairs' asm holds
 * all 14 registers at four pixels. */
#define PW_I1_m "ldr %[r], %[i1]\n\t" "cmp %[i], %[r]\n\t"
#define PW_I1_r "cmp %[i], %[i1]\n\t"
/* A pair of inputs ends (label 3): its sums stored, i on, back to the start (0) until i1. */
#define PW_NEXT_I(np, kind)                                                                    \
    "3:\n\t" PW_SUMS##np("str") "add %[i], %[i], #2\n\t" PW_I1_##kind "bne 0b"
#define PW_MACN_OUT(np)                                                                        \
    PW_SOUT##np, [e] "=&r"(e), [r] "=&r"(r), [u] "=&r"(u), [ga] "=&r"(ga), [gb] "=&r"(gb),     \
        [i] "+r"(i), [code] "+m"(code)
#define PW_MACN_ASM(np, kind, START, Q)                                                        \
    __asm__ volatile(PW_ENTRY                                                                  \
                     "0:\n\t" START                                                            \
                     "ldr pc, %[code]\n\t" PW_TABLE                                             \
                     "1:\n\t" Q "6:\n\t" Q "7:\n\t" Q "8:\n\t" Q                                \
                     PW_END_##kind                                                             \
                     "bne 1b\n\t" PW_NEXT_I(np, kind)                                            \
                     : PW_MACN_OUT(np)                                                         \
                     : [a] "m"(a), [t] "m"(t), [end] #kind(end), [ic4] "m"(ic4),               \
                       [i1] #kind(i1)                                                          \
                     : "cc", "memory")
/* At four pixels the pairs past a start's first (n: 0 to 16, TP_PW_BLOCK / 2 at most) all
 * unrolled, no loop: the entry's table of halfwords from code = n, the pairs' code n before the
 * stores (its label 30 + n). */
#define PW_ENTRY16                                                                             \
    "adr %[u], 9f\n\t"                                                                          \
    "ldr %[r], %[code]\n\t"                                                                     \
    "ldrh %[r], [%[u], %[r], lsl #1]\n\t"                                                       \
    "add %[u], %[u], %[r], lsl #1\n\t"                                                          \
    "orr %[u], %[u], #1\n\t"                                                                    \
    "str %[u], %[code]\n\t"
#define PW_TABLE16                                                                             \
    "9:\n\t"                                                                                    \
    ".hword (3f - 9b) / 2, (31f - 9b) / 2, (32f - 9b) / 2, (33f - 9b) / 2, (34f - 9b) / 2\n\t"  \
    ".hword (35f - 9b) / 2, (36f - 9b) / 2, (37f - 9b) / 2, (38f - 9b) / 2, (39f - 9b) / 2\n\t" \
    ".hword (40f - 9b) / 2, (41f - 9b) / 2, (42f - 9b) / 2, (43f - 9b) / 2, (44f - 9b) / 2\n\t" \
    ".hword (45f - 9b) / 2, (46f - 9b) / 2\n\t"
#define PW_Q16(Q)                                                                              \
    "46:\n\t" Q "45:\n\t" Q "44:\n\t" Q "43:\n\t" Q                                             \
    "42:\n\t" Q "41:\n\t" Q "40:\n\t" Q "39:\n\t" Q                                             \
    "38:\n\t" Q "37:\n\t" Q "36:\n\t" Q "35:\n\t" Q                                             \
    "34:\n\t" Q "33:\n\t" Q "32:\n\t" Q "31:\n\t" Q
#define PW_MACN_ASM16(np, kind, START, Q)                                                      \
    __asm__ volatile(PW_ENTRY16                                                                \
                     "0:\n\t" START                                                            \
                     "ldr pc, %[code]\n\t" PW_TABLE16                                           \
                     PW_Q16(Q) PW_NEXT_I(np, kind)                                             \
                     : PW_MACN_OUT(np)                                                         \
                     : [a] "m"(a), [t] "m"(t), [ic4] "m"(ic4), [i1] #kind(i1)                  \
                     : "cc", "memory")
/* np pixels by ASM (PW_MACN_ASM, or PW_MACN_ASM16 at four), the end of the pairs and of the
 * inputs from memory (kind m) or registers (r: at two and three pixels, the sums leave two
 * free). */
#define PW_MACN(ASM, np, kind, pre, add)                                                       \
    do {                                                                                       \
        if (pre && add) {                                                                      \
            ASM(np, kind, PW_SUMS##np("ldr") "ldr %[e], %[t]\n\t", PW_P##np);                  \
        } else if (pre) {                                                                      \
            ASM(np, kind, "ldr %[e], %[t]\n\t" PW_P##np##F, PW_P##np);                         \
        } else if (add) {                                                                      \
            ASM(np, kind, PW_SUMS##np("ldr") "ldr %[e], %[t]\n\t", PW_Q##np);                  \
        } else {                                                                               \
            ASM(np, kind, "ldr %[e], %[t]\n\t" PW_Q##np##F, PW_Q##np);                         \
        }                                                                                      \
    } while (0)
/* clang-format on */
typedef char pw_pairs_unrolled[TP_PW_BLOCK / 2u <= 16u ? 1 : -1];

/* pw_mac for np (2 to 4, a constant) pixels and npairs >= 1, the inputs i0 to i1 (i0 < i1) in
 * one asm: per pair of inputs a later block's sums loaded, else the first pair's products
 * their start; the other pairs (the loop entered where n & 3 of them are left, no test a
 * start); the sums stored. */
TP_DSP_INLINE void pw_macn_asm(int32_t *a, const pw_pair *t, uint32_t npairs, uint32_t i0,
                               uint32_t i1, uint32_t ic, int add, uint32_t np, int pre)
{
    const pw_pair *end = t + npairs;
    uint32_t i = i0, ic4 = 4u * ic, n = add ? npairs : npairs - 1u;
    uint32_t code = np == 4u ? n : n == 0u ? 4u : n & 3u;
    uint32_t e, r, u, ga, gb;
    int32_t x0, x1, y0, y1, z0, z1, w0, w1;
    if (np == 4u) {
        PW_MACN(PW_MACN_ASM16, 4, m, pre, add);
    } else if (np == 3u) {
        PW_MACN(PW_MACN_ASM, 3, r, pre, add);
    } else {
        PW_MACN(PW_MACN_ASM, 2, r, pre, add);
    }
}
#endif

#if TP_DSP_ASM14
/* np pixels' sums of the inputs i0 to i1 zero: a block's first with no pair (a later block
 * without one is not called), in C, so that no 14-register asm is inlined there. */
static void pw_zero_sums(int32_t *a, uint32_t np, uint32_t i0, uint32_t i1, uint32_t ic)
{
    uint32_t i, p;
    for (p = 0; p < np; p++) {
        for (i = i0; i < i1; i++) {
            a[p * ic + i] = 0;
        }
    }
}
#endif

/* pw_mac for np (2 to 4, a constant) pixels: pw_macn_asm where TP_DSP_ASM14 (no pair:
 * pw_zero_sums), else the C loops. */
TP_DSP_INLINE void pw_mac_n(int32_t *a, const pw_pair *t, uint32_t npairs, uint32_t i0, uint32_t i1,
                            uint32_t ic, int add, uint32_t np, int pre)
{
#if TP_DSP_ASM14
    if (npairs == 0u) {
        pw_zero_sums(a, np, i0, i1, ic);
    } else {
        pw_macn_asm(a, t, npairs, i0, i1, ic, add, np, pre);
    }
#else
    pw_mac(a, t, npairs, i0, i1, ic, add, np, pre);
#endif
}

/* pw_mac for four pixels, the inputs i0 to i1 (pre: the pairs' rows are PWIG's). */
TP_DSP_INLINE void pw_mac4(int32_t *a, const pw_pair *t, uint32_t npairs, uint32_t i0, uint32_t i1,
                           uint32_t ic, int add, int pre)
{
    if (pre) {
        pw_mac_n(a, t, npairs, i0, i1, ic, add, 4u, 1);
    } else {
        pw_mac_n(a, t, npairs, i0, i1, ic, add, 4u, 0);
    }
}

/* The last np (1 to 3) pixels of a row, np and pre constant in each call below. */
TP_DSP_INLINE void pw_mac_np(int32_t *a, const pw_pair *t, uint32_t npairs, uint32_t i0,
                             uint32_t i1, uint32_t ic, int add, uint32_t np, int pre)
{
    if (np == 3u) {
        pw_mac_n(a, t, npairs, i0, i1, ic, add, 3u, pre);
    } else if (np == 2u) {
        pw_mac_n(a, t, npairs, i0, i1, ic, add, 2u, pre);
    } else {
        pw_mac(a, t, npairs, i0, i1, ic, add, 1u, pre);
    }
}

/* The last np pixels, over the runs of inputs. */
static TP_DSP_NOINLINE TP_DSP_REGS14 void pw_mac_last(int32_t *a, const pw_pair *t, uint32_t npairs,
                                                      const pw_inputs *in, uint32_t ic, int add,
                                                      uint32_t np, int pre)
{
    uint32_t r;
    for (r = 0; r < in->n; r++) {
        if (pre) {
            pw_mac_np(a, t, npairs, in->run[r][0], in->run[r][1], ic, add, np, 1);
        } else {
            pw_mac_np(a, t, npairs, in->run[r][0], in->run[r][1], ic, add, np, 0);
        }
    }
}

/* The block's four-pixel steps of a row from dY offset at (pw_fold, the SMMULR fold of a block
 * without ties or clamp inline; then pw_mac4 over the runs of inputs), in one call; returns the
 * pixels done. */
static TP_DSP_NOINLINE TP_DSP_REGS14 uint32_t pw_row4(int32_t *acc, pw_pair *t,
                                                      const pw_fold_params *fp, int mode,
                                                      const tp_gmap *dy, uint32_t at, uint32_t oc,
                                                      uint32_t iw, uint32_t nb, int32_t lim,
                                                      const pw_inputs *in, uint32_t ic, int add,
                                                      int pre)
{
    uint32_t x, n, r;
#if TP_DSP_ASM14
    int fast = mode == PW_SMM && fp->ties == 0u && !fp->clamp;
    const pw_chan2 *end = fp->pair + ((nb + 1u) >> 1);
#endif
    for (x = 0; x + 4u <= iw; x += 4u, at += 4u * oc) {
#if TP_DSP_ASM14
        if (fast) {
            n = pw_fold_fast(t, fp->pair, end, (const int8_t *)dy->q + at, oc, 4u);
        } else
#endif
        {
            n = pw_fold(t, fp, mode, dy, at, oc, 4u, nb, lim);
        }
        if (n != 0u || !add) {
            for (r = 0; r < in->n; r++) {
                pw_mac4(acc + x * ic, t, n, in->run[r][0], in->run[r][1], ic, add, pre);
            }
        }
    }
    return x;
}

void tp_arm_conv2d_input_grad_q(const tp_conv_params *p, const tp_shape *in_shape,
                                const tp_shape *out_shape, const tp_weights *w, const tp_gm_fold *f,
                                const tp_gmap *dy, tp_gm_writer *dx, void *scratch)
{
    uint32_t iw = (uint32_t)in_shape->w, ic = (uint32_t)in_shape->c, oc = (uint32_t)out_shape->c;
    int32_t *acc = (int32_t *)scratch, lim = ((int32_t)1 << f->bits) - 1;
    uint32_t y, x, done, nb, n, b, live, zero[TP_PW_CHECKED / 32u];
    int mode[TP_PW_KEPT], pre = w->pairs != NULL; /* PWIG's pairs: its live channels, static */
    pw_pair t[TP_PW_BLOCK / 2u];
    pw_fold_params fp[TP_PW_KEPT];
    pw_inputs in;
    if (!tp_dsp_grad_pointwise(p, in_shape) || !f->live) {
        tp_conv2d_input_grad_q(p, in_shape, out_shape, w, f, dy, dx, scratch);
        return;
    }
    live = pre ? w->n_live : pw_zero_rows(zero, w, f, oc, ic);
    if (live != 0u) {
        pw_live_inputs(&in, (uint32_t *)acc, w, zero, oc, ic, pre);
    }
    if (live == 0u || in.dead != 0u) { /* dX is zero, or the pairs left out are */
        tp_dsp_zero32(acc, iw * ic);
    }
    for (y = 0; y < (uint32_t)in_shape->h; y++) {
        uint32_t o = 0;
        for (done = 0, b = 0; done < live; done += nb, b++) {
            uint32_t at = y * iw * oc, k = b < TP_PW_KEPT ? b : TP_PW_KEPT - 1u;
            int add = done != 0u;
            nb = live - done < TP_PW_BLOCK ? live - done : TP_PW_BLOCK;
            if (y != 0u && (k + 1u < TP_PW_KEPT || live <= TP_PW_KEPT * TP_PW_BLOCK)) {
                if (!pre) { /* a kept block: the next gathers past its channels */
                    o = PW_CH(&fp[k], nb - 1u) + 1u;
                }
            } else {
                if (pre) {
                    pw_listed(&fp[k], w->live + 2u * done, nb);
                } else {
                    pw_gather(&fp[k], zero, &o, nb);
                }
                mode[k] = pw_prepare(&fp[k], w, f, nb, dy->bytes == 1u,
                                     pre ? w->pairs + done * ic : NULL, 2u * ic);
            }
            x = pw_row4(acc, t, &fp[k], mode[k], dy, at, oc, iw, nb, lim, &in, ic, add, pre);
            at += x * oc;
            if (x < iw) { /* the last one to three pixels */
                n = pw_fold(t, &fp[k], mode[k], dy, at, oc, iw - x, nb, lim);
                if (n != 0u || !add) {
                    pw_mac_last(acc + x * ic, t, n, &in, ic, add, iw - x, pre);
                }
            }
        }
        tp_gm_row_i32(dx, y, acc);
    }
}

#else
/* ISO C wants a declaration in every translation unit */
typedef int tp_conv_input_grad_arm_unused;
#endif
