/* test_fold_sums.c - the fold's scan with the channel sums (tp_gm_fold_sums_of,
 * kernels/ref/tp_weighted_gradq.c) against its definition, for tests/test_kernels_dsp.py:
 *
 *   test_fold_sums    (this machine: no DSP extension, so no sums: it returns 0 and hands none)
 *   make -C boards/qemu-m4 APP=$PWD/tests/c/test_fold_sums.c APP_ENTRY=fold_sums_main
 *                     (the Cortex-M4's scan in assembly: SXTAB16 lanes, MSR APSR_g and SEL)
 *
 * Per case an int8 map of 8, 16, 24 or 64 channels over 1, 2, 5, 6, 11, 12, 255, 256, 257 or 600
 * positions (a run of the lanes' 256 and past it; every count mod 8, the masked scan's turns),
 * values of every magnitude (runs of +-127 and -128, whose sums pass a halfword), with a RELU mask
 * or none. Where the sums are made, each channel's equals the sum of its masked values, every
 * channel is handed once, in order, eight at a time; the masked map and the fold (its exponent,
 * bits, no_clamp and dead channels) equal tp_gm_fold_of's on a copy. With the DSP extension,
 * tp_fold_scan8 as well, called directly on each case's first 256 positions (masked by its mask, by
 * 0xFF, by 0x00, unmasked; every channel equal), against the definitions of the masked map, maxima
 * and sums. Writes one summary line (on a board, on its link; here on stdout), the first mismatches
 * before it, and exits 1 when there are any.
 */
#include <string.h>

#include "kernels/tp_kernels.h"
#include "tp_gradmap.h"

#include "tp_test_out.h"

#define MAX_C 64u
#define MAX_P 600u

static int8_t map_a[MAX_P * MAX_C], map_b[MAX_P * MAX_C];
static uint8_t mask[MAX_P * MAX_C / 8u];
static uint8_t scales[4u * MAX_C]; /* little-endian float32 */
static int32_t got[MAX_C];
static uint32_t rng = 3141592653u, handed, order_bad;

static uint32_t next(void)
{
    return tp_test_next(&rng);
}

#if defined(__ARM_FEATURE_DSP) && !defined(TP_KERNELS_REF_ONLY)
/* The scan itself (kernels/ref/tp_weighted_gradq.c; hidden, linked statically). */
void tp_fold_scan8(int8_t *q, uint32_t n, uint32_t stride, const uint8_t *mask, uint32_t *io);

static int8_t map_c[256u * MAX_C];
static uint8_t mask_c[256u * MAX_C / 8u];

/* tp_fold_scan8 over each 8 channels of the first min(n, 256) positions of map_a (c channels;
 * equal: every channel channel 0's values), masked by mk (NULL: none; fill: every byte fill),
 * from maxima of 0 or random (below 64): the masked map stored back, each channel's running
 * maximum magnitude (-128's is 128) and halfword sum against their definitions. Returns the
 * mismatches. */
static uint32_t scan_bad(uint32_t k, uint32_t c, uint32_t n, const uint8_t *mk, int fill, int equal)
{
    uint32_t o, p, j, bad = 0u;
    n = n < 256u ? n : 256u;
    for (p = 0; p < n * c; p++) {
        map_c[p] = map_a[equal ? p - p % c : p];
    }
    if (fill >= 0) {
        memset(mask_c, fill, n * c / 8u);
        mk = mask_c;
    }
    for (o = 0; o < c; o += 8u) {
        uint32_t io[6], start[2];
        start[0] = (o & 8u) ? next() & 0x3F3F3F3Fu : 0u;
        start[1] = (o & 8u) ? next() & 0x3F3F3F3Fu : 0u;
        io[0] = start[0];
        io[1] = start[1];
        tp_fold_scan8(map_c + o, n, c, mk != NULL ? mk + o / 8u : NULL, io);
        for (j = 0; j < 8u; j++) {
            int32_t sum = 0, v, got_sum;
            uint32_t top = start[j / 4u] >> (8u * (j % 4u)) & 0xFFu, got_top, held = 1u;
            for (p = 0; p < n; p++) {
                v = map_a[p * c + (equal ? 0u : o + j)];
                if (mk != NULL && !(mk[p * (c / 8u) + o / 8u] >> j & 1u)) {
                    v = 0;
                }
                held &= map_c[p * c + o + j] == v;
                sum += v;
                top = (uint32_t)(v < 0 ? -v : v) > top ? (uint32_t)(v < 0 ? -v : v) : top;
            }
            got_top = io[j / 4u] >> (8u * (j % 4u)) & 0xFFu;
            got_sum = (int16_t)(io[2u + 2u * (j / 4u) + (j & 1u)] >> (16u * ((j >> 1) & 1u)));
            if ((got_top != top || got_sum != sum || !held) && bad++ < 4u) {
                put_text("case ");
                put_int((int32_t)k);
                put_text(" scan8 channel ");
                put_int((int32_t)(o + j));
                put_text(": max ");
                put_int((int32_t)got_top);
                put_text(" (");
                put_int((int32_t)top);
                put_text("), sum ");
                put_int(got_sum);
                put_text(" (");
                put_int(sum);
                put_text("), map ");
                put_int((int32_t)held);
                put_text("\n");
            }
        }
    }
    return bad;
}
#endif

/* The callback: sums of channels o .. o + n - 1, in order. */
static void take(const void *ctx, uint32_t o, const int32_t *sums, uint32_t n)
{
    uint32_t j;
    (void)ctx;
    if (o != handed || n != 8u) {
        order_bad++;
    }
    for (j = 0; j < n && o + j < MAX_C; j++) {
        got[o + j] = sums[j];
    }
    handed += n;
}

int fold_sums_main(void);

int fold_sums_main(void)
{
    static const uint32_t chans[] = {8u, 16u, 24u, 64u},
                          poss[] = {1u, 5u, 255u, 256u, 257u, 600u, 2u, 6u, 11u, 12u};
    uint32_t k, i, o, cases = 0u, bad = 0u, scans = 0u, scan_bad_n = 0u;
#ifdef APP_ENTRY
    (void)tp_board_init();
#endif
    for (k = 0; k < 160u; k++) {
        uint32_t c = chans[k % 4u], n = poss[(k / 4u) % 10u], with_mask = k % 3u != 2u, made;
        uint32_t kind = (k / 40u) % 4u;
        tp_weights w;
        tp_gmap ma, mb;
        tp_gm_fold fa, fb;
        for (i = 0; i < n * c; i++) {
            int32_t v = kind == 0u   ? (int32_t)(next() % 256u) - 128
                        : kind == 1u ? (int32_t)(next() % 7u) - 3
                        : kind == 2u ? ((next() & 1u) ? 127 : -128)
                                     : (int32_t)(next() % 256u) - 128;
            if (kind == 3u && i % c == 5u) {
                v = 0; /* a dead channel */
            }
            map_a[i] = (int8_t)v;
        }
        memcpy(map_b, map_a, n * c);
        for (i = 0; i < (n * c + 7u) / 8u; i++) {
            mask[i] = (uint8_t)next();
        }
        for (o = 0; o < c; o++) {
            float sc = (float)(1u + next() % 1000u) * 1.0e-4f;
            uint32_t bits;
            memcpy(&bits, &sc, 4u);
            for (i = 0; i < 4u; i++) {
                scales[4u * o + i] = (uint8_t)(bits >> (8u * i));
            }
            got[o] = 0x7FFFFFFF;
        }
#if defined(__ARM_FEATURE_DSP) && !defined(TP_KERNELS_REF_ONLY)
        scan_bad_n += scan_bad(k, c, n, with_mask ? mask : NULL, -1, 0);
        scan_bad_n += scan_bad(k, c, n, NULL, 0xFF, 0);
        scan_bad_n += scan_bad(k, c, n, NULL, 0x00, 0);
        scan_bad_n += scan_bad(k, c, n, mask, -1, 1);
        scans += 4u;
#endif
        memset(&w, 0, sizeof w);
        w.n_out = c;
        w.scales = scales;
        w.n_scales = c;
        ma.q = map_a;
        ma.bytes = 1u;
        ma.e = -20;
        mb = ma;
        mb.q = map_b;
        handed = 0u;
        order_bad = 0u;
        made = (uint32_t)tp_gm_fold_sums_of(&fa, &ma, n, &w, c, with_mask ? mask : NULL, take, 0);
        tp_gm_fold_of(&fb, &mb, n, &w, c, with_mask ? mask : NULL);
        cases++;
        if (memcmp(map_a, map_b, n * c) != 0 || fa.e != fb.e || fa.bits != fb.bits ||
            fa.live != fb.live || fa.no_clamp != fb.no_clamp ||
            memcmp(fa.dead, fb.dead, sizeof fa.dead) != 0 || order_bad != 0u ||
            handed != (made ? c : 0u)) {
            if (bad++ < 8u) {
                put_text("case ");
                put_int((int32_t)k);
                put_text(": the scan differs from tp_gm_fold_of's, or the sums' order\n");
            }
            continue;
        }
        for (o = 0; made && o < c; o++) {
            int32_t want = 0;
            for (i = 0; i < n; i++) {
                want += map_b[i * c + o]; /* masked already */
            }
            if (got[o] != want && bad++ < 8u) {
                put_text("case ");
                put_int((int32_t)k);
                put_text(" channel ");
                put_int((int32_t)o);
                put_text(": sum ");
                put_int(got[o]);
                put_text(", definition ");
                put_int(want);
                put_text("\n");
            }
        }
    }
    return put_summary(scans != 0u ? "fold sums and scans, maps " : "fold sums, maps ",
                       cases + scans, bad + scan_bad_n);
}

#ifndef APP_ENTRY
int main(void)
{
    return fold_sums_main();
}
#endif
