/* tp_ref.h - what the reference kernels share: activation clamping, requantization, the
 * in-image part of a kernel window and a max pool window's largest input. */
#ifndef TP_REF_H
#define TP_REF_H

#include <stdint.h>

#include "../tp_kernels.h"
#include "tp_quant.h"

static inline int8_t tp_clamp_act(int64_t v, int32_t act_min, int32_t act_max)
{
    if (v < act_min) {
        return (int8_t)act_min;
    }
    if (v > act_max) {
        return (int8_t)act_max;
    }
    return (int8_t)v;
}

/* The bits of a float32 (its IEEE encoding), read without floating-point arithmetic. */
static inline uint32_t tp_f32_bits(float f)
{
    union {
        float f;
        uint32_t u;
    } v;
    v.f = f;
    return v.u;
}

/* Output channel c's bias, multiplier and shift, read once for all its output positions. */
typedef struct {
    int32_t bias, mult, shift;
} tp_channel_quant;

static inline tp_channel_quant tp_channel_quant_of(const tp_requant *q, uint32_t c)
{
    tp_channel_quant cq;
    cq.bias = q->bias != 0 ? tp_le_i32(q->bias, c) : 0;
    cq.mult = tp_le_i32(q->mult, c);
    cq.shift = tp_le_i32(q->shift, c);
    return cq;
}

/* bias + requantize + zero point + activation clamp */
static inline int8_t tp_requantize(const tp_conv_params *p, int64_t acc, const tp_channel_quant *q)
{
    return tp_clamp_act(tp_mbqm(acc + q->bias, q->mult, q->shift) + p->out_zp, p->act_min,
                        p->act_max);
}

/* The kernel window of output (oy, ox): taps [*y0, *y1) x [*x0, *x1) inside an h x w input. */
static inline void tp_window(const tp_conv_params *p, int32_t h, int32_t w, int32_t oy, int32_t ox,
                             int32_t *y0, int32_t *y1, int32_t *x0, int32_t *x1)
{
    int32_t iy = oy * p->stride[0] - p->pad[0], ix = ox * p->stride[1] - p->pad[1];
    *y0 = iy < 0 ? -iy : 0;
    *y1 = iy + p->k[0] > h ? h - iy : p->k[0];
    *x0 = ix < 0 ? -ix : 0;
    *x1 = ix + p->k[1] > w ? w - ix : p->k[1];
}

/* The outputs o in [*lo, *hi) of a window tap at offset t (stride st, padding pad) whose input
 * o * st + t - pad lies inside [0, n): the others read padding. */
static inline void tp_tap_range(uint32_t t, uint32_t st, uint32_t pad, uint32_t n, uint32_t n_out,
                                uint32_t *lo, uint32_t *hi)
{
    uint32_t end = n + pad > t ? (n + pad - t + st - 1u) / st : 0u; /* first o past the input */
    *lo = t >= pad ? 0u : (pad - t + st - 1u) / st;
    *hi = end < n_out ? end : n_out;
    *lo = *lo < *hi ? *lo : *hi;
}

/* The index in `in` of channel ch's largest input in the pooling window of output (oy, ox),
 * the window clipped to the image (the loader: at least one tap inside): the first of equals
 * in the window's row-major order, as reference/forward.py pool_argmax. */
static inline int32_t tp_pool_argmax(const tp_pool_params *p, const tp_shape *in_shape,
                                     const int8_t *in, int32_t oy, int32_t ox, int32_t ch)
{
    int32_t h = in_shape->h, w = in_shape->w, c = in_shape->c;
    int32_t y0 = oy * p->stride[0] - p->pad[0], x0 = ox * p->stride[1] - p->pad[1];
    int32_t ys = y0 > 0 ? y0 : 0, ye = y0 + p->k[0] < h ? y0 + p->k[0] : h;
    int32_t xs = x0 > 0 ? x0 : 0, xe = x0 + p->k[1] < w ? x0 + p->k[1] : w;
    int32_t y, x, best = (ys * w + xs) * c + ch;
    for (y = ys; y < ye; y++) {
        for (x = xs; x < xe; x++) {
            int32_t i = (y * w + x) * c + ch;
            best = in[i] > in[best] ? i : best;
        }
    }
    return best;
}

#endif /* TP_REF_H */
