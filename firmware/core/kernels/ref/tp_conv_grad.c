/* tp_conv_grad.c - reference float32 gradients of CONV_2D and DEPTHWISE_CONV_2D
 * (reference/backward.py), and the bias gradient of every weighted op. */
#include "tinyprop.h"
#include "tp_ref.h"

/* dX += W^T dY. Each dX element sums its products in backward.py's order: taps (kh, kw)
 * raster, then output channels ascending. A tap sends each input element at most one output
 * position, so the loops below (tap, channel, its weight, then the positions) keep that order
 * per element while a real weight w * s_w is made once instead of once per position. */
void tp_conv2d_input_grad_f32(const tp_conv_params *p, const tp_shape *in_shape,
                              const tp_shape *out_shape, const tp_weights *w, const float *dy,
                              float *dx)
{
    uint32_t iw = (uint32_t)in_shape->w, ic = (uint32_t)in_shape->c;
    uint32_t ow = (uint32_t)out_shape->w, oc = (uint32_t)out_shape->c;
    uint32_t s0 = p->stride[0], s1 = p->stride[1];
    uint32_t kh, kw, oy, ox, ch, o, y0, y1, x0, x1, step;
    for (kh = 0; kh < p->k[0]; kh++) {
        tp_tap_range(kh, s0, p->pad[0], (uint32_t)in_shape->h, (uint32_t)out_shape->h, &y0, &y1);
        for (kw = 0; kw < p->k[1]; kw++) {
            uint32_t tap = kh * p->k[1] + kw;
            /* dx index of output (oy, ox)'s input through this tap: base + oy*dy_ + ox*dx_ */
            int32_t base = ((int32_t)kh - p->pad[0]) * (int32_t)(iw * ic) +
                           ((int32_t)kw - p->pad[1]) * (int32_t)ic;
            uint32_t row_step = s0 * iw * ic, col_step = s1 * ic;
            tp_tap_range(kw, s1, p->pad[1], iw, ow, &x0, &x1);
            for (o = 0; o < oc; o++) {
                float sw = tp_weights_scale(w, o);
                const int8_t *wo = tp_weights_row(w, o, &step); /* rows are contiguous */
                for (ch = 0; ch < ic; ch++) {
                    float wr = (float)wo[tap * ic + ch] * sw;
                    for (oy = y0; oy < y1; oy++) {
                        const float *g = dy + (oy * ow + x0) * oc + o;
                        float *d = dx + (int32_t)(oy * row_step + x0 * col_step + ch) + base;
                        for (ox = x0; ox < x1; ox++) {
                            *d = *d + *g * wr;
                            g += oc;
                            d += col_step;
                        }
                    }
                }
            }
        }
    }
}

/* The same for a depthwise convolution: output channel o reads input channel o / multiplier. */
void tp_depthwise_conv2d_input_grad_f32(const tp_conv_params *p, const tp_shape *in_shape,
                                        const tp_shape *out_shape, const tp_weights *w,
                                        const float *dy, float *dx)
{
    uint32_t iw = (uint32_t)in_shape->w, ic = (uint32_t)in_shape->c;
    uint32_t ow = (uint32_t)out_shape->w, oc = (uint32_t)out_shape->c;
    uint32_t s0 = p->stride[0], s1 = p->stride[1], mult = (uint32_t)p->depth_multiplier;
    uint32_t kh, kw, oy, ox, o, y0, y1, x0, x1, step;
    for (kh = 0; kh < p->k[0]; kh++) {
        tp_tap_range(kh, s0, p->pad[0], (uint32_t)in_shape->h, (uint32_t)out_shape->h, &y0, &y1);
        for (kw = 0; kw < p->k[1]; kw++) {
            uint32_t tap = kh * p->k[1] + kw;
            int32_t base = ((int32_t)kh - p->pad[0]) * (int32_t)(iw * ic) +
                           ((int32_t)kw - p->pad[1]) * (int32_t)ic;
            uint32_t row_step = s0 * iw * ic, col_step = s1 * ic;
            tp_tap_range(kw, s1, p->pad[1], iw, ow, &x0, &x1);
            for (o = 0; o < oc; o++) {
                float sw = tp_weights_scale(w, o);
                const int8_t *wo = tp_weights_row(w, o, &step);
                float wr = (float)wo[tap * step] * sw;
                for (oy = y0; oy < y1; oy++) {
                    const float *g = dy + (oy * ow + x0) * oc + o;
                    float *d = dx + (int32_t)(oy * row_step + x0 * col_step + o / mult) + base;
                    for (ox = x0; ox < x1; ox++) {
                        *d = *d + *g * wr;
                        g += oc;
                        d += col_step;
                    }
                }
            }
        }
    }
}

uint32_t tp_input_grad_f32_scratch_bytes(const tp_shape *in_shape, const tp_shape *out_shape)
{
    (void)in_shape;
    (void)out_shape;
    return 0u;
}

/* acc plus dy * 0.0f for n positions oc apart: products with the padding, which backward.py
 * sums too (they matter only when a dy is not finite). */
static float pad_sum(float acc, const float *dy, uint32_t n, uint32_t oc)
{
    uint32_t i;
    for (i = 0; i < n; i++) {
        acc = acc + dy[i * oc] * 0.0f;
    }
    return acc;
}

/* One weight's gradient: the sum over output positions of dY(o) times the input its tap
 * (kh, kw) of channel ch reads there, padding included, in output raster order. */
static float tap_grad(const tp_conv_params *p, const tp_shape *in_shape, const int8_t *x,
                      int32_t zp, float sx, const tp_shape *out_shape, const float *dy, uint32_t o,
                      uint32_t kh, uint32_t kw, uint32_t ch)
{
    uint32_t oh = (uint32_t)out_shape->h, ow = (uint32_t)out_shape->w, oc = (uint32_t)out_shape->c;
    uint32_t iw = (uint32_t)in_shape->w, ic = (uint32_t)in_shape->c;
    uint32_t oy, ox, y0, y1, x0, x1;
    float acc = 0.0f;
    tp_tap_range(kh, p->stride[0], p->pad[0], (uint32_t)in_shape->h, oh, &y0, &y1);
    tp_tap_range(kw, p->stride[1], p->pad[1], iw, ow, &x0, &x1);
    for (oy = 0; oy < oh; oy++) {
        const float *g = dy + oy * ow * oc + o;
        const int8_t *xp;
        if (oy < y0 || oy >= y1) {
            acc = pad_sum(acc, g, ow, oc);
            continue;
        }
        acc = pad_sum(acc, g, x0, oc);
        xp = x +
             ((oy * p->stride[0] + kh - p->pad[0]) * iw + x0 * p->stride[1] + kw - p->pad[1]) * ic +
             ch;
        for (ox = x0; ox < x1; ox++) {
            float xv = (float)((int32_t)*xp - zp) * sx;
            acc = acc + g[ox * oc] * xv;
            xp += p->stride[1] * ic;
        }
        acc = pad_sum(acc, g + x1 * oc, ow - x1, oc);
    }
    return acc;
}

void tp_conv2d_weight_grad_f32(const tp_conv_params *p, const tp_shape *in_shape, const int8_t *x,
                               int32_t x_zp, float x_scale, const tp_shape *out_shape,
                               const float *dy, uint32_t o, float *row)
{
    uint32_t ic = (uint32_t)in_shape->c, n = p->k[0] * p->k[1] * ic, k;
    for (k = 0; k < n; k++) { /* (kh, kw, ch) raster, the row's layout */
        row[k] = tap_grad(p, in_shape, x, x_zp, x_scale, out_shape, dy, o, k / ic / p->k[1],
                          (k / ic) % p->k[1], k % ic);
    }
}

void tp_depthwise_conv2d_weight_grad_f32(const tp_conv_params *p, const tp_shape *in_shape,
                                         const int8_t *x, int32_t x_zp, float x_scale,
                                         const tp_shape *out_shape, const float *dy, uint32_t o,
                                         float *row)
{
    uint32_t n = p->k[0] * p->k[1], k, ch = o / (uint32_t)p->depth_multiplier;
    for (k = 0; k < n; k++) {
        row[k] = tap_grad(p, in_shape, x, x_zp, x_scale, out_shape, dy, o, k / p->k[1], k % p->k[1],
                          ch);
    }
}

uint32_t tp_weight_grad_f32_scratch_bytes(const tp_shape *in_shape, const tp_shape *out_shape)
{
    (void)in_shape;
    (void)out_shape;
    return 0u;
}

float tp_bias_grad_f32(const float *dy, uint32_t positions, uint32_t n_out, uint32_t o)
{
    float db = 0.0f;
    uint32_t i;
    for (i = 0; i < positions; i++) {
        db = db + dy[i * n_out + o];
    }
    return db;
}
