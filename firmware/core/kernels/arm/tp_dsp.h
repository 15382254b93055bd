/* tp_dsp.h - what the Cortex-M DSP kernels (kernels/arm/) share: the few ACLE intrinsics they
 * use, the fast requantization and its per-channel parameters.
 *
 * The kernels compile where the target has the DSP extension (__ARM_FEATURE_DSP: Cortex-M4,
 * M7, M33 with DSP) unless TP_KERNELS_REF_ONLY is defined. TP_KERNELS_DSP_EMULATION builds
 * them anywhere with portable C for the intrinsics (tests run them on the host under
 * sanitizers; the product's host build keeps the reference kernels).
 */
#ifndef TP_DSP_H
#define TP_DSP_H

#include <stdint.h>

#include "../ref/tp_ref.h"

/* CONV_2D with a 3x3 window over three input channels (tp_conv3x3_rgb_arm.c): the ops
 * tp_arm_conv2d_s8 hands it, its scratch and the kernel. */
int tp_arm_conv3x3_rgb_covers(const tp_conv_params *p, const tp_shape *in_shape);
uint32_t tp_arm_conv3x3_rgb_scratch_bytes(const tp_conv_params *p, const tp_shape *in_shape,
                                          const tp_shape *out_shape);
void tp_arm_conv3x3_rgb_s8(const tp_conv_params *p, const tp_shape *in_shape, const int8_t *in,
                           const tp_weights *w, const tp_requant *q, const tp_shape *out_shape,
                           int8_t *out, void *scratch);

#if TP_KERNELS_DSP

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the DSP kernels read little-endian words: build big-endian targets with TP_KERNELS_REF_ONLY"
#endif

/* A 32-bit pattern as int32 (two's complement, without implementation-defined conversion). */
static inline int32_t tp_dsp_i32(uint32_t u)
{
    return u <= 0x7FFFFFFFu ? (int32_t)u : -(int32_t)(~u) - 1;
}

/* A word's low and high halfword lanes as int32. */
static inline int32_t tp_lane_lo(uint32_t x)
{
    return (int32_t)(x & 0xFFFFu) - (int32_t)((x & 0x8000u) << 1);
}

static inline int32_t tp_lane_hi(uint32_t x)
{
    return tp_lane_lo(x >> 16);
}

/* Inline asm that takes 14 core registers (the 1x1 input gradient's pairs, the depthwise one's
 * output rows): every one a Thumb function has without a frame pointer. Only an optimizing GCC
 * allocates them (TP_DSP_REGS14 on their callers); GCC at -O0 and clang cannot (they fail, or GCC
 * at -O0 never ends), and take the C loops instead, the same operations in the same order. The
 * callers have no frame pointer, whatever the build's flags, and at -O1 no invariant hoisted into
 * a register the asm needs (-O2 and -O3 weigh the register pressure; -Os's code wants its
 * hoisting). */
#if defined(__ARM_FEATURE_DSP) && !defined(TP_KERNELS_DSP_EMULATION) && defined(__OPTIMIZE__) && \
    !defined(__clang__)
#define TP_DSP_ASM14 1
#ifdef __OPTIMIZE_SIZE__
#define TP_DSP_REGS14 __attribute__((optimize("omit-frame-pointer")))
#else
#define TP_DSP_REGS14 __attribute__((optimize("omit-frame-pointer", "no-move-loop-invariants")))
#endif
#else
#define TP_DSP_ASM14 0
#define TP_DSP_REGS14
#endif

#if defined(__ARM_FEATURE_DSP) && !defined(TP_KERNELS_DSP_EMULATION)
#include <arm_acle.h>
/* ACLE types its halfword pairs int16x2_t (int32_t); the kernels keep them as uint32_t */
#define tp_smlad(a, b, acc) ((int32_t)__smlad((int32_t)(a), (int32_t)(b), (acc)))
#define tp_sxtb16(x) ((uint32_t)__sxtb16((int32_t)(x)))
#define tp_sxtab16(a, x) ((uint32_t)__sxtab16((int32_t)(a), (int32_t)(x)))
#define tp_ssat8(x) __ssat((x), 8)
#define tp_usada8(a, b, acc) __usada8((a), (b), (acc))
/* acc + one halfword of a times one of b (B: bottom, T: top) */
#define tp_smlabb(a, b, acc) ((int32_t)__smlabb((int32_t)(a), (int32_t)(b), (acc)))
#define tp_smlabt(a, b, acc) ((int32_t)__smlabt((int32_t)(a), (int32_t)(b), (acc)))
#define tp_smlatb(a, b, acc) ((int32_t)__smlatb((int32_t)(a), (int32_t)(b), (acc)))
#define tp_smlatt(a, b, acc) ((int32_t)__smlatt((int32_t)(a), (int32_t)(b), (acc)))
/* Instructions ACLE lacks: SXTB16 and SXTAB16 of x rotated right by 8 (its odd bytes), SMMULR,
 * floor((a b + 2^31) / 2^32), and SMMLAR. */
static inline uint32_t tp_sxtb16_odd(uint32_t x)
{
    uint32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
    return r;
}

static inline uint32_t tp_sxtab16_odd(uint32_t a, uint32_t x)
{
    uint32_t r;
    __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(r) : "r"(a), "r"(x));
    return r;
}

static inline int32_t tp_smmulr(int32_t a, int32_t b)
{
    int32_t r;
    __asm__("smmulr %0, %1, %2" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

/* PKHBT b, LSL 16: (a's low halfword, b's low halfword); PKHTB a, ASR 16: (a's high halfword,
 * b's high halfword). */
static inline uint32_t tp_pkhbt16(uint32_t a, uint32_t b)
{
    uint32_t r;
    __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

static inline uint32_t tp_pkhtb16(uint32_t a, uint32_t b)
{
    uint32_t r;
    __asm__("pkhtb %0, %1, %2, asr #16" : "=r"(r) : "r"(b), "r"(a));
    return r;
}

/* SMMLAR: the high word of (acc << 32) + a b + 2^31 */
static inline int32_t tp_smmlar(int32_t a, int32_t b, int32_t acc)
{
    int32_t r;
    __asm__("smmlar %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(acc));
    return r;
}

/* The two words at *p (4-aligned), *p then two words on: one LDRD with writeback, which GCC
 * and Clang seldom pair two LDRs into. */
static inline void tp_ldrd_next(const uint32_t **p, uint32_t *a, uint32_t *b)
{
    __asm__("ldrd %0, %1, [%2], #8"
            : "=r"(*a), "=r"(*b), "+r"(*p)
            : "m"(*(const uint32_t(*)[2]) * p));
}
#else
/* The ACLE intrinsics' definitions (Arm ACLE, section 9.5), in portable C. */
static inline int32_t tp_smlad(uint32_t a, uint32_t b, int32_t acc)
{
    uint32_t s = (uint32_t)acc + (uint32_t)(tp_lane_lo(a) * tp_lane_lo(b)) +
                 (uint32_t)(tp_lane_hi(a) * tp_lane_hi(b));
    return s <= 0x7FFFFFFFu ? (int32_t)s : -(int32_t)(~s) - 1; /* wraps, as SMLAD does */
}

/* SMLABB and kin: acc + one lane of a times one lane of b (wrapping, as they do) */
static inline int32_t tp_smla_lanes(int32_t x, int32_t y, int32_t acc)
{
    uint32_t s = (uint32_t)acc + (uint32_t)(x * y);
    return s <= 0x7FFFFFFFu ? (int32_t)s : -(int32_t)(~s) - 1;
}
#define tp_smlabb(a, b, acc) tp_smla_lanes(tp_lane_lo(a), tp_lane_lo(b), (acc))
#define tp_smlabt(a, b, acc) tp_smla_lanes(tp_lane_lo(a), tp_lane_hi(b), (acc))
#define tp_smlatb(a, b, acc) tp_smla_lanes(tp_lane_hi(a), tp_lane_lo(b), (acc))
#define tp_smlatt(a, b, acc) tp_smla_lanes(tp_lane_hi(a), tp_lane_hi(b), (acc))

static inline uint32_t tp_sxtab16(uint32_t a, uint32_t x)
{
    uint32_t lo = (a + (uint32_t)(int32_t)(int8_t)(x & 0xFFu)) & 0xFFFFu;
    uint32_t hi = ((a >> 16) + (uint32_t)(int32_t)(int8_t)((x >> 16) & 0xFFu)) & 0xFFFFu;
    return lo | (hi << 16);
}

static inline uint32_t tp_sxtb16(uint32_t x)
{
    return tp_sxtab16(0u, x);
}

static inline uint32_t tp_sxtb16_odd(uint32_t x)
{
    return tp_sxtb16(x >> 8);
}

static inline uint32_t tp_sxtab16_odd(uint32_t a, uint32_t x)
{
    return tp_sxtab16(a, x >> 8);
}

static inline int32_t tp_smmulr(int32_t a, int32_t b)
{
    return (int32_t)(((int64_t)a * b + 0x80000000LL) >> 32);
}

static inline int32_t tp_smmlar(int32_t a, int32_t b, int32_t acc)
{
    uint64_t x = ((uint64_t)(uint32_t)acc << 32) + 0x80000000u + (uint64_t)((int64_t)a * b);
    return tp_dsp_i32((uint32_t)(x >> 32));
}

static inline int32_t tp_ssat8(int32_t x)
{
    return x < -128 ? -128 : x > 127 ? 127 : x;
}

static inline uint32_t tp_usada8(uint32_t a, uint32_t b, uint32_t acc)
{
    uint32_t i;
    for (i = 0; i < 32u; i += 8u) {
        uint32_t x = (a >> i) & 0xFFu, y = (b >> i) & 0xFFu;
        acc += x > y ? x - y : y - x;
    }
    return acc;
}

static inline uint32_t tp_pkhbt16(uint32_t a, uint32_t b)
{
    return (a & 0xFFFFu) | b << 16;
}

static inline uint32_t tp_pkhtb16(uint32_t a, uint32_t b)
{
    return a >> 16 | (b & 0xFFFF0000u);
}

static inline void tp_ldrd_next(const uint32_t **p, uint32_t *a, uint32_t *b)
{
    *a = (*p)[0];
    *b = (*p)[1];
    *p += 2;
}
#endif

/* A hot loop kept out of its caller, whose pointers and counters would be spilled around it;
 * and the body of a loop its callers specialize (constant arguments), inlined whatever its
 * size. */
#define TP_DSP_NOINLINE __attribute__((noinline))
#define TP_DSP_INLINE static inline __attribute__((always_inline))

/* The kernels' rounding shifts rely on >> of a negative int32 or int64 being arithmetic: GCC
 * and Clang define it so. */
typedef char tp_dsp_asr_check[(-5 >> 1) == -3 && ((int64_t)-5 >> 1) == -3 ? 1 : -1];

/* A little-endian word at any alignment (weights in flash, activations): LDR on the M4, which
 * reads unaligned words. */
static inline uint32_t tp_dsp_rd32(const int8_t *p)
{
    uint32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}

/* n int32 zeros from a, eight a turn: stores in the kernel rather than a call of the C
 * library's memset, whose speed differs by port (MicroPython's qemu port has a word a turn). */
static inline void tp_dsp_zero32(int32_t *a, uint32_t n)
{
    uint32_t i = 0;
#if defined(__ARM_FEATURE_DSP) && !defined(TP_KERNELS_DSP_EMULATION)
    if (n >= 8u) { /* single stores at immediate offsets, one cycle each (GCC pairs them into
                      STRDs of three) */
        int32_t *p = a, *end = a + (n & ~7u), z = 0;
        __asm__ volatile("1:\n\t"
                         "str %[z], [%[p]]\n\t"
                         "str %[z], [%[p], #4]\n\t"
                         "str %[z], [%[p], #8]\n\t"
                         "str %[z], [%[p], #12]\n\t"
                         "str %[z], [%[p], #16]\n\t"
                         "str %[z], [%[p], #20]\n\t"
                         "str %[z], [%[p], #24]\n\t"
                         "str %[z], [%[p], #28]\n\t"
                         "adds %[p], %[p], #32\n\t"
                         "cmp %[p], %[end]\n\t"
                         "bne 1b"
                         : [p] "+r"(p)
                         : [z] "r"(z), [end] "r"(end)
                         : "cc", "memory");
        i = n & ~7u;
    }
#else
    for (; i + 8u <= n; i += 8u) {
        a[i] = 0;
        a[i + 1u] = 0;
        a[i + 2u] = 0;
        a[i + 3u] = 0;
        a[i + 4u] = 0;
        a[i + 5u] = 0;
        a[i + 6u] = 0;
        a[i + 7u] = 0;
        __asm__("" : "+r"(i)); /* a loop of stores, not a memset call */
    }
#endif
    for (; i < n; i++) {
        a[i] = 0;
        __asm__("" : "+r"(i));
    }
}

/* Two int16 lanes (lo, hi) in a word. */
static inline uint32_t tp_dsp_pack16(int32_t lo, int32_t hi)
{
    return ((uint32_t)lo & 0xFFFFu) | ((uint32_t)hi << 16);
}

/* ---- requantization ----
 * TFLite's MultiplyByQuantizedMultiplier (quant.mbqm: a rounding doubling high multiply, then a
 * rounding right shift by e, both half away from zero), plus the output zero point, in one
 * 32 x 32 -> 64-bit multiply-accumulate (SMMLAR). With a = acc << (1 + left):
 *
 *   hi = (a * mult + 2^31 + (hz - [a < 0 and e > 0]) * 2^32) >> 32,   out = hi >> e
 *
 * where hz = 2^(e-1) [e > 0] + out_zp * 2^e. Why it is exact: (a * mult + 2^31) >> 32 is
 * (acc' * mult + 2^30) >> 31 (acc' = acc << left), the doubling high multiply (gemmlowp's
 * nudge: floor division by 2^31 after adding 2^30 equals its round half away from zero for
 * both signs); adding whole multiples of 2^32 before the shift adds them to the high word; the
 * final floor((q + 2^(e-1) - [q < 0]) / 2^e) is the rounding divide (half away from zero), and
 * [q < 0] may be read as [acc < 0]: they differ only for q = 0, where both give 0.
 * It holds while |acc'| < 2^30 (a fits int32) and |hz| + 2^30 < 2^31 (e <= 22): a channel is
 * taken only when its accumulator bound says so (tp_dsp_prepare), else the op runs the
 * reference kernel. A channel whose weights are all zero outputs one constant: mult = 0 and
 * hz = that output. */
typedef struct {
    int32_t bias; /* the accumulator's start: the bias, or a kernel's corrected bias */
    int32_t mult; /* TFLite's multiplier, in [0, 2^31) */
    int32_t hz;   /* 2^(e-1) [e > 0] + out_zp * 2^e; a constant channel's output */
    int32_t nm;   /* -1 when e > 0 (negative accumulators round down), else 0 */
    uint32_t s1;  /* 1 + the left shift */
    uint32_t e;   /* the right shift */
} tp_dsp_rq;

/* Channel o's parameters (bias, multiplier and shift of q; its taps weights `row`, `n` of them
 * `step` apart). Returns 0 when the fast requantization is not provably exact for it. */
int tp_dsp_prepare(const tp_conv_params *p, const tp_requant *q, uint32_t o, const int8_t *row,
                   uint32_t step, uint32_t n, tp_dsp_rq *rq);

/* tp_mbqm(x, m, -e) for an int32 x, m in [0, 2^31) and e <= 31, in 32-bit halves (tp_dsp.c;
 * tests/c/test_mbqm_dsp.c checks it against tp_mbqm). */
int32_t tp_dsp_mbqm32(int32_t x, int32_t m, uint32_t e);

/* Clamp to the activation range [lo, hi] when it is narrower than int8. */
static inline int8_t tp_dsp_clamp(int32_t v, int32_t lo, int32_t hi)
{
    return (int8_t)(v < lo ? lo : v > hi ? hi : v);
}

/* One output of a doubled accumulator a2 = acc << 1 (a kernel may accumulate 2 (x - zp) w):
 * requantized (above), zero point added, saturated to int8, then clamped to the activation
 * range unless `full` (int8's). `fast` says every channel of the op rounds its right shift
 * (nm = -1) and has no left shift (s1 = 1): tp_dsp_fast. Callers pass constants, so each use
 * compiles to one straight sequence (ADD, SMMLAR, ASR, SSAT). */
TP_DSP_INLINE int8_t tp_dsp_output2(uint32_t a2, const tp_dsp_rq *rq, int fast, int full,
                                    int32_t lo, int32_t hi)
{
    uint32_t a = fast ? a2 : a2 << (rq->s1 - 1u);
    uint32_t neg = 0u - (a >> 31);
    uint32_t h = (uint32_t)rq->hz + (fast ? neg : (uint32_t)rq->nm & neg);
    int32_t v = tp_ssat8(tp_smmlar(tp_dsp_i32(a), rq->mult, tp_dsp_i32(h)) >> rq->e);
    return full ? (int8_t)v : tp_dsp_clamp(v, lo, hi);
}

/* tp_dsp_output2 of an accumulator. */
TP_DSP_INLINE int8_t tp_dsp_output(int32_t acc, const tp_dsp_rq *rq, int fast, int full, int32_t lo,
                                   int32_t hi)
{
    return tp_dsp_output2((uint32_t)acc << 1, rq, fast, full, lo, hi);
}

/* Whether a channel allows tp_dsp_output's fast form. */
static inline int tp_dsp_fast(const tp_dsp_rq *rq)
{
    return rq->nm != 0 && rq->s1 == 1u;
}

/* ---- the 4 x 2 tile (tp_conv_arm.c; tp_conv3x3_rgb_arm.c uses it too) ---- */

/* The word after a channel group's last weight quad: a pair of int16 no int8 weight gives. */
#define TP_CONV_W_END 0x80008000u

/* The K loop of a tile of 4 output channels x 2 pixels: out[0..3] (pixel a) and out[4..7]
 * (pixel b) = bias[0..3] + the sums over the quads of a pixel pair's columns x (four words a
 * quad: a's and b's even lanes, then their odd lanes) times the group's weights w (eight words
 * a quad: the four channels' even lanes, then their odd lanes), up to the word after the last
 * weight quad, which holds TP_CONV_W_END (a pair of int16 no int8 weight gives). Per quad:
 * two LDRD of x, four of weights, sixteen SMLADs (32 multiply-accumulates) and the end test.
 * On Arm it is Thumb-2 assembly (tp_conv_arm.c): the loop needs all fourteen registers (eight sums,
 * two column words, two weight words, two pointers), more than the compilers allocate from
 * C without spilling; at file scope and without operands, it assembles with every compiler
 * and level. With the intrinsics emulated, the C below is its definition. */
void tp_arm_conv_tile_4x2(int32_t out[8], const uint32_t *x, const uint32_t *w,
                          const int32_t bias[4]);

/* A run of tiles over four consecutive channels whose outputs all take tp_dsp_output's fast
 * form with the int8 clamp (VWW's pointwise convolutions): per pixel pair the tile, then its
 * eight outputs requantized and stored, four bytes at o (pixel a) and four at o + db (pixel b);
 * then o += da. The fields' offsets are the assembly's: it advances cols, o and pairs as it
 * goes. */
typedef struct {
    const uint32_t *cols; /* 0: the pair's columns (the next pair's follow them) */
    const uint32_t *wq;   /* 4: the group's weight quads, ended by TP_CONV_W_END */
    const tp_dsp_rq *rq;  /* 8: the four channels' requantization, rq[0..3] */
    int8_t *o;            /* 12 */
    uint32_t db, da;      /* 16, 20 */
    uint32_t pairs;       /* 24: at least 1 */
    int32_t bias[4];      /* 28: rq[0..3].bias */
    uint32_t k4;          /* 44: words between pairs' columns (the C definition's) */
} tp_conv_block;

void tp_arm_conv_block_4x2(tp_conv_block *b);

/* ---- gradients (tp_*_grad_arm.c) ---- */

/* Whether the 1x1 CONV_2D gradient kernels take an op: 1x1, stride 1, no padding, input
 * channels a multiple of 4. */
static inline int tp_dsp_grad_pointwise(const tp_conv_params *p, const tp_shape *in_shape)
{
    return p->k[0] == 1u && p->k[1] == 1u && p->stride[0] == 1u && p->stride[1] == 1u &&
           p->pad[0] == 0u && p->pad[1] == 0u && (in_shape->c & 3) == 0;
}

/* Two int16 at any alignment as a word (the first low). */
static inline uint32_t tp_dsp_rd_pair(const int16_t *p)
{
    uint32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}

/* v clamped to +-lim. */
static inline int32_t tp_dsp_sat(int32_t v, int32_t lim)
{
    return v > lim ? lim : v < -lim ? -lim : v;
}

/* v / 2^sh rounded half to even, 1 <= sh <= 31, hm1 = 2^(sh - 1) - 1, v + 2^(sh - 1) within
 * int32: adding hm1 plus the floor's parity carries into the quotient exactly when the
 * remainder is above one half, or one half with an odd floor. */
static inline int32_t tp_dsp_round_even(int32_t v, int32_t sh, int32_t hm1)
{
    return (v + hm1 + ((v >> sh) & 1)) >> sh;
}

/* tp_gm_fold_one (one dY' = round(q m / 2^sh) half to even, clamped to +-lim) with the
 * channel's shift at hand (sh = top - k). */
static inline int32_t tp_dsp_fold_inline(int32_t q, uint32_t m, int32_t sh, int32_t lim)
{
    int64_t v = (int64_t)q * (int64_t)m;
    if (sh >= 9 && sh <= 31) { /* the usual case, in 32-bit halves: |v| / 2^sh < 2^30 */
        uint64_t u = (uint64_t)v;
        uint32_t lo = (uint32_t)u, hi = (uint32_t)(u >> 32), s = (uint32_t)sh;
        int32_t r = tp_dsp_i32((lo >> s) | (hi << (32u - s))); /* the floor */
        uint32_t rem = lo & ((1u << s) - 1u), half = 1u << (s - 1u);
        r += (rem > half || (rem == half && (r & 1))) ? 1 : 0;
        return tp_dsp_sat(r, lim);
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

/* The function (tp_dsp.c), and the inline version unless the build optimizes for size: there
 * GCC does not inline it, and one copy serves both input-gradient kernels. */
int32_t tp_dsp_fold(int32_t q, uint32_t m, int32_t sh, int32_t lim);
#ifndef __OPTIMIZE_SIZE__
#define tp_dsp_fold(q, m, sh, lim) tp_dsp_fold_inline((q), (m), (sh), (lim))
#endif

/* Whether round(q m / 2^sh) of an int8 q (m != 0, sh >= 1) can meet a tie: q m is halfway only
 * with sh - 1 trailing zeros, tz(q) + tz(m) with tz(q) <= 7 for a nonzero q, so only when
 * sh - 1 - tz(m) is in 0..7. Where it cannot, half up (SMMULR's rounding) is half to even. */
static inline int tp_dsp_fold_may_tie(uint32_t m, int32_t sh)
{
    int32_t d = sh - 1 - (int32_t)__builtin_ctz(m);
    return d >= 0 && d <= 7;
}

/* round(q m / 2^sh) half up for an int8 q and 1 <= sh <= 31 is tp_smmulr(q qs, b) with
 * qs = 2^sa and b = m 2^sb, sa + sb = 32 - sh: sa = 24 (sh <= 8) or 32 - sh keeps q qs within
 * int32 (|q| <= 128) and b below 2^31 (m < 2^24). */
static inline void tp_dsp_smm_factors(uint32_t m, int32_t sh, int32_t *qs, int32_t *b)
{
    uint32_t sa = sh <= 8 ? 24u : 32u - (uint32_t)sh;
    *qs = (int32_t)(1u << sa);
    *b = (int32_t)(m << (32u - (uint32_t)sh - sa));
}

#endif /* TP_KERNELS_DSP */
#endif /* TP_DSP_H */
