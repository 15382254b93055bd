/* tp_gradmap.h - integer gradient maps (host/tinyprop/reference/gradmap.py, function for
 * function): a gradient tensor held as int16 or int8 values q and one power-of-two exponent e,
 * real value q * 2^e (docs/training.md, "Integer gradient maps").
 *
 * A map's buffer in the arena: its exponent (int32), 4 bytes of padding, then the values. Every
 * value a kernel computes from maps is an exact integer; the roundings are the ones below, all
 * half to even on integers, so the C core and NumPy agree bit for bit whatever the loop order.
 */
#ifndef TP_GRADMAP_H
#define TP_GRADMAP_H

#include <stdint.h>
#include <string.h>

/* TRAN's gradient formats (train_plan.GRAD_FORMATS) */
#define TP_GRAD_FLOAT32 0u
#define TP_GRAD_INT16 1u
#define TP_GRAD_INT8 2u
#define TP_GRAD_FORMATS 3u

#define TP_GM_HEADER 8u     /* exponent and padding before a map's values */
#define TP_GM_FOLD_BITS 15  /* dY' (an int16) */
#define TP_GM_ACC_BITS 31   /* W^T dY' below 2^31 */
#define TP_GM_LOSS_FRAC 30  /* the loss gradient in units of 2^-30 */
#define TP_GM_ALIGN_SPAN 30 /* two maps added: exponents at most this far apart */
#define TP_GM_POOL_FRAC 16  /* average pooling and MEAN: dY / n in units of 2^-16 */

/* Bytes of one value and the bits its magnitude may use, per format. */
static inline uint32_t tp_gm_bytes(uint32_t format)
{
    return format == TP_GRAD_INT8 ? 1u : format == TP_GRAD_INT16 ? 2u : 4u;
}

static inline uint32_t tp_gm_bits(uint32_t format)
{
    return format == TP_GRAD_INT8 ? 7u : 15u;
}

/* Bytes of a gradient buffer of n values (train_plan.grad_buffer_bytes): an integer map's
 * values padded to a multiple of 8. */
static inline uint64_t tp_gm_buffer_bytes(uint32_t format, uint64_t n)
{
    return format == TP_GRAD_FLOAT32
               ? 4u * n
               : TP_GM_HEADER + ((tp_gm_bytes(format) * n + 7u) & ~(uint64_t)7u);
}

/* A map in the arena: int16_t or int8_t values (bytes 2 or 1), exponent e. */
typedef struct {
    void *q;
    uint32_t bytes;
    int32_t e;
} tp_gmap;

/* The map whose buffer (header, then values) starts at buf; format an integer one. */
tp_gmap tp_gm_at(uint8_t *buf, uint32_t format);

static inline int32_t tp_gm_get(const tp_gmap *m, uint32_t i)
{
    return m->bytes == 2u ? ((const int16_t *)m->q)[i] : ((const int8_t *)m->q)[i];
}

static inline void tp_gm_set(const tp_gmap *m, uint32_t i, int32_t v)
{
    if (m->bytes == 2u) {
        ((int16_t *)m->q)[i] = (int16_t)v;
    } else {
        ((int8_t *)m->q)[i] = (int8_t)v;
    }
}

/* Bits of m (m < 2^bitlen, 0 for 0). */
static inline uint32_t tp_gm_bitlen32(uint32_t m)
{
#if defined(__GNUC__) || defined(__clang__)
    return m != 0u ? 32u - (uint32_t)__builtin_clz(m) : 0u;
#else
    uint32_t n = 0;
    if (m >> 16) {
        n = 16u;
        m >>= 16;
    }
    if (m >> 8) {
        n += 8u;
        m >>= 8;
    }
    if (m >> 4) {
        n += 4u;
        m >>= 4;
    }
    while (m != 0u) {
        n++;
        m >>= 1;
    }
    return n;
#endif
}

static inline uint32_t tp_gm_bitlen_inline(uint64_t m)
{
    uint32_t hi = (uint32_t)(m >> 32);
    return hi != 0u ? 32u + tp_gm_bitlen32(hi) : tp_gm_bitlen32((uint32_t)m);
}

/* The functions (the host library's symbols), and the inline versions callers get. */
uint32_t tp_gm_bitlen(uint64_t m);
#define tp_gm_bitlen(m) tp_gm_bitlen_inline(m)

/* v / 2^s rounded half to even; s <= 0 shifts left (exactly, for |v| < 2^(62 + s)). */
int64_t tp_gm_rshift(int64_t v, int32_t s);

/* a / n rounded half to even, n > 0. */
int64_t tp_gm_rdiv(int64_t a, int64_t n);

/* v clamped to +-(2^bits - 1). */
static inline int64_t tp_gm_saturate(int64_t v, uint32_t bits)
{
    int64_t lim = ((int64_t)1 << bits) - 1;
    return v > lim ? lim : v < -lim ? -lim : v;
}

/* A float32 scale s as m * 2^k exactly, m < 2^24 (gradmap.scale_parts). */
static inline void tp_gm_scale_parts_inline(float s, uint32_t *m, int32_t *k)
{
    uint32_t u, exp;
    memcpy(&u, &s, 4u);
    exp = (u >> 23) & 0xFFu;
    *m = exp > 0u ? (u & 0x7FFFFFu) | 0x800000u : u & 0x7FFFFFu;
    *k = exp > 0u ? (int32_t)exp - 150 : -149;
}

void tp_gm_scale_parts(float s, uint32_t *m, int32_t *k);
#define tp_gm_scale_parts(s, m, k) tp_gm_scale_parts_inline((s), (m), (k))

/* 2^e as a float32 (0 below the subnormals, infinity above the range). */
float tp_gm_pow2(int32_t e);

/* Exact s * 2^e as float32: s rounded to float32 (nearest even), times scale * 2^e (a float32
 * product), one more rounding (gradmap.to_f32). */
float tp_gm_to_f32(int64_t s, int32_t e, float scale);

/* float32 x (|x| < 2^31) rounded half to even. */
int64_t tp_gm_round_f32(float x);

/* ---- writing a map from exact values (gradmap.produce) ----
 * A kernel hands in each row's exact values v * 2^e_v (added to the map already there when
 * accumulating): tp_gm_row_begin with the row's largest |tp_gm_value|, then tp_gm_put of each
 * value; or tp_gm_row_i32 for a row of int32 accumulators. tp_gm_end rounds every row to the
 * map's exponent and stores it. */
typedef struct {
    tp_gmap map;
    uint8_t *header;
    uint8_t *shifts;     /* scratch: each row's own shift */
    int64_t *sums;       /* reducing (a sink's gradient): per-channel sums instead of a map */
    const uint8_t *mask; /* reducing: the sink's 1-bit mask (NULL: none) */
    uint32_t channels;
    uint32_t rows, row_elems, bits;
    int32_t e_c;    /* the exponent values are exact at (e_v, or a common one with the old map) */
    int32_t sv, so; /* shifts of new values and of the old map's to e_c */
    uint32_t accumulate;
    uint32_t shift; /* the current row's */
} tp_gm_writer;

void tp_gm_begin(tp_gm_writer *w, uint8_t *buf, uint32_t format, uint32_t rows, uint32_t row_elems,
                 uint32_t accumulate, uint8_t *shifts, int32_t e_v);
/* New value v of element i (row r's, index r * row_elems + j) with the old map's there: exact
 * at e_c. */
static inline int64_t tp_gm_value(const tp_gm_writer *w, uint32_t i, int64_t v)
{
    return w->accumulate ? tp_gm_rshift(v, w->sv) + tp_gm_rshift(tp_gm_get(&w->map, i), w->so) : v;
}
/* A sink's gradient instead of a map (train_plan.F2_REDUCED): buf holds the exponent e_v, then
 * one int64 sum a channel of the exact values whose mask bit is set; rows, puts and the end do
 * just that. */
void tp_gm_begin_sums(tp_gm_writer *w, uint8_t *buf, uint32_t rows, uint32_t row_elems,
                      uint32_t channels, const uint8_t *mask, int32_t e_v);
void tp_gm_row_begin(tp_gm_writer *w, uint32_t r, uint64_t max_abs);
static inline void tp_gm_put(const tp_gm_writer *w, uint32_t i, int64_t value)
{
    if (w->sums != 0) {
        if (w->mask == 0 || (w->mask[i >> 3] & (1u << (i & 7u)))) {
            w->sums[i % w->channels] += value;
        }
        return;
    }
    tp_gm_set(&w->map, i, (int32_t)tp_gm_saturate(tp_gm_rshift(value, (int32_t)w->shift), w->bits));
}
/* x / 2^s rounded half to even, 1 <= s <= 30, when x + 2^31 + 2^(s-1) < 2^32: the floor of
 * (x + 2^(s-1) - 1 + parity) / 2^s, parity that of floor(x / 2^s) (that of (x + 2^31) >> s,
 * 2^(31-s) being even), through offset binary (no right shift of a negative value). */
static inline int32_t tp_gm_rshift32_fast(int32_t x, uint32_t s)
{
    uint32_t u = (uint32_t)x + 0x80000000u;
    return (int32_t)(((u + ((1u << (s - 1u)) - 1u) + ((u >> s) & 1u)) >> s) - (0x80000000u >> s));
}
/* tp_gm_put of an int32 value on a writer that neither accumulates nor sums, its row's largest
 * magnitude below 2^31 (the shift then below 31 - bits): clamped to +-lim 2^shift first (which
 * rounds to +-lim as all beyond do), then rounded. */
static inline void tp_gm_put_i32(const tp_gm_writer *w, uint32_t i, int32_t v)
{
    if (w->shift != 0u) {
        int32_t top = (((int32_t)1 << w->bits) - 1) << w->shift;
        v = tp_gm_rshift32_fast(v > top ? top : v < -top ? -top : v, w->shift);
    }
    tp_gm_set(&w->map, i, v);
}
void tp_gm_row_i32(tp_gm_writer *w, uint32_t r, const int32_t *v);
void tp_gm_end(tp_gm_writer *w);

/* ---- the RELU mask ----
 * Bit j % 8 of mask[j / 8] for each of the n int8 values y[j]: 1 where lo <= y[j] < hi (the RELU
 * passed it through, and so passes its gradient), 0 where it clamped (-128 <= lo, hi <= 128). */
void tp_gm_relu_mask(const int8_t *y, uint8_t *mask, uint32_t n, int32_t lo, int32_t hi);
/* The bytes of 4 int8 values that bits 0-3 of a mask byte keep (0xFF) or clear (0x00), in
 * memory order whatever the byte order of a word. */
extern const uint8_t tp_gm_kept4[16][4];

/* The 8 int8 values of *w0, *w1 (memory order, as loaded by memcpy) whose bit of mask byte mb
 * is 0 set to 0: on a little-endian Cortex-M4/M7 (not TP_KERNELS_REF_ONLY) the byte's halves
 * as GE flags (MSR APSR_g) for SEL; else by tp_gm_kept4. */
static inline void tp_gm_mask8(uint32_t *w0, uint32_t *w1, uint32_t mb)
{
#if defined(__ARM_FEATURE_DSP) && !defined(TP_KERNELS_REF_ONLY) && defined(__ARM_ARCH_7EM__) && \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint32_t z = 0u;
    __asm__("msr APSR_g, %2\n\t"
            "sel %0, %0, %4\n\t"
            "msr APSR_g, %3\n\t"
            "sel %1, %1, %4"
            : "+r"(*w0), "+r"(*w1)
            : "r"(mb << 16), "r"(mb << 12), "r"(z)
            : "cc");
#else
    uint32_t k0, k1;
    memcpy(&k0, tp_gm_kept4[mb & 15u], 4u);
    memcpy(&k1, tp_gm_kept4[mb >> 4], 4u);
    *w0 &= k0;
    *w1 &= k1;
#endif
}

/* ---- dY' = dY * s_w[o] (gradmap.fold) ----
 * One exponent for the op: dY'[p, o] = sat(rshift(q * m_o, top - k_o)) with s_w[o] = m_o 2^k_o
 * and top = C - bits, C the largest bitlen(max_p |q[p, o]| m_o) + k_o; bits such that
 * n_terms products with int8 weights stay below 2^31. live 0: dY' is all zero. dead: bit o of
 * dead[o / 32] for each channel o < TP_GM_DEAD_C whose dY is zero everywhere (a RELU that
 * clamped all of it: VWW's pruned channels), found by tp_gm_fold_of's scan; a clear bit says
 * nothing (the kernels skip the set ones: their dX terms are 0). no_clamp: 1 when no dY' can
 * reach +-2^bits before the clamp, rounded half up or half to even (tp_gm_fold_of's bound from
 * the channels' largest |dY|), so a kernel may leave the clamp out; 0 says nothing. */
#define TP_GM_DEAD_C 256u
typedef struct {
    int32_t top, e;
    uint32_t bits, live, no_clamp;
    uint32_t dead[TP_GM_DEAD_C / 32u];
} tp_gm_fold;

/* bits of dY' for n_terms products (gradmap.fold_bits). */
uint32_t tp_gm_fold_bits(uint32_t n_terms);

/* Start a fold: c is the largest bitlen(max |q| * m_o) + k_o over the live channels. */
void tp_gm_fold_init(tp_gm_fold *f, int32_t e_y, uint32_t n_terms, int32_t c, uint32_t live);

/* Channel class of a channel: bitlen(max_abs * m) + k (m, k its scale's parts); 0 max: none. */
static inline int32_t tp_gm_channel_class(uint32_t max_abs, uint32_t m, int32_t k)
{
    return (int32_t)tp_gm_bitlen((uint64_t)max_abs * m) + k;
}

/* One folded value. */
static inline int32_t tp_gm_fold_one(const tp_gm_fold *f, int32_t q, uint32_t m, int32_t k)
{
    return (int32_t)tp_gm_saturate(tp_gm_rshift((int64_t)q * (int64_t)m, f->top - k), f->bits);
}

#endif /* TP_GRADMAP_H */
