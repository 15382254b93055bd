/* tp_misc_grad.c - reference float32 input gradients of the ops without weights: average and
 * max pooling, MEAN, PAD and ADD (reference/backward.py). RESHAPE shares its gradient buffer. */
#include "tinyprop.h"
#include "tp_ref.h"

void tp_avg_pool2d_input_grad_f32(const tp_pool_params *p, const tp_shape *in_shape,
                                  const tp_shape *out_shape, const float *dy, float *dx)
{
    int32_t ih = in_shape->h, iw = in_shape->w;
    uint32_t ch = (uint32_t)in_shape->c, cc;
    int32_t oy, ox;
    for (oy = 0; oy < out_shape->h; oy++) {
        int32_t y0 = oy * p->stride[0] - p->pad[0];
        int32_t ys = y0 < 0 ? 0 : y0, ye = y0 + p->k[0] > ih ? ih : y0 + p->k[0];
        for (ox = 0; ox < out_shape->w; ox++) {
            int32_t x0 = ox * p->stride[1] - p->pad[1];
            int32_t xs = x0 < 0 ? 0 : x0, xe = x0 + p->k[1] > iw ? iw : x0 + p->k[1];
            float n = (float)((ye - ys) * (xe - xs));
            for (cc = 0; cc < ch; cc++) {
                float v = dy[(uint32_t)(oy * out_shape->w + ox) * ch + cc] / n;
                int32_t y, x;
                for (y = ys; y < ye; y++) {
                    for (x = xs; x < xe; x++) {
                        float *d = dx + ((uint32_t)y * (uint32_t)iw + (uint32_t)x) * ch + cc;
                        *d = *d + v;
                    }
                }
            }
        }
    }
}

void tp_max_pool2d_input_grad_f32(const tp_pool_params *p, const tp_shape *in_shape,
                                  const int8_t *x, const tp_shape *out_shape, const float *dy,
                                  float *dx)
{
    int32_t oy, ox, ch, c = in_shape->c;
    for (oy = 0; oy < out_shape->h; oy++) {
        for (ox = 0; ox < out_shape->w; ox++) {
            for (ch = 0; ch < c; ch++) {
                float *d = dx + tp_pool_argmax(p, in_shape, x, oy, ox, ch);
                *d = *d + dy[(oy * out_shape->w + ox) * c + ch];
            }
        }
    }
}

void tp_mean_hw_input_grad_f32(const tp_shape *in_shape, const float *dy, float *dx)
{
    uint32_t hw = (uint32_t)(in_shape->h * in_shape->w), ch = (uint32_t)in_shape->c, i, cc;
    float n = (float)hw;
    for (i = 0; i < hw; i++) {
        for (cc = 0; cc < ch; cc++) {
            dx[i * ch + cc] = dx[i * ch + cc] + dy[cc] / n;
        }
    }
}

void tp_pad_input_grad_f32(const tp_pad_params *p, const tp_shape *in_shape,
                           const tp_shape *out_shape, const float *dy, float *dx)
{
    uint32_t y, x, ch, ih = (uint32_t)in_shape->h, iw = (uint32_t)in_shape->w;
    uint32_t cc = (uint32_t)in_shape->c, ow = (uint32_t)out_shape->w;
    for (y = 0; y < ih; y++) {
        for (x = 0; x < iw; x++) {
            for (ch = 0; ch < cc; ch++) {
                float *d = dx + (y * iw + x) * cc + ch;
                *d = *d + dy[((y + p->before[0]) * ow + x + p->before[1]) * cc + ch];
            }
        }
    }
}

void tp_add_input_grad_f32(uint32_t n, const float *dy, float *dx)
{
    uint32_t i;
    for (i = 0; i < n; i++) {
        dx[i] = dx[i] + dy[i];
    }
}
