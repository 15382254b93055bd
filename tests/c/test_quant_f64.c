/* test_quant_f64.c - the integer binary64 of tp_quant.c (tp_f64) against the machine's double,
 * for tests/test_quant_f64.py: FULLY_CONNECTED's real scale s_in * s_w / s_out and its
 * requantization round(acc * real_scale) must be the double computation's bits.
 *
 *   test_quant_f64 N SEED
 *
 * N random cases of each kind: float32 scales drawn as a model's (normal, around 2^-20..2^4),
 * as any bit pattern (subnormals, zeros, infinities, NaNs, negatives), and near-ties of the
 * final rounding; accumulators of every magnitude up to int64's. Prints "ok <cases>" or the
 * first mismatch and exits 1.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tp_quant.h"

static uint64_t state;

static uint64_t next(void) /* splitmix64 */
{
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* The double requantization as the reference C kernel computed it before tp_f64. */
static int64_t requantize_native(int64_t acc, double real_scale)
{
    const double limit = 4294967296.0;
    double v = (double)acc * real_scale, t, frac;
    if (v != v) {
        return 0;
    }
    v = v < -limit ? -limit : v > limit ? limit : v;
    t = (double)(int64_t)v;
    frac = v - t >= 0.0 ? v - t : t - v;
    if (frac >= 0.5) {
        t += v > 0.0 ? 1.0 : -1.0;
    }
    return (int64_t)t;
}

static int same_double(tp_f64 v, double d)
{
    if (d != d) {
        return v.cls == TP_F64_NAN;
    }
    if (isinf(d)) {
        return v.cls == TP_F64_INF && v.neg == (d < 0);
    }
    if (v.cls != TP_F64_FINITE) {
        return 0;
    }
    if (d == 0.0) {
        return v.mant == 0u;
    }
    return v.neg == (d < 0) && ldexp((double)v.mant, v.exp) == fabs(d);
}

static float model_scale(void)
{
    /* a scale a converter writes: 2^-20 .. 2^4, any mantissa */
    int e = (int)(next() % 25u) + 107;
    return from_bits(((uint32_t)e << 23) | (uint32_t)(next() & 0x7FFFFFu));
}

static float any_float(void)
{
    switch (next() % 8u) {
    case 0:
        return from_bits((uint32_t)(next() & 0x807FFFFFu)); /* zero or subnormal */
    case 1:
        return from_bits((uint32_t)(next() & 0x80000000u) | 0x7F800000u |
                         (uint32_t)(next() % 3u == 0u ? next() & 0x7FFFFFu : 0u)); /* inf/NaN */
    default:
        return from_bits((uint32_t)next());
    }
}

static int64_t any_acc(void)
{
    uint32_t bits = (uint32_t)(next() % 64u);
    uint64_t m = bits == 0u ? 0u : next() >> (64u - bits);
    int64_t v = (int64_t)(m >> 1);
    return (next() & 1u) ? -v : v;
}

static int check(float a, float b, float c, int64_t acc)
{
    double rs = (double)a * (double)b / (double)c;
    tp_f64 mine = tp_real_scale(bits_of(a), bits_of(b), bits_of(c));
    int64_t want = requantize_native(acc, rs), got = tp_requantize_double(acc, &mine);
    if (!same_double(mine, rs) || got != want) {
        printf("mismatch: a %a b %a c %a acc %lld: scale %a (ours mant %llu exp %d cls %u neg "
               "%u), requantized %lld (ours %lld)\n",
               (double)a, (double)b, (double)c, (long long)acc, rs, (unsigned long long)mine.mant,
               mine.exp, mine.cls, mine.neg, (long long)want, (long long)got);
        return 0;
    }
    return 1;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000, i, cases = 0;
    state = argc > 2 ? strtoull(argv[2], NULL, 10) : 1u;
    for (i = 0; i < n; i++) {
        float a = model_scale(), b = model_scale(), c = model_scale();
        int64_t small = (int64_t)(next() % 2000001u) - 1000000;
        /* a model's: accumulators of a few hundred thousand */
        cases += 3;
        if (!check(a, b, c, small) || !check(any_float(), any_float(), any_float(), any_acc()) ||
            !check(a, b, c, any_acc())) {
            return 1;
        }
        {
            /* an accumulator whose product lands on a tie x.5 (or next to it) */
            double rs = (double)a * (double)b / (double)c;
            double target = floor(ldexp((double)(next() % 1000u), 0)) + 0.5;
            int64_t acc = (int64_t)(target / rs);
            int d;
            for (d = -1; d <= 1; d++) {
                cases++;
                if (!check(a, b, c, acc + d)) {
                    return 1;
                }
            }
        }
    }
    {
        /* exact ties: power-of-two scales make acc * scale = k + 0.5 exactly */
        int64_t k;
        for (k = -300; k <= 300; k++) {
            cases += 2;
            if (!check(0.5f, 1.0f, 1.0f, 2 * k + 1) || !check(0.25f, 0.5f, 0.25f, 2 * k + 1)) {
                return 1;
            }
        }
    }
    printf("ok %ld\n", cases);
    return 0;
}
