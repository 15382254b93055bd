/* tp_pool_arm.c - AVERAGE_POOL_2D for the Cortex-M targets, bit for bit the reference kernel
 * (kernels/ref/tp_pool.c): the same window and rounding, in 32-bit arithmetic. The reference
 * sums in int64 and divides with a 64-bit division (a library call on 32-bit cores); an int8
 * window sum is below 128 * 255 * 255 < 2^23 in magnitude, so int32 holds it exactly and the M4's
 * SDIV divides it (C's truncating division, as tp_rounded_div's). Loop order: output pixel, then
 * channel, then the window's in-image taps. */
#include "tinyprop.h"
#include "tp_dsp.h"

#if TP_KERNELS_DSP

void tp_arm_avg_pool2d_s8(const tp_pool_params *p, const tp_shape *in_shape, const int8_t *in,
                          const tp_shape *out_shape, int8_t *out)
{
    int32_t h = in_shape->h, w = in_shape->w, c = in_shape->c;
    int32_t oy, ox, ch, y, x;
    for (oy = 0; oy < out_shape->h; oy++) {
        int32_t y0 = oy * p->stride[0] - p->pad[0];
        int32_t ys = y0 > 0 ? y0 : 0, ye = y0 + p->k[0] < h ? y0 + p->k[0] : h;
        for (ox = 0; ox < out_shape->w; ox++) {
            int32_t x0 = ox * p->stride[1] - p->pad[1];
            int32_t xs = x0 > 0 ? x0 : 0, xe = x0 + p->k[1] < w ? x0 + p->k[1] : w;
            int32_t n = (ye - ys) * (xe - xs), half = n / 2; /* n >= 1: the loader's window */
            const int8_t *base = in + (ys * w + xs) * c;
            for (ch = 0; ch < c; ch++, out++) {
                const int8_t *row = base + ch;
                int32_t sum = 0;
                for (y = ys; y < ye; y++, row += w * c) {
                    const int8_t *t = row;
                    for (x = xs; x < xe; x++, t += c) {
                        sum += *t;
                    }
                }
                /* tp_rounded_div: half away from zero, then C's truncating division */
                *out = tp_dsp_clamp((sum > 0 ? sum + half : sum - half) / n, p->act_min,
                                    p->act_max);
            }
        }
    }
}

#else
typedef int tp_pool_arm_unused; /* ISO C wants a declaration in every translation unit */
#endif
