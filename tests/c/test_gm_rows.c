/* test_gm_rows.c - the map writer's rows of int32 values (tp_gm_row_i32, then tp_gm_end;
 * core/tp_gradmap.c) against the definition (gradmap.produce: each row rounded half to even by
 * its own shift, the bit length of its largest magnitude less the map's bits, saturated to
 * +-(2^bits - 1), then rounded again to the map's largest shift), for tests/test_gradmap.py:
 *
 *   test_gm_rows      (this machine: the C passes, under ASan and UBSan)
 *   make -C boards/qemu-m4 APP=$PWD/tests/c/test_gm_rows.c APP_ENTRY=gm_rows_main
 *                     (the Thumb-2 assembly passes of a Cortex-M build)
 *
 * Writes one summary line (on a board, on its link; here on stdout), the first mismatches
 * before it, and exits 1 when there are any.
 *
 * The cases, int8 and int16 maps, rows of 8, 24, 48, 64 and 72 values (the OR's whole passes:
 * every count of eights mod 4, fewer than 4), of 8, 12, 24, 48, 60, 64, 68 and 72 (the
 * rounding's: every count of words mod 4, fewer than 4) and of 61 (a tail): pseudo-random values of
 * every bit length 0 to 31 in a row; a row whose largest magnitude is -2^B with every other below
 * 2^B (its length is B + 1, not B), with and without a value that rounds to +-2^bits; values just
 * below 2^B that round up to 2^bits (saturated); exact ties (2k + 1) 2^(s-1) of both signs; int32's
 * extremes. Then a map of rows exact at their shifts, 1 to 7 below the map's, every int8 value in
 * them. Then a sink's channel sums (tp_gm_begin_sums: the values whose mask bit is set) of 8, 16
 * and 24 channels, rows of whole pixels (the two-channel passes) and rows that are not (the general
 * loop), values of every bit length and int32's extremes, each sum counted as a value.
 */
#include <string.h>

#include "tp_gradmap.h"

#include "tp_test_out.h"

#define ROWS 8u
#define MAX_ELEMS 72u
#define SINK_ELEMS 64u

static uint8_t map_buf[TP_GM_HEADER + 2u * ROWS * MAX_ELEMS];
static int32_t vals[ROWS][MAX_ELEMS];
static uint32_t rng = 88172645u;

static uint32_t next(void)
{
    return tp_test_next(&rng);
}

/* x / 2^s rounded half to even (s >= 0), in int64. */
static int64_t rne(int64_t x, uint32_t s)
{
    int64_t q, r, half;
    if (s == 0u) {
        return x;
    }
    if (s > 40u) {
        return 0;
    }
    q = x >= 0 ? x >> s : -((-x) >> s) - (((-x) & (((int64_t)1 << s) - 1)) != 0);
    r = x - q * ((int64_t)1 << s); /* 0 <= r < 2^s */
    half = (int64_t)1 << (s - 1u);
    return q + ((r > half || (r == half && (q & 1))) ? 1 : 0);
}

static uint32_t bitlen(uint64_t m)
{
    uint32_t n = 0;
    while (m != 0u) {
        n++;
        m >>= 1;
    }
    return n;
}

/* A random value of bit length at most n (n <= 31), either sign. */
static int32_t random_len(uint32_t n)
{
    uint32_t m = n == 0u ? 0u : (n >= 32u ? 0xFFFFFFFFu : (1u << n) - 1u);
    int64_t v = (int64_t)(next() & m);
    return (int32_t)((next() & 1u) ? -v : v);
}

/* Row r's values for case k (elems values). */
static void fill(uint32_t k, uint32_t r, uint32_t elems)
{
    uint32_t j, B = 8u + (k * 7u + r * 3u) % 23u, s = B > 7u ? B - 7u : 1u;
    int32_t *v = vals[r];
    for (j = 0; j < elems; j++) {
        v[j] = random_len(k % 4u == 0u ? (j * 5u + r) % 32u : B - 1u - (j % 3u));
    }
    switch ((k + r) % 8u) {
    case 1: /* -2^B, the others below 2^B */
        v[(k + r) % elems] = -(int32_t)(1u << B);
        break;
    case 2: /* -2^B, and a value that rounds up to 2^bits at shift B - 7 */
        v[(k + r) % elems] = -(int32_t)(1u << B);
        v[(k + r + 7u) % elems] = (int32_t)((1u << B) - 1u);
        break;
    case 3: /* values rounding up to +-2^bits (saturated) */
        v[r % elems] = (int32_t)((1u << B) - 1u);
        v[(r + 3u) % elems] = -(int32_t)((1u << B) - 1u);
        break;
    case 4: /* exact ties at the row's shift */
        for (j = 0; j < elems; j += 2u) {
            int32_t t = (int32_t)((2u * (next() % 100u) + 1u) << (s - 1u));
            v[j] = (j & 2u) ? -t : t;
        }
        break;
    case 5: /* int32's extremes */
        v[r % elems] = r & 1u ? (int32_t)0x80000000u : 0x7FFFFFFF;
        break;
    case 6: /* small rows: every length up to 8 */
        for (j = 0; j < elems; j++) {
            v[j] = random_len(r);
        }
        if (r == 7u) {
            v[elems - 1u] = -128;
        }
        break;
    default:
        break;
    }
}

/* Row r's values for end case k (k >= 400; elems values): row 0 of shift 10 (its largest
 * magnitude 127 2^10), the others of shift 10 - d, d = 1 to 7 by k, their values q 2^(10-d),
 * exact at their own shift, the qs over rows 1 to 7 every int8 value -127 to 127 in rows of 60
 * values or more: the map's re-rounding of every value by every shift tp_gm_end takes word by
 * word. */
static void fill_end(uint32_t k, uint32_t r, uint32_t elems)
{
    uint32_t j, d = 1u + (k - 400u) % 7u, sh = r == 0u ? 10u : 10u - d;
    int32_t *v = vals[r];
    for (j = 0; j < elems; j++) {
        int32_t q = r == 0u ? random_len(7u) : (int32_t)(((r - 1u) * elems + j + k) % 255u) - 127;
        v[j] = q * (int32_t)(1u << sh);
    }
    v[(k + r) % elems] = (k & 1u ? -127 : 127) * (int32_t)(1u << sh);
}

/* The sink cases: channel sums against int64 sums of the kept values; returns mismatches. */
static uint32_t sink_cases(uint32_t *cases)
{
    static int64_t sums[24];
    static uint8_t mask[ROWS * MAX_ELEMS / 8u];
    uint32_t k, r, j, c, bad = 0;
    for (k = 0; k < 300u; k++) {
        uint32_t channels = 8u * (1u + k % 3u), whole = k % 4u != 3u;
        uint32_t elems = whole ? channels * (SINK_ELEMS / channels - k % 2u) : 60u;
        static int64_t buf8[TP_GM_HEADER / 8u + 24u]; /* the sums 8-byte aligned */
        uint8_t *buf = (uint8_t *)buf8;
        int64_t want[24];
        tp_gm_writer w;
        for (j = 0; j < sizeof mask; j++) {
            mask[j] = (uint8_t)next();
        }
        for (c = 0; c < channels; c++) {
            want[c] = 0;
        }
        tp_gm_begin_sums(&w, buf, ROWS, elems, channels, mask, -3);
        for (r = 0; r < ROWS; r++) {
            for (j = 0; j < elems; j++) {
                uint32_t i = r * elems + j;
                int32_t x = random_len((k * 3u + j) % 32u);
                x = (k + j) % 29u == 0u   ? (int32_t)0x80000000u
                    : (k + j) % 31u == 0u ? 0x7FFFFFFF
                                          : x;
                vals[r][j] = x;
                if (mask[i >> 3] >> (i & 7u) & 1u) {
                    want[i % channels] += x;
                }
            }
            tp_gm_row_i32(&w, r, vals[r]);
        }
        memcpy(sums, buf + TP_GM_HEADER, 8u * channels);
        for (c = 0; c < channels; c++) {
            (*cases)++;
            if (sums[c] != want[c] && bad++ < 8u) {
                put_text("sink case ");
                put_int((int32_t)k);
                put_text(" channel ");
                put_int((int32_t)c);
                put_text(" differs\n");
            }
        }
    }
    return bad;
}

int gm_rows_main(void);

int gm_rows_main(void)
{
    /* rows of 8 n8 values and of 4 n4 values, n8 and n4 mod 4 each of 0 to 3 and below 4 (or_mag's
     * and round_i8's passes), a tail */
    static const uint32_t sizes[10] = {61u, 64u, 60u, 72u, 68u, 8u, 12u, 61u, 24u, 48u};
    uint32_t k, r, j, fmt, cases = 0, bad = 0;
    uint8_t shifts[ROWS];
#ifdef APP_ENTRY
    (void)tp_board_init();
#endif
    for (fmt = 0; fmt < 2u; fmt++) {
        uint32_t format = fmt == 0u ? TP_GRAD_INT8 : TP_GRAD_INT16, bits = tp_gm_bits(format);
        int32_t lim = ((int32_t)1 << bits) - 1;
        for (k = 0; k < 400u + 70u; k++) {
            uint32_t elems = sizes[k % 10u], top = 0, rs[ROWS];
            int32_t e_v = (int32_t)(k % 7u) - 3;
            tp_gm_writer w;
            tp_gmap map;
            int32_t e;
            tp_gm_begin(&w, map_buf, format, ROWS, elems, 0u, shifts, e_v);
            for (r = 0; r < ROWS; r++) {
                uint64_t m = 0;
                if (k < 400u) {
                    fill(k, r, elems);
                } else {
                    fill_end(k, r, elems);
                }
                tp_gm_row_i32(&w, r, vals[r]);
                for (j = 0; j < elems; j++) {
                    int64_t a = vals[r][j] < 0 ? -(int64_t)vals[r][j] : vals[r][j];
                    m = (uint64_t)a > m ? (uint64_t)a : m;
                }
                rs[r] = bitlen(m) > bits ? bitlen(m) - bits : 0u;
                top = rs[r] > top ? rs[r] : top;
            }
            tp_gm_end(&w);
            map = tp_gm_at(map_buf, format);
            memcpy(&e, map_buf, 4u);
            for (r = 0; r < ROWS; r++) {
                for (j = 0; j < elems; j++) {
                    int64_t q = rne(vals[r][j], rs[r]);
                    q = q > lim ? lim : q < -lim ? -lim : q;
                    q = rne(q, top - rs[r]);
                    cases++;
                    if (tp_gm_get(&map, r * elems + j) != q || e != e_v + (int32_t)top) {
                        if (bad++ < 8u) {
                            put_text("case ");
                            put_int((int32_t)k);
                            put_text(" bits ");
                            put_int((int32_t)bits);
                            put_text(" row ");
                            put_int((int32_t)r);
                            put_text(" value ");
                            put_int(vals[r][j]);
                            put_text(": ");
                            put_int(tp_gm_get(&map, r * elems + j));
                            put_text(" exponent ");
                            put_int(e);
                            put_text(", definition ");
                            put_int((int32_t)q);
                            put_text(" exponent ");
                            put_int(e_v + (int32_t)top);
                            put_text("\n");
                        }
                    }
                }
            }
        }
    }
    bad += sink_cases(&cases);
    return put_summary("map rows, values ", cases, bad);
}

#ifndef APP_ENTRY
int main(void)
{
    return gm_rows_main();
}
#endif
