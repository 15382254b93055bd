/* test_bias_sums_dsp.c - the bias gradients' sums of the Cortex-M DSP kernels
 * (tp_arm_bias_sums_q, kernels/arm/tp_conv_weight_grad_arm.c: four channels of an int8 map a
 * word, summed in halfword lanes) against the reference's (tp_bias_sums_q) and the definition,
 * for tests/test_kernels_dsp.py:
 *
 *   test_bias_sums_dsp (this machine: the build_program driver, the intrinsics emulated)
 *   make -C boards/qemu-m4 APP=$PWD/tests/c/test_bias_sums_dsp.c APP_ENTRY=bias_test_main
 *                      (the Cortex-M4's own SXTAB16)
 *
 * Writes one summary line (on a board, on its link; here on stdout), the first mismatches
 * before it, and exits 1 when there are any.
 *
 * The cases: int8 maps all -128, all 127, all -127 (the lanes' extremes over a run of 256
 * positions and beyond), alternating extremes and pseudo-random values, and an int16 map (the
 * reference's path); 1 to 36 channels (multiples of 4 and not), positions 0 to 2,100 (a run of
 * the lanes, one short of it, one past it, several); every block of up to 16 channels as the
 * training step asks for them, and blocks starting at an odd channel (the reference's path).
 */
#include <string.h>

#include "kernels/tp_kernels.h"
#include "tp_gradmap.h"

#include "tp_test_out.h"

#define MAP_BYTES 65536u

static uint8_t map_buf[TP_GM_HEADER + MAP_BYTES];
static uint32_t rng = 2463534242u;

static uint32_t next(void)
{
    return tp_test_next(&rng);
}

/* The value of pattern `kind` at element i (int8 maps: -128..127; int16: any). */
static int32_t value(uint32_t kind, uint32_t i)
{
    switch (kind) {
    case 0:
        return -128;
    case 1:
        return 127;
    case 2:
        return -127;
    case 3:
        return (i & 1u) ? 127 : -128;
    case 4:
        return (int32_t)(next() & 0xFFu) - 128;
    default:
        return (int32_t)(next() & 0xFFFFu) - 32768;
    }
}

int bias_test_main(void);

int bias_test_main(void)
{
    static const uint32_t counts[] = {1u, 2u, 3u, 4u, 5u, 7u, 8u, 12u, 13u, 16u, 20u, 36u};
    static const uint32_t positions[] = {0u, 1u, 3u, 4u, 5u, 255u, 256u, 257u, 515u, 1024u, 2100u};
    uint32_t kind, a, b, o0, nc, j, cases = 0, bad = 0;
    int64_t got[16], ref[16];
#ifdef APP_ENTRY
    (void)tp_board_init();
#endif
    for (kind = 0; kind < 6u; kind++) {
        uint32_t bytes = kind == 5u ? 2u : 1u;
        tp_gmap dy = tp_gm_at(map_buf, bytes == 1u ? TP_GRAD_INT8 : TP_GRAD_INT16);
        for (a = 0; a < sizeof counts / sizeof counts[0]; a++) {
            for (b = 0; b < sizeof positions / sizeof positions[0]; b++) {
                uint32_t n_out = counts[a], np = positions[b], i, start;
                if (np * n_out * bytes > MAP_BYTES) {
                    continue;
                }
                for (i = 0; i < np * n_out; i++) {
                    tp_gm_set(&dy, i, value(kind, i));
                }
                for (start = 0; start < 2u; start++) { /* blocks from channel 0, or from 1 */
                    for (o0 = start; o0 < n_out; o0 += nc) {
                        nc = n_out - o0 < 16u ? n_out - o0 : 16u;
                        memset(got, 0x5A, sizeof got);
                        tp_arm_bias_sums_q(&dy, np, n_out, o0, nc, got);
                        tp_bias_sums_q(&dy, np, n_out, o0, nc, ref);
                        for (j = 0; j < nc; j++) {
                            int64_t want = 0;
                            for (i = 0; i < np; i++) {
                                want += tp_gm_get(&dy, i * n_out + o0 + j);
                            }
                            if (got[j] != want || ref[j] != want) {
                                if (bad++ < 8u) {
                                    put_text("kind ");
                                    put_int((int32_t)kind);
                                    put_text(" channels ");
                                    put_int((int32_t)n_out);
                                    put_text(" positions ");
                                    put_int((int32_t)np);
                                    put_text(" channel ");
                                    put_int((int32_t)(o0 + j));
                                    put_text(": ");
                                    put_int((int32_t)got[j]);
                                    put_text(", reference ");
                                    put_int((int32_t)ref[j]);
                                    put_text(", sum ");
                                    put_int((int32_t)want);
                                    put_text("\n");
                                }
                            }
                            cases++;
                        }
                    }
                }
            }
        }
    }
    return put_summary("bias sums ", cases, bad);
}

#ifndef APP_ENTRY
int main(void)
{
    return bias_test_main();
}
#endif
