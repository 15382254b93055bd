/* tp_fmath.c - exp and log from IEEE +, -, *, / only (mirrors host/tinyprop/reference/fmath.py), so
 * the loss is the same bits on x86, Cortex-M4F and a soft-float RISC-V. */
#include "tp_fmath.h"
#include "tinyprop.h"

#include <stdint.h>

static float bits_to_float(uint32_t u)
{
    union {
        uint32_t u;
        float f;
    } v;
    v.u = u;
    return v.f;
}

static uint32_t float_to_bits(float f)
{
    union {
        uint32_t u;
        float f;
    } v;
    v.f = f;
    return v.u;
}

float tp_exp_neg(float x)
{
    static const float c[7] = {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};
    float xc = x < -87.0f ? -87.0f : x;
    float k, t, r, p;
    int32_t ki;
    int i;
    if (x != x) {
        return x; /* NaN (a loss the step then skips): converting it to an integer is undefined */
    }
    t = xc * 1.44269504f + 0.5f;
    k = (float)(int32_t)t;
    k = t < k ? k - 1.0f : k;
    r = xc - k * 0.693145751953125f;
    r = r - k * 1.428606765330187e-06f;
    p = c[0];
    for (i = 1; i < 7; i++) {
        p = p * r + c[i];
    }
    ki = (int32_t)k;
    if (x < -87.0f) {
        return 0.0f;
    }
    return p * bits_to_float((uint32_t)(ki + 127) << 23);
}

float tp_log_pos(float x)
{
    static const float c[4] = {2.0f / 9, 2.0f / 7, 2.0f / 5, 2.0f / 3};
    uint32_t b = float_to_bits(x);
    int32_t e = (int32_t)((b >> 23) & 0xFFu) - 127;
    float m = bits_to_float((b & 0x007FFFFFu) | (127u << 23));
    float f, s, z, poly, ef;
    int i;
    if (m > 1.41421356f) {
        m = m * 0.5f;
        e += 1;
    }
    f = m - 1.0f;
    s = f / (2.0f + f);
    z = s * s;
    poly = c[0];
    for (i = 1; i < 4; i++) {
        poly = poly * z + c[i];
    }
    ef = (float)e;
    return ef * 0.693145751953125f + (ef * 1.428606765330187e-06f + (s + s + s * (z * poly)));
}
