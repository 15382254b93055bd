/* test_fold_sums.c - the fold's scan with the channel sums (tp_gm_fold_sums_of,
 * kernels/ref/tp_weighted_gradq.c) against its definition, for tests/test_kernels_dsp.py:
 *
 *   test_fold_sums    (this machine: no DSP extension, so no sums: it returns 0 and hands none)
 *   make -C boards/qemu-m4 APP=$PWD/tests/c/test_fold_sums.c APP_ENTRY=fold_sums_main
 *                     (the Cortex-M4's scan in assembly: SXTAB16 lanes, MSR APSR_g and SEL)
 *
 * Per case an int8 map of 8, 16, 24 or 64 channels over 1, 5, 255, 256, 257 or 600 positions
 * (a run of the lanes' 256 and past it), values of every magnitude (runs of +-127 and -128, whose
 * sums pass a halfword), with a RELU mask or none. Where the sums are made, each channel's equals
 * the sum of its masked values, every channel is handed once, in order, eight at a time; the
 * masked map and the fold (its exponent, bits, no_clamp and dead channels) equal
 * tp_gm_fold_of's on a copy. Writes one summary line (on a board, on its link; here on stdout),
 * the first mismatches before it, and exits 1 when there are any.
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
    static const uint32_t chans[] = {8u, 16u, 24u, 64u}, poss[] = {1u, 5u, 255u, 256u, 257u, 600u};
    uint32_t k, i, o, cases = 0u, bad = 0u;
#ifdef APP_ENTRY
    (void)tp_board_init();
#endif
    for (k = 0; k < 96u; k++) {
        uint32_t c = chans[k % 4u], n = poss[(k / 4u) % 6u], with_mask = k % 3u != 2u, made;
        uint32_t kind = (k / 24u) % 4u;
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
    return put_summary("fold sums, maps ", cases, bad);
}

#ifndef APP_ENTRY
int main(void)
{
    return fold_sums_main();
}
#endif
