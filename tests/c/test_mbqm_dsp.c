/* test_mbqm_dsp.c - tp_dsp_mbqm32 (kernels/arm/tp_dsp.c: a pruned channel's constant output,
 * the bias requantized in 32-bit halves) against the reference tp_mbqm, for
 * tests/test_kernels_dsp.py: built with TP_KERNELS_DSP_EMULATION under ASan and UBSan.
 *
 * The cases: every right shift e of 0..31, multipliers 0, 1, 2^30, 2^31 - 1 and ones with 0 to
 * 30 trailing zero bits (so that x m / 2^31 and its shift can land exactly halfway: both ties
 * of the doubling high multiply and of the rounding shift), times x of int32's extremes, powers
 * of two and their neighbours, both signs, and pseudo-random ones. Prints one summary line (the
 * first mismatches before it) and exits 1 when there are any.
 */
#include <stdint.h>
#include <stdio.h>

#include "tp_quant.h"

/* kernels/arm/tp_dsp.h's (the library is built with the intrinsics emulated; this file is not) */
int32_t tp_dsp_mbqm32(int32_t x, int32_t m, uint32_t e);

static uint32_t rng = 12345u;

static uint32_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}

int main(void)
{
    int32_t xs[160], ms[80];
    uint32_t nx = 0, nm = 0, i, j, e, cases = 0, bad = 0;
    xs[nx++] = (int32_t)0x80000000u;
    xs[nx++] = 0x7FFFFFFF;
    xs[nx++] = 0;
    for (i = 0; i < 31u; i++) {
        int32_t p = (int32_t)1 << i;
        xs[nx++] = p;
        xs[nx++] = -p;
        xs[nx++] = p + 1;
        xs[nx++] = -p - 1;
    }
    while (nx < 160u) {
        xs[nx++] = (int32_t)next();
    }
    ms[nm++] = 0;
    ms[nm++] = 1;
    ms[nm++] = 1 << 30;
    ms[nm++] = 0x7FFFFFFF;
    for (i = 0; i < 31u; i++) { /* an odd mantissa above 2^29, shifted: i trailing zeros */
        ms[nm++] = (int32_t)((((next() & 0x3FFFFFFFu) | 0x40000001u) >> i) << i);
    }
    while (nm < 80u) {
        ms[nm++] = (int32_t)(next() & 0x7FFFFFFFu);
    }
    for (i = 0; i < nx; i++) {
        for (j = 0; j < nm; j++) {
            for (e = 0; e < 32u; e++) {
                int64_t want = tp_mbqm(xs[i], ms[j], -(int32_t)e);
                int32_t got = tp_dsp_mbqm32(xs[i], ms[j], e);
                cases++;
                if ((int64_t)got != want) {
                    if (bad++ < 8u) {
                        printf("x %ld m %ld e %lu: %ld, tp_mbqm %lld\n", (long)xs[i], (long)ms[j],
                               (unsigned long)e, (long)got, (long long)want);
                    }
                }
            }
        }
    }
    printf("mbqm cases %lu, mismatches %lu\n", (unsigned long)cases, (unsigned long)bad);
    return bad != 0u;
}
