/* test_relu_mask.c - the RELU mask (tp_gm_relu_mask, core/tp_gradmap.c) against its definition,
 * bit j of the mask set exactly where lo <= y[j] < hi, for tests/test_kernels_dsp.py:
 *
 *   test_relu_mask    (this machine: the SWAR C, under ASan and UBSan)
 *   make -C boards/qemu-m4 APP=$PWD/tests/c/test_relu_mask.c APP_ENTRY=relu_mask_main
 *                     (the Cortex-M4's USUB8 and SEL)
 *
 * Every window a RELU or RELU6 can leave, -128 <= lo <= hi + 1 <= 129 (an empty one, spans of
 * 128 and 255, the whole range), over the 256 int8 values in a scrambled order and 7 more (a
 * last group of 7: 32 groups of 8, the Cortex-M4's 8 turns of 32) and over their first 247 (7
 * turns, 3 groups, 7 values), read from a word-aligned buffer into a word-aligned mask and from
 * one 3 bytes past it (the groups one by one). Writes one summary
 * line (on a board, on its link; here on stdout), the first mismatches before it, and exits 1
 * when there are any.
 */
#include <string.h>

#include "tp_gradmap.h"

#include "tp_test_out.h"

#define N 263u

static uint32_t ybuf[(N + 8u) / 4u], mbuf[(N + 31u) / 32u];
static uint32_t rng = 2463534242u;

int relu_mask_main(void)
{
    uint32_t i, j, off, n, cases = 0u, bad = 0u;
    uint8_t *mask = (uint8_t *)mbuf;
    int32_t lo, hi;
    uint8_t vals[N];
#ifdef APP_ENTRY
    (void)tp_board_init();
#endif
    for (i = 0; i < N; i++) {
        vals[i] = (uint8_t)i; /* 256 values, then 0 to 6 again */
    }
    for (i = 255u; i > 0u; i--) { /* a Fisher-Yates shuffle of the first 256 */
        uint8_t t;
        j = tp_test_next(&rng) % (i + 1u);
        t = vals[i];
        vals[i] = vals[j];
        vals[j] = t;
    }
    for (n = N; n >= N - 16u; n -= 16u) {
        for (off = 0; off <= 3u; off += 3u) {
            int8_t *y = (int8_t *)ybuf + off;
            memcpy(y, vals, N);
            for (lo = -128; lo <= 128; lo++) {
                for (hi = lo - 1; hi <= 128; hi++) {
                    memset(mask, 0xA5, sizeof mbuf);
                    tp_gm_relu_mask(y, mask, n, lo, hi);
                    for (i = 0; i < n; i++) {
                        uint32_t got = (uint32_t)mask[i / 8u] >> (i % 8u) & 1u;
                        uint32_t want = lo <= y[i] && y[i] < hi;
                        cases++;
                        if (got != want && bad++ < 8u) {
                            put_text("lo ");
                            put_int(lo);
                            put_text(" hi ");
                            put_int(hi);
                            put_text(" y ");
                            put_int(y[i]);
                            put_text(": ");
                            put_int((int32_t)got);
                            put_text("\n");
                        }
                    }
                }
            }
        }
    }
    return put_summary("relu masks, values ", cases, bad);
}

#ifndef APP_ENTRY
int main(void)
{
    return relu_mask_main();
}
#endif
