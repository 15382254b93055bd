/* test_update_rows.c - the weight rows' update (tp_optim_update_row, core/tp_optim.c: QAS's
 * delta settled from step / seff's reciprocal where that cannot change the update) against the
 * definition (reference/backward.py: delta = -(lr g / seff) rounded to float32, then
 * stochastic_round's floor(delta) + [r < delta - floor(delta)], r the weight's uniform), for
 * tests/test_kernels_dsp.py:
 *
 *   test_update_rows  (this machine: the portable C, under ASan and UBSan)
 *   make -C boards/qemu-m4 APP=$PWD/tests/c/test_update_rows.c APP_ENTRY=update_rows_main
 *                     (the Cortex-M4's FPU: the fixed-point VCVT, VDIV where it divides)
 *
 * Writes one summary line (on a board, on its link; here on stdout), the first mismatches
 * before it, and exits 1 when there are any.
 *
 * The cases, QAS with and without momentum and plain SGD: rows of 64 weights (-128 too), per row
 * a weight scale and a learning rate; gradients pseudo-random over 2^-40 .. 2^12 of both signs,
 * zeros (rows of mostly +-0: a pruned input's), infinities, NaN, rows with a live bitmap (its
 * clear bits' gradients +-0, -128 weights among them: a 1x1 conv's inputs at their zero point),
 * and gradients aimed at the update's thresholds (delta = n + r + j 2^-24 for j in -3..3, n in
 * -70..69 or -1..0, r the weight's own uniform): where a division and a multiplication by the
 * reciprocal can round differently and the update turns on it.
 */
#include <math.h>
#include <string.h>

#include "tp_optim.h"

#include "tp_test_out.h"

#define N 64u

static uint8_t params[N + 8u];
static uint8_t velocity[4u * N], velocity_def[4u * N];
static int8_t want[N];
static float grad[N];
static uint32_t live[N / 32u];
static uint32_t rng = 1013904223u;

static uint32_t next(void)
{
    return tp_test_next(&rng);
}

/* ---- the definition (tp_optim.c before the reciprocal, reference/backward.py) ---- */

static uint32_t fmix32(uint32_t h)
{
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    return h;
}

static float uniform(uint32_t h)
{
    return (float)(fmix32(h) >> 8) * (1.0f / 16777216.0f);
}

static float floor_f32(float x)
{
    float t = (float)(int32_t)x;
    return x < t ? t - 1.0f : t;
}

static int32_t stochastic_round(float d, float r, float limit)
{
    float fl, frac;
    if (d != d) {
        d = 0.0f;
    }
    d = d < -limit ? -limit : d;
    d = d > limit ? limit : d;
    fl = floor_f32(d);
    frac = d - fl;
    return (int32_t)fl + (r < frac ? 1 : 0);
}

static void define_row(const tp_update *u, uint32_t row_params, float sw)
{
    float seff = sw > u->scale_floor ? sw : u->scale_floor;
    uint32_t k;
    for (k = 0; k < N; k++) {
        uint32_t h = (row_params + k) * 0x9E3779B1u + u->key;
        float v = grad[k], step, delta;
        int32_t nv;
        if (u->velocity != NULL) {
            float old, mv;
            memcpy(&old, velocity_def + 4u * k, 4u);
            mv = u->momentum * old;
            v = mv + grad[k];
            memcpy(velocity_def + 4u * k, &v, 4u);
        }
        step = u->lr * v;
        delta = u->qas ? -(step / seff) : -(step * sw);
        nv = (int32_t)(int8_t)params[row_params + k] + stochastic_round(delta, uniform(h), 256.0f);
        want[k] = (int8_t)(nv > 127 ? 127 : (nv < -127 ? -127 : nv));
    }
}

/* A float32 of 2^e times a random mantissa, either sign. */
static float random_float(int32_t e)
{
    float f = 1.0f + (float)(next() >> 9) * (1.0f / 8388608.0f);
    for (; e > 0; e--) {
        f *= 2.0f;
    }
    for (; e < 0; e++) {
        f *= 0.5f;
    }
    return (next() & 1u) ? -f : f;
}

int update_rows_main(void);

int update_rows_main(void)
{
    uint32_t row, k, kind, cases = 0, bad = 0;
#ifdef APP_ENTRY
    (void)tp_board_init();
#endif
    for (kind = 0; kind < 3u; kind++) { /* QAS; QAS with momentum; plain SGD */
        for (row = 0; row < 3000u; row++) {
            tp_update u;
            float sw = random_float(-(int32_t)(next() % 18u)), seff;
            uint32_t row_params = 1u + row % 7u, aim = row % 3u;
            if (sw < 0.0f) {
                sw = -sw;
            }
            memset(&u, 0, sizeof u);
            u.params = params;
            u.lr = random_float(-(int32_t)(next() % 16u));
            u.lr = u.lr < 0.0f ? -u.lr : u.lr;
            u.momentum = kind == 1u ? 0.9f : 0.0f;
            u.velocity = kind == 1u ? velocity : NULL;
            u.scale_floor = (row & 8u) ? sw * 2.0f : 0.0f;
            u.s_x = 1.0f;
            u.key = next();
            u.qas = kind != 2u;
            seff = sw > u.scale_floor ? sw : u.scale_floor;
            for (k = 0; k < N; k++) {
                uint32_t h = (row_params + k) * 0x9E3779B1u + u.key;
                params[row_params + k] = (uint8_t)next(); /* -128 too (clamped to -127) */
                if (aim != 0u && kind != 1u) {            /* delta = n + r + j 2^-24 */
                    int32_t n = aim == 1u ? (int32_t)(next() % 140u) - 70 : -(int32_t)(next() & 1u);
                    int32_t j = (int32_t)(next() % 7u) - 3;
                    float target = (float)n + uniform(h) + (float)j * (1.0f / 16777216.0f);
                    grad[k] = -(target * (u.qas ? seff : 1.0f / sw)) / u.lr;
                } else {
                    uint32_t pick = next() % (row % 5u == 4u ? 4u : 64u); /* or mostly +-0 */
                    grad[k] = pick == 0u   ? 0.0f
                              : pick == 1u ? -0.0f
                              : pick == 2u ? INFINITY
                              : pick == 3u ? -INFINITY
                              : pick == 4u ? NAN
                                           : random_float((int32_t)(next() % 53u) - 40);
                }
                if (kind == 1u) {
                    float v0 = random_float((int32_t)(next() % 20u) - 12);
                    memcpy(velocity + 4u * k, &v0, 4u);
                    memcpy(velocity_def + 4u * k, &v0, 4u);
                }
            }
            if (kind != 1u && row % 4u == 1u) { /* a live bitmap: its clear bits' gradients +-0 */
                for (k = 0; k < N / 32u; k++) {
                    live[k] = next() & next(); /* about one in four set */
                }
                live[row % 3u == 0u ? 0u : 1u] = row % 9u == 1u ? 0u
                                                                : live[row % 3u == 0u ? 0u : 1u];
                for (k = 0; k < N; k++) {
                    if ((live[k >> 5] >> (k & 31u) & 1u) == 0u) {
                        grad[k] = (next() & 1u) ? 0.0f : -0.0f;
                        if (next() % 8u == 0u) { /* -128 beside them, or alone */
                            params[row_params + k] = 0x80u;
                        }
                    }
                }
            }
            define_row(&u, row_params, sw);
            tp_optim_update_row(&u, row_params, 0u, grad, N, sw,
                                kind != 1u && row % 4u == 1u ? live : NULL);
            for (k = 0; k < N; k++) {
                cases++;
                if ((int8_t)params[row_params + k] != want[k] ||
                    (kind == 1u && memcmp(velocity + 4u * k, velocity_def + 4u * k, 4u) != 0)) {
                    if (bad++ < 8u) {
                        put_text("kind ");
                        put_int((int32_t)kind);
                        put_text(" row ");
                        put_int((int32_t)row);
                        put_text(" weight ");
                        put_int((int32_t)k);
                        put_text(": ");
                        put_int((int8_t)params[row_params + k]);
                        put_text(", definition ");
                        put_int(want[k]);
                        put_text("\n");
                    }
                }
            }
        }
    }
    return put_summary("update rows, weights ", cases, bad);
}

#ifndef APP_ENTRY
int main(void)
{
    return update_rows_main();
}
#endif
