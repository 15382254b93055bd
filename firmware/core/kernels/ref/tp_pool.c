/* tp_pool.c - reference AVERAGE_POOL_2D and MEAN over H, W (reference/forward.py). */
#include "tinyprop.h"
#include "tp_ref.h"

void tp_avg_pool2d_s8(const tp_pool_params *p, const tp_shape *in_shape, const int8_t *in,
                      const tp_shape *out_shape, int8_t *out)
{
    int32_t h = in_shape->h, w = in_shape->w, c = in_shape->c;
    int32_t oh = out_shape->h, ow = out_shape->w;
    int32_t oy, ox, ch, y, x;
    for (oy = 0; oy < oh; oy++) {
        int32_t y0 = oy * p->stride[0] - p->pad[0];
        int32_t ys = y0 > 0 ? y0 : 0, ye = y0 + p->k[0] < h ? y0 + p->k[0] : h;
        for (ox = 0; ox < ow; ox++) {
            int32_t x0 = ox * p->stride[1] - p->pad[1];
            int32_t xs = x0 > 0 ? x0 : 0, xe = x0 + p->k[1] < w ? x0 + p->k[1] : w;
            /* the window covers only the input taps inside the image (loader: at least one) */
            int64_t n = (int64_t)(ye - ys) * (xe - xs);
            for (ch = 0; ch < c; ch++) {
                int64_t sum = 0;
                for (y = ys; y < ye; y++) {
                    for (x = xs; x < xe; x++) {
                        sum += in[(y * w + x) * c + ch];
                    }
                }
                out[(oy * ow + ox) * c + ch] = tp_clamp_act(tp_rounded_div(sum, n), p->act_min,
                                                            p->act_max);
            }
        }
    }
}

void tp_mean_hw_s8(const tp_mean_params *p, const tp_shape *in_shape, const int8_t *in, int8_t *out)
{
    int32_t hw = in_shape->h * in_shape->w, c = in_shape->c;
    int32_t ch, i;
    for (ch = 0; ch < c; ch++) {
        int64_t sum = 0;
        for (i = 0; i < hw; i++) {
            sum += in[i * c + ch] - p->in_zp;
        }
        out[ch] = tp_clamp_act(tp_mbqm(sum, p->mult, p->shift) + p->out_zp, -128, 127);
    }
}
