/* tp_conv.c - reference CONV_2D and DEPTHWISE_CONV_2D (reference/forward.py). Accumulators
 * hold exact sums (int32 runs of at most 65535 taps), requantization is tp_mbqm, TFLite's fixed
 * point. Output channel outer: a channel's weights, bias and requantization are looked up once.
 * Padded taps are skipped: they add (zp - zp) * w = 0. */
#include "tinyprop.h"
#include "tp_ref.h"

/* Sum of (x[i] - zp) * w[i] over n taps, in int32 runs of at most 65535 taps: |x - zp| <= 255
 * and |w| <= 128 keep such a run's sum below 2^31, so it is exact. */
static int64_t dot_s8(const int8_t *x, int32_t zp, const int8_t *w, uint32_t n)
{
    int64_t total = 0;
    while (n > 0u) {
        uint32_t i, m = n < 65535u ? n : 65535u;
        int32_t acc = 0;
        for (i = 0; i < m; i++) {
            acc += ((int32_t)x[i] - zp) * w[i];
        }
        total += acc;
        x += m;
        w += m;
        n -= m;
    }
    return total;
}

void tp_conv2d_s8(const tp_conv_params *p, const tp_shape *in_shape, const int8_t *in,
                  const tp_weights *w, const tp_requant *q, const tp_shape *out_shape, int8_t *out,
                  void *scratch)
{
    int32_t h = in_shape->h, wd = in_shape->w, cin = in_shape->c;
    int32_t oh = out_shape->h, ow = out_shape->w, cout = out_shape->c;
    int32_t kw = p->k[1];
    int32_t oy, ox, co, ky, kx0, kx1, ky0, ky1;
    uint32_t step;
    (void)scratch;
    for (co = 0; co < cout; co++) {
        const int8_t *wk = tp_weights_row(w, (uint32_t)co, &step); /* rows are contiguous */
        tp_channel_quant cq = tp_channel_quant_of(q, (uint32_t)co);
        for (oy = 0; oy < oh; oy++) {
            for (ox = 0; ox < ow; ox++) {
                int32_t iy = oy * p->stride[0] - p->pad[0], ix = ox * p->stride[1] - p->pad[1];
                int64_t acc = 0;
                tp_window(p, h, wd, oy, ox, &ky0, &ky1, &kx0, &kx1);
                for (ky = ky0; ky < ky1; ky++) {
                    /* the window row's taps kx0..kx1 are contiguous in the input and the row */
                    acc += dot_s8(in + ((iy + ky) * wd + ix + kx0) * cin, p->in_zp,
                                  wk + (ky * kw + kx0) * cin, (uint32_t)((kx1 - kx0) * cin));
                }
                out[(oy * ow + ox) * cout + co] = tp_requantize(p, acc, &cq);
            }
        }
    }
}

uint32_t tp_conv2d_s8_scratch_bytes(const tp_conv_params *p, const tp_shape *in_shape,
                                    const tp_shape *out_shape)
{
    (void)p;
    (void)in_shape;
    (void)out_shape;
    return 0u;
}

void tp_depthwise_conv2d_s8(const tp_conv_params *p, const tp_shape *in_shape, const int8_t *in,
                            const tp_weights *w, const tp_requant *q, const tp_shape *out_shape,
                            int8_t *out, void *scratch)
{
    int32_t h = in_shape->h, wd = in_shape->w, cin = in_shape->c;
    int32_t oh = out_shape->h, ow = out_shape->w, cout = out_shape->c;
    int32_t mult = p->depth_multiplier, kw = p->k[1];
    int32_t oy, ox, co, ky, kx, ky0, ky1, kx0, kx1;
    uint32_t step;
    (void)scratch;
    for (co = 0; co < cout; co++) {
        int32_t c = co / mult; /* output channel c * mult + m reads input channel c */
        /* channel co's taps: a held row (step 1) or strided through the blob's tensor */
        const int8_t *wd_ = tp_weights_row(w, (uint32_t)co, &step);
        tp_channel_quant cq = tp_channel_quant_of(q, (uint32_t)co);
        for (oy = 0; oy < oh; oy++) {
            for (ox = 0; ox < ow; ox++) {
                int32_t iy = oy * p->stride[0] - p->pad[0], ix = ox * p->stride[1] - p->pad[1];
                int32_t acc = 0; /* at most 255 * 255 taps: exact, as in dot_s8 */
                tp_window(p, h, wd, oy, ox, &ky0, &ky1, &kx0, &kx1);
                for (ky = ky0; ky < ky1; ky++) {
                    const int8_t *x = in + ((iy + ky) * wd + ix) * cin + c;
                    for (kx = kx0; kx < kx1; kx++) {
                        acc += ((int32_t)x[kx * cin] - p->in_zp) *
                               wd_[(uint32_t)(ky * kw + kx) * step];
                    }
                }
                out[(oy * ow + ox) * cout + co] = tp_requantize(p, acc, &cq);
            }
        }
    }
}

uint32_t tp_depthwise_conv2d_s8_scratch_bytes(const tp_conv_params *p, const tp_shape *in_shape,
                                              const tp_shape *out_shape)
{
    (void)p;
    (void)in_shape;
    (void)out_shape;
    return 0u;
}
