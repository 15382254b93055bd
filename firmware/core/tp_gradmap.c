/* tp_gradmap.c - integer gradient maps (tp_gradmap.h; host/tinyprop/reference/gradmap.py). */
#include "tp_gradmap.h"
#include "tinyprop.h"

#include <string.h>

#include "tp_attr.h" /* the int8 rows' path inlined whole, the rest kept out of it */
#include "tp_le.h"

tp_gmap tp_gm_at(uint8_t *buf, uint32_t format)
{
    tp_gmap m;
    memcpy(&m.e, buf, 4u);
    m.q = buf + TP_GM_HEADER;
    m.bytes = tp_gm_bytes(format);
    return m;
}

/* The names in parentheses: the functions, not tp_gradmap.h's macros to the inline versions. */
uint32_t(tp_gm_bitlen)(uint64_t m)
{
    return tp_gm_bitlen_inline(m);
}

void(tp_gm_scale_parts)(float s, uint32_t *m, int32_t *k)
{
    tp_gm_scale_parts_inline(s, m, k);
}

/* floor(v / 2^s), 0 <= s <= 62, without relying on >> of a negative value */
static int64_t floor_shift(int64_t v, uint32_t s)
{
    return v >= 0 ? v >> s : -(int64_t)((uint64_t)(-(v + 1)) >> s) - 1;
}

int64_t tp_gm_rshift(int64_t v, int32_t s)
{
    int64_t q;
    uint64_t r, half;
    if (s <= 0) {
        uint32_t l = s < -62 ? 62u : (uint32_t)-s;
        return (int64_t)((uint64_t)v << l);
    }
    if (s > 62) {
        s = 62;
    }
    q = floor_shift(v, (uint32_t)s);
    r = (uint64_t)v - ((uint64_t)q << (uint32_t)s);
    half = (uint64_t)1 << (uint32_t)(s - 1);
    return q + ((r > half || (r == half && (q & 1))) ? 1 : 0);
}

int64_t tp_gm_rdiv(int64_t a, int64_t n)
{
    int64_t q = a / n, r;
    if (a % n != 0 && a < 0) { /* C truncates: make it the floor */
        q--;
    }
    r = 2 * (a - q * n);
    return q + ((r > n || (r == n && (q & 1))) ? 1 : 0);
}

static float f32_of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4u);
    return f;
}

float tp_gm_pow2(int32_t e)
{
    if (e < -149) {
        return 0.0f;
    }
    if (e > 127) {
        return f32_of_bits(0x7F800000u);
    }
    return f32_of_bits(e >= -126 ? (uint32_t)(e + 127) << 23 : (uint32_t)1 << (uint32_t)(e + 149));
}

/* int64 to float32, rounded to nearest even (as NumPy's astype and the FPU's conversion) */
static float i64_to_f32(int64_t s)
{
    uint64_t a = s < 0 ? 0u - (uint64_t)s : (uint64_t)s;
    uint32_t n = tp_gm_bitlen(a);
    float f;
    if (n <= 24u) {
        f = (float)(int32_t)a;
    } else {
        uint32_t sh = n - 24u;
        uint64_t q = a >> sh, r = a & (((uint64_t)1 << sh) - 1u), half = (uint64_t)1 << (sh - 1u);
        q += (r > half || (r == half && (q & 1u))) ? 1u : 0u;
        f = (float)(int32_t)q * tp_gm_pow2((int32_t)sh); /* q <= 2^24: both exact */
    }
    return s < 0 ? -f : f;
}

float tp_gm_to_f32(int64_t s, int32_t e, float scale)
{
    float c = scale * tp_gm_pow2(e);
    return i64_to_f32(s) * c;
}

int64_t tp_gm_round_f32(float x)
{
    float t = (float)(int32_t)x, fl, frac;
    int64_t q;
    fl = x < t ? t - 1.0f : t;
    frac = x - fl;
    q = (int64_t)fl;
    return q + ((frac > 0.5f || (frac == 0.5f && (q & 1))) ? 1 : 0);
}

/* ---- writing a map ---- */

static int32_t clamp_i32(int64_t v)
{
    return v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
}

void tp_gm_begin(tp_gm_writer *w, uint8_t *buf, uint32_t format, uint32_t rows, uint32_t row_elems,
                 uint32_t accumulate, uint8_t *shifts, int32_t e_v)
{
    w->map = tp_gm_at(buf, format);
    w->header = buf;
    w->shifts = shifts;
    w->sums = 0;
    w->mask = 0;
    w->channels = 0;
    w->rows = rows;
    w->row_elems = row_elems;
    w->bits = tp_gm_bits(format);
    w->accumulate = accumulate;
    w->e_c = e_v;
    w->sv = 0;
    w->so = 0;
    w->shift = 0;
    if (accumulate) { /* gradmap.combine */
        /* In 64 bits: the map's stored exponent is whatever the buffer holds, and a malformed
         * blob can accumulate into one never written (fuzz_blob); the shifts then saturate
         * (tp_gm_rshift takes any beyond 62 as 62). A map the core wrote has a small exponent,
         * so the bits are the same. */
        int64_t e_old = w->map.e, lo = e_v < e_old ? e_v : e_old, hi = e_v < e_old ? e_old : e_v;
        int64_t e_c = lo > hi - TP_GM_ALIGN_SPAN ? lo : hi - TP_GM_ALIGN_SPAN;
        w->e_c = (int32_t)e_c;
        w->sv = clamp_i32(e_c - e_v);
        w->so = clamp_i32(e_c - e_old);
    }
}

void tp_gm_begin_sums(tp_gm_writer *w, uint8_t *buf, uint32_t rows, uint32_t row_elems,
                      uint32_t channels, const uint8_t *mask, int32_t e_v)
{
    uint32_t c;
    tp_gm_begin(w, buf, TP_GRAD_INT16, rows, row_elems, 0u, 0, e_v);
    w->sums = (int64_t *)(void *)(buf + TP_GM_HEADER);
    w->mask = mask;
    w->channels = channels;
    for (c = 0; c < channels; c++) {
        w->sums[c] = 0;
    }
    memcpy(buf, &e_v, 4u);
}

void tp_gm_row_begin(tp_gm_writer *w, uint32_t r, uint64_t max_abs)
{
    if (w->sums != 0) {
        return;
    }
    uint32_t n = tp_gm_bitlen(max_abs);
    w->shift = n > w->bits ? n - w->bits : 0u;
    w->shifts[r] = (uint8_t)w->shift;
}

/* x / 2^s rounded half to even, 1 <= s <= 31, for |x| < 2^31: the floor through offset binary
 * (no right shift of a negative value), then the tie rule. */
static inline int32_t rshift32(int32_t x, uint32_t s)
{
    uint32_t u = (uint32_t)x + 0x80000000u, mask = (1u << s) - 1u, half = 1u << (s - 1u);
    uint32_t rem = u & mask;
    int32_t q = (int32_t)((u >> s) - (0x80000000u >> s));
    return q + ((rem > half || (rem == half && (q & 1))) ? 1 : 0);
}

/* The same for 1 <= s <= 30 when x + 2^31 + 2^(s-1) < 2^32 (no wrap below): half to even is
 * floor((x + 2^(s-1) - 1 + parity) / 2^s), parity that of floor(x / 2^s) (that of
 * (x + 2^31) >> s, 2^(31-s) being even). */
static inline int32_t rshift32_fast(int32_t x, uint32_t s, uint32_t half_m1, uint32_t bias)
{
    uint32_t u = (uint32_t)x + 0x80000000u;
    return (int32_t)(((u + half_m1 + ((u >> s) & 1u)) >> s) - bias);
}

/* The int8 rows' two passes in Thumb-2 assembly (Cortex-M3, M4, M7, M33), unless
 * TP_KERNELS_REF_ONLY: the C below is their definition (and what other targets run). */
#if defined(__thumb2__) && !defined(TP_KERNELS_REF_ONLY)
#define TP_GM_ASM 1
#else
#define TP_GM_ASM 0
#endif

/* The DSP extension's SIMD (Cortex-M4, M7, M33) for tp_gm_end's rows and the RELU mask, unless
 * TP_KERNELS_REF_ONLY: the SWAR C is their definition (and what other targets run). */
#if defined(__ARM_FEATURE_DSP) && !defined(TP_KERNELS_REF_ONLY)
#define TP_GM_DSP 1
#else
#define TP_GM_DSP 0
#endif

#if TP_GM_ASM
/* tp_gm_or_mag(v, n8): the OR of x ^ (x >> 31) over 8 n8 values (n8 >= 1), eight a LDM, four
 * LDMs a turn, the first turn entered by TBB so that it takes n8 mod 4 (4 when 0).
 * tp_gm_round_i8(q, v, n4, s): round_i8's loop over 4 n4 values (n4 >= 1, 1 <= s <= 23): per
 * value LSLS by 32 - s puts bit s (the parity) in the carry, ADC adds it and 2^31 + 2^(s-1) - 1,
 * LSR by s; BFI packs the word; four words a turn, the first n4 mod 4 (TBB, as tp_gm_or_mag);
 * returns a word whose 0x80 bits flag the bytes 0x80 met: with the DSP extension, the words'
 * bytewise signed minimum (SSUB8 and SEL: 2 instructions a word; 0x80, the least, is there if met)
 * tested for it once, else the OR of every word's test (4 instructions a word). */
uint32_t tp_gm_or_mag(const int32_t *v, uint32_t n8);
uint32_t tp_gm_round_i8(uint8_t *q, const int32_t *v, uint32_t n4, uint32_t s);
#if TP_GM_DSP
#define TP_GM_HIT             \
    "    ssub8 r9, r10, r4\n" \
    "    sel r10, r4, r10\n"
#define TP_GM_HIT_END                \
    "    eor r8, r10, #0x80808080\n" \
    "    sub r9, r8, #0x01010101\n"  \
    "    bic r0, r9, r8\n"
#else
#define TP_GM_HIT                   \
    "    eor r8, r4, #0x80808080\n" \
    "    sub r9, r8, #0x01010101\n" \
    "    bic r9, r9, r8\n"          \
    "    orr r10, r10, r9\n"
#define TP_GM_HIT_END "    mov r0, r10\n"
#endif
#ifdef __thumb__
#define TP_GM_ISA ".thumb\n"
#else
#define TP_GM_ISA ".arm\n"
#endif
__asm__(".pushsection .text.tp_gm_rows,\"ax\",%progbits\n"
        ".syntax unified\n"
        ".thumb\n"
        ".macro tp_gm_mag r\n"
        "    eor \\r, \\r, \\r, asr #31\n"
        "    orr r2, r2, \\r\n"
        ".endm\n"
        ".macro tp_gm_mag8\n"
        "    ldm r0!, {r3-r10}\n"
        "    tp_gm_mag r3\n"
        "    tp_gm_mag r4\n"
        "    tp_gm_mag r5\n"
        "    tp_gm_mag r6\n"
        "    tp_gm_mag r7\n"
        "    tp_gm_mag r8\n"
        "    tp_gm_mag r9\n"
        "    tp_gm_mag r10\n"
        ".endm\n"
        ".macro tp_gm_rnd r\n"
        "    lsls r8, \\r, r12\n"
        "    adc \\r, \\r, r11\n"
        "    lsr \\r, \\r, r3\n"
        ".endm\n"
        ".macro tp_gm_rnd4\n"
        "    ldm r1!, {r4-r7}\n"
        "    tp_gm_rnd r4\n"
        "    tp_gm_rnd r5\n"
        "    bfi r4, r5, #8, #8\n"
        "    tp_gm_rnd r6\n"
        "    bfi r4, r6, #16, #8\n"
        "    tp_gm_rnd r7\n"
        "    bfi r4, r7, #24, #8\n"
        "    str r4, [r0], #4\n" TP_GM_HIT ".endm\n"
        ".p2align 2\n"
        ".global tp_gm_or_mag\n"
        ".hidden tp_gm_or_mag\n"
        ".type tp_gm_or_mag, %function\n"
        ".thumb_func\n"
        "tp_gm_or_mag:\n"
        "    push {r4-r10}\n"
        "    movs r2, #0\n"
        "    and r3, r1, #3\n"
        "    adds r1, r1, #3\n"
        "    lsrs r1, r1, #2\n"
        "    tbb [pc, r3]\n"
        "5:\n"
        "    .byte (1f - 5b) / 2, (13f - 5b) / 2, (12f - 5b) / 2, (11f - 5b) / 2\n"
        "1:\n"
        "    tp_gm_mag8\n"
        "11:\n"
        "    tp_gm_mag8\n"
        "12:\n"
        "    tp_gm_mag8\n"
        "13:\n"
        "    tp_gm_mag8\n"
        "    subs r1, r1, #1\n"
        "    bne 1b\n"
        "    mov r0, r2\n"
        "    pop {r4-r10}\n"
        "    bx lr\n"
        ".size tp_gm_or_mag, .-tp_gm_or_mag\n"
        ".p2align 2\n"
        ".global tp_gm_round_i8\n"
        ".hidden tp_gm_round_i8\n"
        ".type tp_gm_round_i8, %function\n"
        ".thumb_func\n"
        "tp_gm_round_i8:\n"
        "    push {r4-r11}\n"
        "    rsb r12, r3, #32\n"
        "    movs r11, #1\n"
        "    lsl r11, r11, r3\n"
        "    lsr r11, r11, #1\n"
        "    sub r11, r11, #1\n"
        "    add r11, r11, #0x80000000\n"
        "    movs r10, #0\n"
        "    and r8, r2, #3\n"
        "    adds r2, r2, #3\n"
        "    lsrs r2, r2, #2\n"
        "    tbb [pc, r8]\n"
        "5:\n"
        "    .byte (1f - 5b) / 2, (13f - 5b) / 2, (12f - 5b) / 2, (11f - 5b) / 2\n"
        "1:\n"
        "    tp_gm_rnd4\n"
        "11:\n"
        "    tp_gm_rnd4\n"
        "12:\n"
        "    tp_gm_rnd4\n"
        "13:\n"
        "    tp_gm_rnd4\n"
        "    subs r2, r2, #1\n"
        "    bne 1b\n" TP_GM_HIT_END "    pop {r4-r11}\n"
        "    bx lr\n"
        ".size tp_gm_round_i8, .-tp_gm_round_i8\n"
        ".purgem tp_gm_mag\n"
        ".purgem tp_gm_mag8\n"
        ".purgem tp_gm_rnd\n"
        ".purgem tp_gm_rnd4\n"
        ".popsection\n" TP_GM_ISA);
#endif

/* The OR of x ^ (x >> 31) over a row: |x| for x >= 0, |x| - 1 below, so its bit length B is the
 * largest magnitude's, or one less when a value is -2^B (which the callers tell apart). The C
 * loop out of line (the assembly takes rows of whole eights): the inlined path keeps a small
 * frame. */
static TP_NOINLINE uint32_t or_mag_c(const int32_t *v, uint32_t cnt)
{
    uint32_t j, bits = 0u;
    for (j = 0; j < cnt; j++) {
        uint32_t u = (uint32_t)v[j];
        bits |= u ^ (0u - (u >> 31));
    }
    return bits;
}

TP_ALWAYS_INLINE uint32_t or_mag(const int32_t *v, uint32_t cnt)
{
#if TP_GM_ASM
    if (cnt % 8u == 0u && cnt != 0u) {
        return tp_gm_or_mag(v, cnt >> 3);
    }
#endif
    return or_mag_c(v, cnt);
}

/* The OR of the row's magnitudes (its bit length is the largest one's). */
static uint32_t or_abs(const int32_t *v, uint32_t cnt)
{
    uint32_t j, bits = 0u;
    for (j = 0; j + 4u <= cnt; j += 4u) { /* |x| = (x ^ m) - m, m all ones where x < 0 */
        uint32_t a = (uint32_t)v[j], b = (uint32_t)v[j + 1u];
        uint32_t d = (uint32_t)v[j + 2u], e = (uint32_t)v[j + 3u];
        uint32_t ma = 0u - (a >> 31), mb = 0u - (b >> 31);
        uint32_t md = 0u - (d >> 31), me = 0u - (e >> 31);
        bits |= ((a ^ ma) - ma) | ((b ^ mb) - mb) | ((d ^ md) - md) | ((e ^ me) - me);
    }
    for (; j < cnt; j++) {
        bits |= v[j] < 0 ? 0u - (uint32_t)v[j] : (uint32_t)v[j];
    }
    return bits;
}

/* An int8 row rounded by s (1 <= s <= 23: its largest magnitude below 2^(s+7) <= 2^30), four
 * values a step: t = (v + 2^31 + 2^(s-1) - 1 + parity) >> s, the parity that of bit s of v
 * (rshift32_fast), is the rounded value plus 2^(31-s), whose low byte is 0: t's low byte is the
 * value's. The rounded values lie in [-128, 128]; +-128 come out as the byte 0x80, looked for
 * in the words (a zero byte of x ^ 0x80808080) as they are made: returns whether there is one.
 * Words stored whole on little-endian targets, bytes otherwise. Out of line, as or_mag_c. */
static TP_NOINLINE int round_i8_c(uint8_t *q, const int32_t *v, uint32_t cnt, uint32_t s)
{
    uint32_t j, c = 0x80000000u + ((1u << (s - 1u)) - 1u), hit = 0u;
    int little = tp_little_endian();
    for (j = 0; j + 4u <= cnt; j += 4u) {
        uint32_t a = (uint32_t)v[j], b = (uint32_t)v[j + 1u];
        uint32_t d = (uint32_t)v[j + 2u], e = (uint32_t)v[j + 3u], x;
        a = (a + c + ((a >> s) & 1u)) >> s;
        b = (b + c + ((b >> s) & 1u)) >> s;
        d = (d + c + ((d >> s) & 1u)) >> s;
        e = (e + c + ((e >> s) & 1u)) >> s;
        x = (((e << 8 | (d & 0xFFu)) << 8 | (b & 0xFFu)) << 8) | (a & 0xFFu);
        if (little) {
            memcpy(q + j, &x, 4u);
        } else {
            q[j] = (uint8_t)a;
            q[j + 1u] = (uint8_t)b;
            q[j + 2u] = (uint8_t)d;
            q[j + 3u] = (uint8_t)e;
        }
        x ^= 0x80808080u;
        hit |= (x - 0x01010101u) & ~x;
    }
    for (; j < cnt; j++) {
        uint32_t a = (uint32_t)v[j];
        q[j] = (uint8_t)((a + c + ((a >> s) & 1u)) >> s);
        hit |= q[j] == 0x80u ? 0x80u : 0u;
    }
    return (hit & 0x80808080u) != 0u;
}

/* round_i8_c's rounding; a little-endian row of whole words by the assembly. */
TP_ALWAYS_INLINE int round_i8(uint8_t *q, const int32_t *v, uint32_t cnt, uint32_t s)
{
#if TP_GM_ASM
    if (cnt % 4u == 0u && cnt != 0u && tp_little_endian()) {
        return (tp_gm_round_i8(q, v, cnt >> 2, s) & 0x80808080u) != 0u;
    }
#endif
    return round_i8_c(q, v, cnt, s);
}

/* The bytes 0x80 (+-128) of a rounded int8 row saturated to +-127. */
static void saturate_i8(uint8_t *q, const int32_t *v, uint32_t cnt)
{
    uint32_t j;
    for (j = 0; j < cnt; j++) {
        if (q[j] == 0x80u) {
            q[j] = v[j] < 0 ? 0x81u : 0x7Fu; /* -127, 127 */
        }
    }
}

static void store_row_i8(uint8_t *q, const int32_t *v, uint32_t cnt, uint32_t s)
{
    if (round_i8(q, v, cnt, s)) {
        saturate_i8(q, v, cnt);
    }
}

/* The row's values rounded by `shift` (0: as they are) and saturated to +-lim, stored; n the
 * bit length of the row's largest magnitude. */
static void store_row(const tp_gm_writer *w, uint32_t base, const int32_t *v, uint32_t shift,
                      uint32_t n)
{
    int32_t lim = ((int32_t)1 << w->bits) - 1;
    uint32_t j, cnt = w->row_elems;
    if (shift == 0u) { /* every |v| < 2^bits: as it is */
        if (w->map.bytes == 2u) {
            int16_t *q = (int16_t *)w->map.q + base;
            for (j = 0; j < cnt; j++) {
                q[j] = (int16_t)v[j];
            }
        } else {
            int8_t *q = (int8_t *)w->map.q + base;
            for (j = 0; j < cnt; j++) {
                q[j] = (int8_t)v[j];
            }
        }
    } else if (n <= 30u && w->map.bytes == 1u) {
        store_row_i8((uint8_t *)w->map.q + base, v, cnt, shift);
    } else if (n <= 30u) {
        /* int16: x + 2^31 + 2^(shift-1) < 2^31 + 2^30 + 2^29: rounded as it is; only +-2^bits
         * can come out beyond +-lim */
        uint32_t half_m1 = (1u << (shift - 1u)) - 1u, bias = 0x80000000u >> shift;
        uint32_t span = 2u * (uint32_t)lim;
        int16_t *q = (int16_t *)w->map.q + base;
        for (j = 0; j < cnt; j++) {
            int32_t x = rshift32_fast(v[j], shift, half_m1, bias);
            if ((uint32_t)(x + lim) > span) {
                x = x < 0 ? -lim : lim;
            }
            q[j] = (int16_t)x;
        }
    } else if (n <= 31u) {
        /* clamped first to +-lim 2^shift (< 2^n), which rounds to +-lim as every value beyond
         * does: no saturation after, and x + 2^31 + 2^(shift-1) < 2^31 + 2^n <= 2^32 */
        int32_t top = lim << shift;
        uint32_t half_m1 = (1u << (shift - 1u)) - 1u, bias = 0x80000000u >> shift;
        if (w->map.bytes == 2u) {
            int16_t *q = (int16_t *)w->map.q + base;
            for (j = 0; j < cnt; j++) {
                int32_t x = v[j] > top ? top : v[j] < -top ? -top : v[j];
                q[j] = (int16_t)rshift32_fast(x, shift, half_m1, bias);
            }
        } else {
            int8_t *q = (int8_t *)w->map.q + base;
            for (j = 0; j < cnt; j++) {
                int32_t x = v[j] > top ? top : v[j] < -top ? -top : v[j];
                q[j] = (int8_t)rshift32_fast(x, shift, half_m1, bias);
            }
        }
    } else { /* a value -2^31 */
        for (j = 0; j < cnt; j++) {
            int32_t x = rshift32(v[j], shift);
            tp_gm_set(&w->map, base + j, x > lim ? lim : x < -lim ? -lim : x);
        }
    }
}

/* t + x bit (bit 0 or 1), by SMLAL on Thumb-2 (GCC makes the C a UMULL and an MLA) */
static inline int64_t smlal_bit(int64_t t, int32_t x, uint32_t bit)
{
#if TP_GM_ASM
    __asm__("smlal %Q0, %R0, %1, %2" : "+r"(t) : "r"(x), "r"(bit));
    return t;
#else
    return t + (int64_t)x * (int32_t)bit;
#endif
}

/* sink_row for a row of whole pixels (channels and base multiples of 8): two channels a pass
 * over the pixels (more spill GCC's registers), their sums in registers, their mask bits from
 * one byte a pixel (bits sh and sh + 1 of every (channels / 8)-th byte), each value times its bit
 * (no branch). */
static void sink_pixels(const tp_gm_writer *w, uint32_t base, const int32_t *v)
{
    uint32_t c, channels = w->channels, step = channels >> 3;
    for (c = 0; c < channels; c += 2u) {
        const uint8_t *m = w->mask + ((base + c) >> 3);
        const int32_t *x = v + c, *end = x + w->row_elems;
        uint32_t sh = c & 7u;
        int64_t t0 = 0, t1 = 0;
        for (; x != end; x += channels, m += step) {
            uint32_t b = (uint32_t)*m >> sh;
            t0 = smlal_bit(t0, x[0], b & 1u);
            t1 = smlal_bit(t1, x[1], b >> 1 & 1u);
        }
        w->sums[c] += t0;
        w->sums[c + 1u] += t1;
    }
}

/* A row's values into a sink's channel sums (those whose mask bit is set): channel by channel
 * (value j is channel (base + j) mod channels'), each sum in a register; a masked row of whole
 * pixels by sink_pixels. When channels and base are multiples of 8, a channel's mask bits are one
 * bit of every (channels / 8)-th byte. */
static void sink_row(const tp_gm_writer *w, uint32_t base, const int32_t *v)
{
    uint32_t c, j, channels = w->channels, cnt = w->row_elems, ch0 = base % channels;
    const uint8_t *mask = w->mask;
    if (mask != 0 && channels % 8u == 0u && base % 8u == 0u && cnt % channels == 0u) {
        sink_pixels(w, base, v);
        return;
    }
    for (c = 0; c < channels && c < cnt; c++) {
        int64_t t = 0;
        uint32_t ch = ch0 + c < channels ? ch0 + c : ch0 + c - channels;
        if (mask == 0) {
            for (j = c; j < cnt; j += channels) {
                t += v[j];
            }
        } else if (channels % 8u == 0u && base % 8u == 0u) {
            const uint8_t *m = mask + ((base + c) >> 3);
            uint32_t sh = c & 7u, step = channels >> 3;
            for (j = c; j < cnt; j += channels, m += step) { /* v times its bit: no branch */
                t += (int64_t)v[j] * (int32_t)((*m >> sh) & 1u);
            }
        } else {
            for (j = c; j < cnt; j += channels) {
                uint32_t i = base + j;
                if (mask[i >> 3] & (1u << (i & 7u))) {
                    t += v[j];
                }
            }
        }
        w->sums[ch] += t;
    }
}

/* The rest of tp_gm_row_i32: a sink's sums, other maps, the rows the int8 path does not take
 * (their largest magnitude's bit length from the OR of them all), accumulating writers. Out of
 * line, so that the int8 rows' path keeps a small frame (the stack's deepest calls pass it). */
static TP_NOINLINE void row_general(tp_gm_writer *w, uint32_t r, const int32_t *v)
{
    uint32_t j, cnt = w->row_elems, base = r * cnt;
    uint64_t top = 0;
    if (w->sums != 0) { /* a sink's channel sums: a channel at a time, summed in a register */
        sink_row(w, base, v);
        return;
    }
    if (!w->accumulate) {
        uint32_t bits = or_abs(v, cnt);
        tp_gm_row_begin(w, r, bits);
        store_row(w, base, v, w->shift, tp_gm_bitlen32(bits));
        return;
    }
    for (j = 0; j < cnt; j++) {
        int64_t x = tp_gm_value(w, base + j, v[j]);
        uint64_t a = x < 0 ? 0u - (uint64_t)x : (uint64_t)x;
        top = a > top ? a : top;
    }
    tp_gm_row_begin(w, r, top);
    for (j = 0; j < cnt; j++) {
        tp_gm_put(w, base + j, tp_gm_value(w, base + j, v[j]));
    }
}

/* An int8 row of bit length n (by or_mag) whose rounding met a byte 0x80: measured exactly;
 * the same length: saturated; one more (a value -2^n): begun and rounded again. */
static TP_NOINLINE void row_i8_hit(tp_gm_writer *w, uint32_t r, const int32_t *v, uint32_t n)
{
    uint32_t cnt = w->row_elems, exact = or_abs(v, cnt), n2 = tp_gm_bitlen32(exact);
    uint8_t *q = (uint8_t *)w->map.q + r * cnt;
    if (n2 != n) {
        tp_gm_row_begin(w, r, exact);
        if (n2 > 30u) {
            store_row(w, r * cnt, v, w->shift, n2);
            return;
        }
        if (!round_i8(q, v, cnt, w->shift)) {
            return;
        }
    }
    saturate_i8(q, v, cnt);
}

void tp_gm_row_i32(tp_gm_writer *w, uint32_t r, const int32_t *v)
{
    /* int8, the row's bit length B from or_mag: a value -2^B, if any, rounds to the byte 0x80
     * (-2^bits) when bits < B <= 30, so a row without one has the length B; a row with one is
     * measured exactly, and rounded again if its length is B + 1 (row_i8_hit). Everything else
     * out of line (row_general), tail-called: the int8 path's frame stays small. */
    uint32_t cnt = w->row_elems, bits, n;
    if (w->sums != 0 || w->accumulate || w->map.bytes != 1u) {
        row_general(w, r, v);
        return;
    }
    bits = or_mag(v, cnt);
    n = tp_gm_bitlen32(bits);
    if (n <= w->bits || n > 30u) {
        row_general(w, r, v);
        return;
    }
    tp_gm_row_begin(w, r, bits);
    if (round_i8((uint8_t *)w->map.q + r * cnt, v, cnt, w->shift)) {
        row_i8_hit(w, r, v, n);
    }
}

/* rshift32_fast of the 4 int8 values of a word, 1 <= s <= 7, each in its own byte (either byte
 * order): u = q + 128 (q ^ 0x80), u = h 2^s + l; half to even adds 1 to h where
 * l + 2^(s-1) - 1 + parity >= 2^s (below 2^(s+1) <= 256: no carry out of the byte), the parity
 * that of floor(q / 2^s) = h - 2^(7-s) (flipped for s = 7); h + that 1 (at most 2^(8-s) <= 128)
 * plus 128 - 2^(7-s) stays below 256 and is the result plus 128: ^ 0x80 gives the result.
 * mh, ml: 0xFF >> s and 2^s - 1 in every byte; hm: 2^(s-1) - 1; pf: 1 where the parity flips;
 * b4: 128 - 2^(7-s). */
static inline uint32_t rshift4_i8(uint32_t v, uint32_t s, uint32_t mh, uint32_t ml, uint32_t hm,
                                  uint32_t pf, uint32_t b4)
{
    uint32_t u = v ^ 0x80808080u, h = (u >> s) & mh, l = u & ml;
    uint32_t up = ((l + hm + ((h ^ pf) & 0x01010101u)) >> s) & 0x01010101u;
    return (h + up + b4) ^ 0x80808080u;
}

#if TP_GM_DSP
/* rshift4_i8 for 1 <= s <= 6 (a constant in each loop of end_words) with the DSP extension:
 * half to even is floor((q + k) / 2^s) with k = 2^(s-1) - 1 + p (rshift32_fast), p the parity
 * bit s of q (in bit 0 of every byte: TP_GM_PARITY), k <= 2^(s-1) (no carry out of a byte).
 * s <= 4: the halving SHADD8 of q and k (no overflow), then s - 1 SHADD8s with 0 (s + 2
 * instructions with p's, s = 1: 2). s = 5, 6: the same in offset binary u = q ^ 0x80 (u's parity
 * is q's for s < 7) by the halving UHADD8, every byte shifted by s - 1 (the next byte's bits
 * masked off), less 2^(7-s) = 128 / 2^s by USUB8 (7 instructions). */
TP_ALWAYS_INLINE uint32_t rshift4_dsp(uint32_t q, uint32_t p, uint32_t s)
{
    uint32_t h, one = 0x01010101u, z = 0u, k = s > 1u ? p + ((1u << (s - 1u)) - 1u) * one : p;
    if (s <= 4u) {
        uint32_t i;
        __asm__("shadd8 %0, %1, %2" : "=r"(h) : "r"(q), "r"(k));
        for (i = 1u; i < s; i++) {
            __asm__("shadd8 %0, %0, %1" : "+r"(h) : "r"(z));
        }
    } else {
        uint32_t b = (0x80u >> s) * one;
        __asm__("uhadd8 %0, %1, %2" : "=r"(h) : "r"(q ^ 0x80808080u), "r"(k));
        h = (h >> (s - 1u)) & ((0xFFu >> (s - 1u)) * one);
        __asm__("usub8 %0, %0, %1" : "+r"(h) : "r"(b));
    }
    return h;
}

/* p = bit S of every byte of q in its bit 0, S a literal: one AND of a shifted register (GCC
 * makes the C a shift and an AND). */
#define TP_GM_PARITY(p, q, one, S) __asm__("and %0, %1, %2, lsr #" #S : "=r"(p) : "r"(one), "r"(q))

/* The word v shifted by S (a literal) as rshift4_i8 does: rshift4_dsp; for S = 2 in 3
 * instructions: -k = -(1 + p) = 0xFF - p in every byte by one ORN (0xFE | ~(q >> 2)), subtracted
 * by the halving SHSUB8, then one SHADD8 with 0. */
#define TP_GM_END_WORD(v, S)                                                   \
    do {                                                                       \
        uint32_t p_, h_, one_ = 0x01010101u, fe_ = 0xFEFEFEFEu, z_ = 0u;       \
        if ((S) == 2) {                                                        \
            __asm__("orn %0, %1, %2, lsr #" #S : "=r"(p_) : "r"(fe_), "r"(v)); \
            __asm__("shsub8 %0, %1, %2\n\tshadd8 %0, %0, %3"                   \
                    : "=&r"(h_)                                                \
                    : "r"(v), "r"(p_), "r"(z_));                               \
            (v) = h_;                                                          \
        } else {                                                               \
            TP_GM_PARITY(p_, v, one_, S);                                      \
            (v) = rshift4_dsp((v), p_, (S));                                   \
        }                                                                      \
    } while (0)

/* The first n words of an int8 row at q shifted by S (a literal) as rshift4_i8 does: one a turn;
 * four a turn (their loads together), then one a turn. */
#define TP_GM_END_WORDS1(q, n, S)       \
    do {                                \
        uint32_t v_;                    \
        int8_t *end_ = (q) + 4u * (n);  \
        for (; (q) != end_; (q) += 4) { \
            memcpy(&v_, (q), 4u);       \
            TP_GM_END_WORD(v_, S);      \
            memcpy((q), &v_, 4u);       \
        }                               \
    } while (0)

#define TP_GM_END_WORDS4(q, n, S)               \
    do {                                        \
        uint32_t v0_, v1_, v2_, v3_;            \
        int8_t *end4_ = (q) + 16u * ((n) / 4u); \
        for (; (q) != end4_; (q) += 16) {       \
            memcpy(&v0_, (q), 4u);              \
            memcpy(&v1_, (q) + 4, 4u);          \
            memcpy(&v2_, (q) + 8, 4u);          \
            memcpy(&v3_, (q) + 12, 4u);         \
            TP_GM_END_WORD(v0_, S);             \
            TP_GM_END_WORD(v1_, S);             \
            TP_GM_END_WORD(v2_, S);             \
            TP_GM_END_WORD(v3_, S);             \
            memcpy((q), &v0_, 4u);              \
            memcpy((q) + 4, &v1_, 4u);          \
            memcpy((q) + 8, &v2_, 4u);          \
            memcpy((q) + 12, &v3_, 4u);         \
        }                                       \
        TP_GM_END_WORDS1(q, (n) % 4u, S);       \
    } while (0)

/* The first n words of an int8 row shifted by s (1 to 6) as rshift4_i8 does; four a turn for the
 * shifts a map's rows mostly differ by, 1 to 4. */
static TP_NOINLINE void end_words(int8_t *q, uint32_t n, uint32_t s)
{
    switch (s) {
    case 1u:
        TP_GM_END_WORDS4(q, n, 1);
        break;
    case 2u:
        TP_GM_END_WORDS4(q, n, 2);
        break;
    case 3u:
        TP_GM_END_WORDS4(q, n, 3);
        break;
    case 4u:
        TP_GM_END_WORDS4(q, n, 4);
        break;
    case 5u:
        TP_GM_END_WORDS1(q, n, 5);
        break;
    default:
        TP_GM_END_WORDS1(q, n, 6);
        break;
    }
}
#endif

void tp_gm_end(tp_gm_writer *w)
{
    uint32_t r, j, top = 0, rows = w->rows, cnt = w->row_elems;
    const uint8_t *shifts = w->shifts;
    int32_t e;
    if (w->sums != 0) {
        return;
    }
    for (r = 0; r < rows; r++) {
        top = shifts[r] > top ? shifts[r] : top;
    }
    for (r = 0; r < rows; r++) {
        uint32_t s = top - shifts[r], base = r * cnt;
        if (s == 0u) {
            continue;
        }
        if (s > w->bits) { /* |q| <= lim < 2^(s-1): every value rounds to 0 */
            if (w->map.bytes == 2u) {
                memset((int16_t *)w->map.q + base, 0, 2u * cnt);
            } else {
                memset((int8_t *)w->map.q + base, 0, cnt);
            }
            continue;
        }
        {
            uint32_t half_m1 = (1u << (s - 1u)) - 1u, bias = 0x80000000u >> s;
            if (w->map.bytes == 2u) {
                int16_t *q = (int16_t *)w->map.q + base;
                for (j = 0; j < cnt; j++) {
                    q[j] = (int16_t)rshift32_fast(q[j], s, half_m1, bias);
                }
            } else {
                int8_t *q = (int8_t *)w->map.q + base;
                uint32_t mh = (0xFFu >> s) * 0x01010101u, ml = ((1u << s) - 1u) * 0x01010101u;
                uint32_t hm = half_m1 * 0x01010101u, pf = s == 7u ? 0x01010101u : 0u;
                uint32_t b4 = (128u - (128u >> s)) * 0x01010101u;
                j = 0;
#if TP_GM_DSP
                if (s <= 6u) {
                    end_words(q, cnt / 4u, s);
                    j = cnt & ~3u;
                }
#endif
                for (; j + 8u <= cnt; j += 8u) {
                    uint32_t v0, v1;
                    memcpy(&v0, q + j, 4u);
                    memcpy(&v1, q + j + 4u, 4u);
                    v0 = rshift4_i8(v0, s, mh, ml, hm, pf, b4);
                    v1 = rshift4_i8(v1, s, mh, ml, hm, pf, b4);
                    memcpy(q + j, &v0, 4u);
                    memcpy(q + j + 4u, &v1, 4u);
                }
                if (j + 4u <= cnt) {
                    uint32_t v0;
                    memcpy(&v0, q + j, 4u);
                    v0 = rshift4_i8(v0, s, mh, ml, hm, pf, b4);
                    memcpy(q + j, &v0, 4u);
                    j += 4u;
                }
                for (; j < cnt; j++) {
                    q[j] = (int8_t)rshift32_fast(q[j], s, half_m1, bias);
                }
            }
        }
    }
    e = clamp_i32((int64_t)w->e_c + top);
    memcpy(w->header, &e, 4u);
    w->map.e = e;
}

/* ---- the RELU mask ---- */

/* The bytes of 4 int8 values that bits 0-3 of a mask byte keep (0xFF) or clear (0x00), in
 * memory order whatever the byte order of a word. */
const uint8_t tp_gm_kept4[16][4] = {{0, 0, 0, 0},        {255, 0, 0, 0},     {0, 255, 0, 0},
                                    {255, 255, 0, 0},    {0, 0, 255, 0},     {255, 0, 255, 0},
                                    {0, 255, 255, 0},    {255, 255, 255, 0}, {0, 0, 0, 255},
                                    {255, 0, 0, 255},    {0, 255, 0, 255},   {255, 255, 0, 255},
                                    {0, 0, 255, 255},    {255, 0, 255, 255}, {0, 255, 255, 255},
                                    {255, 255, 255, 255}};

/* The 8 bits of a mask byte from two words' flags (value j's at bit 8j + 7 on a little-endian
 * target): shifted to bits 8j and 8j + 4, gathered to bits 21 + j by one product with
 * 2^0 + 2^7 + 2^14 + 2^21 (the partial products' bits never meet). */
static inline uint32_t gather8(uint32_t k0, uint32_t k1)
{
    return (((k0 >> 7) | (k1 >> 3)) * 0x00204081u) >> 21 & 0xFFu;
}

#if TP_GM_DSP && TP_GM_ASM
/* tp_gm_mask_ge(y, mask, turns, lo4) and tp_gm_mask_in(y, mask, turns, lo4, s4): mask bytes of
 * 32 values a turn (turns >= 1; y and mask word-aligned), Thumb-2 assembly (Cortex-M4, M7, M33;
 * all 14 core registers): a word's GE flags ARE its 4 bits, kept where y >= lo bytewise signed
 * (SSUB8 with lo4: _ge, for hi = 128) or where (y - lo) mod 256 <= span - 1 (USUB8 with lo4, then
 * s4 = span - 1 in every byte less that: _in); MRS copies them to bits 16-19 of a word, and the
 * eight words' nibbles are placed by a shifted ADD each and stored as one word. MRS reads the
 * flags as well (bits 27-31): MSR sets them to C alone first, as the loop's SUBS leaves them (its
 * count stays positive), so their shifted copies add the constant 0x22222000, taken off by the
 * first ADD's 0xDDDDE000. Two turns a loop, the first entered at the second when turns is odd. */
void tp_gm_mask_ge(const int8_t *y, uint8_t *mask, uint32_t turns, uint32_t lo4);
void tp_gm_mask_in(const int8_t *y, uint8_t *mask, uint32_t turns, uint32_t lo4, uint32_t s4);
/* clang-format off */
__asm__(".pushsection .text.tp_gm_mask,\"ax\",%progbits\n"
        ".syntax unified\n"
        ".thumb\n"
        ".macro tp_gm_ge r\n"
        "    ssub8 \\r, \\r, r3\n"
        "    mrs \\r, APSR\n"
        ".endm\n"
        ".macro tp_gm_in r\n"
        "    usub8 \\r, \\r, r3\n"
        "    usub8 \\r, r12, \\r\n"
        "    mrs \\r, APSR\n"
        ".endm\n"
        ".macro tp_gm_turn cmp\n"
        "    ldm r0!, {r4-r11}\n"
        "    \\cmp r4\n"
        "    \\cmp r5\n"
        "    \\cmp r6\n"
        "    \\cmp r7\n"
        "    \\cmp r8\n"
        "    \\cmp r9\n"
        "    \\cmp r10\n"
        "    \\cmp r11\n"
        "    add r4, lr, r4, lsr #16\n"
        "    add r4, r4, r5, lsr #12\n"
        "    add r4, r4, r6, lsr #8\n"
        "    add r4, r4, r7, lsr #4\n"
        "    add r4, r4, r8\n"
        "    add r4, r4, r9, lsl #4\n"
        "    add r4, r4, r10, lsl #8\n"
        "    add r4, r4, r11, lsl #12\n"
        "    str r4, [r1], #4\n"
        ".endm\n"
        ".macro tp_gm_mask32 cmp\n"
        "    mov r4, #0x20000000\n"
        "    movw lr, #0xE000\n"
        "    movt lr, #0xDDDD\n"
        "    lsrs r2, r2, #1\n"
        "    bcs 2f\n"
        "    msr APSR_nzcvq, r4\n"
        "1:\n"
        "    tp_gm_turn \\cmp\n"
        "3:\n"
        "    tp_gm_turn \\cmp\n"
        "    subs r2, r2, #1\n"
        "    bne 1b\n"
        "    pop {r4-r11, pc}\n"
        "2:\n"
        "    add r2, r2, #1\n"
        "    msr APSR_nzcvq, r4\n"
        "    b 3b\n"
        ".endm\n"
        ".p2align 2\n"
        ".global tp_gm_mask_ge\n"
        ".hidden tp_gm_mask_ge\n"
        ".type tp_gm_mask_ge, %function\n"
        ".thumb_func\n"
        "tp_gm_mask_ge:\n"
        "    push {r4-r11, lr}\n"
        "    tp_gm_mask32 tp_gm_ge\n"
        ".size tp_gm_mask_ge, .-tp_gm_mask_ge\n"
        ".p2align 2\n"
        ".global tp_gm_mask_in\n"
        ".hidden tp_gm_mask_in\n"
        ".type tp_gm_mask_in, %function\n"
        ".thumb_func\n"
        "tp_gm_mask_in:\n"
        "    push {r4-r11, lr}\n"
        "    ldr r12, [sp, #36]\n"
        "    tp_gm_mask32 tp_gm_in\n"
        ".size tp_gm_mask_in, .-tp_gm_mask_in\n"
        ".purgem tp_gm_ge\n"
        ".purgem tp_gm_in\n"
        ".purgem tp_gm_turn\n"
        ".purgem tp_gm_mask32\n"
        ".popsection\n" TP_GM_ISA);
/* clang-format on */
#endif

#if TP_GM_DSP
/* 0x80 in the bytes of y (4 int8 values) where (y - lo) mod 256 >= span, for any span up to 128
 * (lo4, span4: lo's and span's byte in every byte), in three instructions (Cortex-M4, M7, M33):
 * USUB8 makes d = (y - lo) mod 256 bytewise, a second USUB8 sets a byte's GE flag where
 * d >= span (no borrow), SEL takes 0x80 there. */
static inline uint32_t at_least4(uint32_t y, uint32_t lo4, uint32_t span4)
{
    uint32_t d, r, h = 0x80808080u, z = 0u;
    __asm__("usub8 %0, %2, %3\n\t"
            "usub8 %0, %0, %4\n\t"
            "sel %1, %5, %6"
            : "=&r"(d), "=r"(r)
            : "r"(y), "r"(lo4), "r"(span4), "r"(h), "r"(z));
    return r;
}
#else
/* The same in SWAR C, for span below 128: d, the bytewise difference, borrows nothing across
 * bytes (each byte's low 7 bits come off 0x80 + its own, the high bit fixed after: lo's low 7
 * bits, then ~lo's high bit, in every byte); d >= span likewise, d's high bit or the low 7 bits'
 * compare. */
static inline uint32_t at_least4(uint32_t y, uint32_t lo4, uint32_t span4)
{
    uint32_t d = ((y | 0x80808080u) - (lo4 & 0x7F7F7F7Fu)) ^ ((y ^ ~lo4) & 0x80808080u);
    return (d | ((d | 0x80808080u) - span4)) & 0x80808080u;
}

/* 0x80 in the bytes of x that are not 0: the low 7 bits plus 0x7F carry into the high bit
 * (never out of the byte), or the high bit is set already. */
static inline uint32_t nonzero4(uint32_t x)
{
    return (((x & 0x7F7F7F7Fu) + 0x7F7F7F7Fu) | x) & 0x80808080u;
}

/* Mask bytes of `groups` groups of 8 values, SWAR (little-endian targets): bit set where the
 * byte is not c (a RELU whose act_min is -128: only y = -128 is clamped). */
static void mask_bytes_ne(const int8_t *y, uint8_t *mask, uint32_t groups, uint32_t c)
{
    uint32_t g, c4 = (c & 0xFFu) * 0x01010101u;
    for (g = 0; g < groups; g++, y += 8) {
        uint32_t w0, w1;
        memcpy(&w0, y, 4u);
        memcpy(&w1, y + 4, 4u);
        mask[g] = (uint8_t)gather8(nonzero4(w0 ^ c4), nonzero4(w1 ^ c4));
    }
}
#endif

/* Mask bytes of `groups` groups of 8 values (little-endian targets): bit set where
 * (y - lo) mod 256 >= span, xor flip. */
static void mask_bytes(const int8_t *y, uint8_t *mask, uint32_t groups, int32_t lo, uint32_t span,
                       uint32_t flip)
{
    uint32_t g, lo4 = ((uint32_t)lo & 0xFFu) * 0x01010101u, span4 = span * 0x01010101u;
    for (g = 0; g < groups; g++, y += 8) {
        uint32_t w0, w1;
        memcpy(&w0, y, 4u);
        memcpy(&w1, y + 4, 4u);
#if TP_GM_DSP
        __asm__("" : "+r"(w0), "+r"(w1)); /* both loaded first: the second load pipelines */
#endif
        mask[g] = (uint8_t)(gather8(at_least4(w0, lo4, span4), at_least4(w1, lo4, span4)) ^ flip);
    }
}

/* The mask bytes of `groups` groups of 8 values (little-endian targets; span 128 only with
 * TP_GM_DSP: mask_bytes' flags are gathered in that byte order). Kept: (y - lo) mod 256 < span; for
 * span >= 128, not (y - hi) mod 256 < 256 - span. The assembly (TP_GM_DSP and TP_GM_ASM) takes
 * the whole turns of 4 groups first when y and mask are word-aligned and 1 <= span <= 256 (hi <=
 * 128: kept is y >= lo for hi = 128, else (y - lo) mod 256 <= span - 1); the rest goes below. */
static void mask_groups(const int8_t *y, uint8_t *mask, uint32_t groups, int32_t lo, int32_t hi,
                        uint32_t span)
{
#if !TP_GM_DSP
    if (span == 255u) { /* kept: y != lo - 1 */
        mask_bytes_ne(y, mask, groups, (uint32_t)(lo - 1));
        return;
    }
#endif
#if TP_GM_DSP && TP_GM_ASM
    if (groups >= 4u && span - 1u < 256u && (((uintptr_t)y | (uintptr_t)mask) & 3u) == 0u) {
        uint32_t turns = groups / 4u, lo4 = ((uint32_t)lo & 0xFFu) * 0x01010101u;
        if (hi == 128) {
            tp_gm_mask_ge(y, mask, turns, lo4);
        } else {
            tp_gm_mask_in(y, mask, turns, lo4, (span - 1u) * 0x01010101u);
        }
        y += turns * 32u;
        mask += turns * 4u;
        groups -= turns * 4u;
    }
#endif
    if (span < 128u) {
        mask_bytes(y, mask, groups, lo, span, 0xFFu);
    } else {
        mask_bytes(y, mask, groups, hi, 256u - span, 0u);
    }
}

void tp_gm_relu_mask(const int8_t *y, uint8_t *mask, uint32_t n, int32_t lo, int32_t hi)
{
    uint32_t i = 0, span = hi > lo ? (uint32_t)(hi - lo) : 0u; /* at most 256 */
    if (tp_little_endian() && (TP_GM_DSP || span != 128u)) {
        i = n & ~7u;
        mask_groups(y, mask, n / 8u, lo, hi, span);
    }
    for (; i < n; i += 8u) { /* byte by byte: the rest, other targets */
        uint32_t b = 0, j;
        for (j = 0; j < 8u && i + j < n; j++) {
            b |= ((uint32_t)((int32_t)y[i + j] - lo) < span ? 1u : 0u) << j;
        }
        mask[i >> 3] = (uint8_t)b;
    }
}

/* ---- the fold ---- */

uint32_t tp_gm_fold_bits(uint32_t n_terms)
{
    uint32_t n = tp_gm_bitlen(n_terms), b = n < TP_GM_ACC_BITS - 8u ? TP_GM_ACC_BITS - 7u - n : 1u;
    return b < TP_GM_FOLD_BITS ? b : TP_GM_FOLD_BITS;
}

void tp_gm_fold_init(tp_gm_fold *f, int32_t e_y, uint32_t n_terms, int32_t c, uint32_t live)
{
    f->bits = tp_gm_fold_bits(n_terms);
    f->live = live;
    f->no_clamp = 0u;
    f->top = c - (int32_t)f->bits;
    f->e = live ? e_y + f->top : 0;
}
