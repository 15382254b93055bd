/* tp_kernels_ref.c - reference int8 forward kernels: host/tinyprop/reference.py in C, readable
 * first. Accumulators are int64, like the NumPy reference, so sums are exact for any blob the
 * loader accepts; requantization is tp_mbqm, TFLite's fixed point.
 */
#include <string.h>

#include "tp_kernels.h"
#include "tp_quant.h"

/* NHWC dims of a rank-4 activation (N = 1) */
#define DIM_H(t) ((int32_t)(t)->dims[1])
#define DIM_W(t) ((int32_t)(t)->dims[2])
#define DIM_C(t) ((int32_t)(t)->dims[3])

static int8_t clamp_act(int64_t v, const tp_op *op)
{
    if (v < op->act_min) {
        return (int8_t)op->act_min;
    }
    if (v > op->act_max) {
        return (int8_t)op->act_max;
    }
    return (int8_t)v;
}

/* bias + requantize + zero point + activation clamp for output channel c */
static int8_t requantize(const tp_kernel_args *a, int64_t acc, uint32_t c)
{
    if (a->bias != NULL) {
        acc += tp_le_i32(a->bias, c);
    }
    return clamp_act(tp_mbqm(acc, tp_le_i32(a->mult, c), tp_le_i32(a->shift, c)) + a->op->out_zp,
                     a->op);
}

void tp_conv2d_s8(const tp_kernel_args *a)
{
    const tp_op *op = a->op;
    int32_t h = DIM_H(a->t_in), w = DIM_W(a->t_in), cin = DIM_C(a->t_in);
    int32_t oh = DIM_H(a->t_out), ow = DIM_W(a->t_out), cout = DIM_C(a->t_out);
    int32_t kh = op->k[0], kw = op->k[1];
    int32_t oy, ox, co, ky, kx, ci;
    for (oy = 0; oy < oh; oy++) {
        for (ox = 0; ox < ow; ox++) {
            for (co = 0; co < cout; co++) {
                const int8_t *wk = tp_weight_row(a->s, op, a->t_in2, (uint32_t)co, NULL);
                int64_t acc = 0;
                for (ky = 0; ky < kh; ky++) {
                    int32_t iy = oy * op->stride[0] - op->pad[0] + ky;
                    if (iy < 0 || iy >= h) {
                        continue; /* padded taps add (zp - zp) * w = 0 */
                    }
                    for (kx = 0; kx < kw; kx++) {
                        int32_t ix = ox * op->stride[1] - op->pad[1] + kx;
                        const int8_t *px, *pw;
                        if (ix < 0 || ix >= w) {
                            continue;
                        }
                        px = a->in + (iy * w + ix) * cin;
                        pw = wk + (ky * kw + kx) * cin;
                        for (ci = 0; ci < cin; ci++) {
                            acc += (int32_t)(px[ci] - op->in_zp) * pw[ci];
                        }
                    }
                }
                a->out[(oy * ow + ox) * cout + co] = requantize(a, acc, (uint32_t)co);
            }
        }
    }
}

void tp_depthwise_conv2d_s8(const tp_kernel_args *a)
{
    const tp_op *op = a->op;
    int32_t h = DIM_H(a->t_in), w = DIM_W(a->t_in);
    int32_t oh = DIM_H(a->t_out), ow = DIM_W(a->t_out), cout = DIM_C(a->t_out);
    int32_t cin = DIM_C(a->t_in), mult = op->depth_multiplier;
    int32_t kh = op->k[0], kw = op->k[1];
    int32_t oy, ox, co, ky, kx;
    uint32_t step;
    for (oy = 0; oy < oh; oy++) {
        for (ox = 0; ox < ow; ox++) {
            for (co = 0; co < cout; co++) {
                int32_t c = co / mult; /* output channel c * mult + m reads input channel c */
                /* channel co's taps: a held row (step 1) or strided through the blob's tensor */
                const int8_t *wd = tp_weight_row(a->s, op, a->t_in2, (uint32_t)co, &step);
                int64_t acc = 0;
                for (ky = 0; ky < kh; ky++) {
                    int32_t iy = oy * op->stride[0] - op->pad[0] + ky;
                    if (iy < 0 || iy >= h) {
                        continue;
                    }
                    for (kx = 0; kx < kw; kx++) {
                        int32_t ix = ox * op->stride[1] - op->pad[1] + kx;
                        if (ix < 0 || ix >= w) {
                            continue;
                        }
                        acc += (int32_t)(a->in[(iy * w + ix) * cin + c] - op->in_zp) *
                               wd[(uint32_t)(ky * kw + kx) * step];
                    }
                }
                a->out[(oy * ow + ox) * cout + co] = requantize(a, acc, (uint32_t)co);
            }
        }
    }
}

/* TFLite's reference FULLY_CONNECTED requantizes in double with the real scale
 * s_in * s_w[o] / s_out (opparams.real_scale), computed here from the blob's float32 scales */
static double fc_real_scale(const tp_kernel_args *a, uint32_t o)
{
    const tp_tensor *w = a->t_in2;
    float sw = w->n_scales > 1u ? tp_rd_f32(a->s->data + w->scales_offset + 4u * o) : w->scale;
    return (double)a->t_in->scale * (double)sw / (double)a->t_out->scale;
}

void tp_fully_connected_s8(const tp_kernel_args *a)
{
    uint32_t n_in = tp_tensor_elems(a->t_in), n_out = tp_tensor_elems(a->t_out);
    uint32_t o, i;
    for (o = 0; o < n_out; o++) {
        const int8_t *row = tp_weight_row(a->s, a->op, a->t_in2, o, NULL);
        int64_t acc = a->bias != NULL ? tp_le_i32(a->bias, o) : 0;
        for (i = 0; i < n_in; i++) {
            acc += (int32_t)(a->in[i] - a->op->in_zp) * row[i];
        }
        a->out[o] = clamp_act(tp_requantize_double(acc, fc_real_scale(a, o)) + a->op->out_zp,
                              a->op);
    }
}

void tp_add_s8(const tp_kernel_args *a)
{
    const tp_op *op = a->op;
    /* mult/shift hold [output, input 1, input 2] */
    int64_t scale_up = (int64_t)1 << op->left_shift;
    uint32_t n = tp_tensor_elems(a->t_out), i;
    for (i = 0; i < n; i++) {
        int64_t s1 = tp_mbqm((a->in[i] - op->in_zp) * scale_up, tp_le_i32(a->mult, 1),
                             tp_le_i32(a->shift, 1));
        int64_t s2 = tp_mbqm((a->in2[i] - op->in2_zp) * scale_up, tp_le_i32(a->mult, 2),
                             tp_le_i32(a->shift, 2));
        a->out[i] = clamp_act(
            tp_mbqm(s1 + s2, tp_le_i32(a->mult, 0), tp_le_i32(a->shift, 0)) + op->out_zp, op);
    }
}

void tp_avg_pool2d_s8(const tp_kernel_args *a)
{
    const tp_op *op = a->op;
    int32_t h = DIM_H(a->t_in), w = DIM_W(a->t_in), c = DIM_C(a->t_in);
    int32_t oh = DIM_H(a->t_out), ow = DIM_W(a->t_out);
    int32_t oy, ox, ch, y, x;
    for (oy = 0; oy < oh; oy++) {
        int32_t y0 = oy * op->stride[0] - op->pad[0];
        int32_t ys = y0 > 0 ? y0 : 0, ye = y0 + op->k[0] < h ? y0 + op->k[0] : h;
        for (ox = 0; ox < ow; ox++) {
            int32_t x0 = ox * op->stride[1] - op->pad[1];
            int32_t xs = x0 > 0 ? x0 : 0, xe = x0 + op->k[1] < w ? x0 + op->k[1] : w;
            /* the window covers only the input taps inside the image (loader: at least one) */
            int64_t n = (int64_t)(ye - ys) * (xe - xs);
            for (ch = 0; ch < c; ch++) {
                int64_t sum = 0;
                for (y = ys; y < ye; y++) {
                    for (x = xs; x < xe; x++) {
                        sum += a->in[(y * w + x) * c + ch];
                    }
                }
                a->out[(oy * ow + ox) * c + ch] = clamp_act(tp_rounded_div(sum, n), op);
            }
        }
    }
}

static int8_t saturate_s8(int64_t v)
{
    return (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
}

void tp_mean_hw_s8(const tp_kernel_args *a)
{
    /* TFLite's QuantizedMeanOrSum: 1/(H*W) is folded into the multiplier (blob mode 2) */
    const tp_op *op = a->op;
    int32_t hw = DIM_H(a->t_in) * DIM_W(a->t_in), c = DIM_C(a->t_in);
    int32_t ch, i;
    for (ch = 0; ch < c; ch++) {
        int64_t sum = 0;
        for (i = 0; i < hw; i++) {
            sum += a->in[i * c + ch] - op->in_zp;
        }
        a->out[ch] = saturate_s8(tp_mbqm(sum, tp_le_i32(a->mult, 0), tp_le_i32(a->shift, 0)) +
                                 op->out_zp);
    }
}

void tp_pad_s8(const tp_kernel_args *a)
{
    const tp_op *op = a->op;
    int32_t h = DIM_H(a->t_in), w = DIM_W(a->t_in), c = DIM_C(a->t_in);
    int32_t ow = DIM_W(a->t_out);
    int32_t y;
    memset(a->out, (int8_t)op->out_zp, a->t_out->size);
    for (y = 0; y < h; y++) {
        memcpy(a->out + ((y + op->pad[0]) * ow + op->pad[1]) * c, a->in + y * w * c,
               (size_t)w * (size_t)c);
    }
}

void tp_reshape_s8(const tp_kernel_args *a)
{
    if (a->out != a->in) { /* the planner aliases reshapes; copy only when it did not */
        memmove(a->out, a->in, a->t_out->size);
    }
}

/* exp(beta * scale * diff) in Q0.31 for diff = x - max <= 0 (quant.softmax_int8) */
static int32_t softmax_exp(int32_t diff, int32_t mult, int32_t left_shift)
{
    int32_t scaled = tp_wrap32(diff * ((int64_t)1 << left_shift));
    return tp_exp_on_negative_values((int32_t)tp_srdhm(scaled, mult));
}

void tp_softmax_s8(const tp_kernel_args *a)
{
    const tp_op *op = a->op;
    uint32_t depth = a->t_in->dims[a->t_in->rank - 1];
    uint32_t rows = tp_tensor_elems(a->t_in) / depth, r, j;
    int32_t mult = tp_le_i32(a->mult, 0), left_shift = tp_le_i32(a->shift, 0);
    for (r = 0; r < rows; r++) {
        const int8_t *x = a->in + r * depth;
        int8_t *y = a->out + r * depth;
        int32_t mx = -128, total = 0, scale, bits;
        for (j = 0; j < depth; j++) {
            mx = x[j] > mx ? x[j] : mx;
        }
        /* each exp is computed twice (sum, then output): no per-row scratch buffer */
        for (j = 0; j < depth; j++) {
            if (x[j] - mx >= op->diff_min) {
                int32_t e = softmax_exp(x[j] - mx, mult, left_shift);
                total = tp_wrap32((int64_t)total +
                                  tp_rounding_divide_by_pot(e, TP_SOFTMAX_ACCUM_INT_BITS));
            }
        }
        scale = tp_get_reciprocal(total, TP_SOFTMAX_ACCUM_INT_BITS, &bits);
        for (j = 0; j < depth; j++) {
            int64_t v = -128;
            if (x[j] - mx >= op->diff_min) {
                int32_t e = softmax_exp(x[j] - mx, mult, left_shift);
                v = tp_rounding_divide_by_pot(tp_srdhm(scale, e), bits + 31 - 8) - 128;
            }
            y[j] = saturate_s8(v);
        }
    }
}

const tp_kernel_fn tp_ref_kernels[TP_OP_KIND_COUNT] = {
    NULL,
    tp_conv2d_s8,
    tp_depthwise_conv2d_s8,
    tp_fully_connected_s8,
    tp_add_s8,
    tp_avg_pool2d_s8,
    tp_mean_hw_s8,
    tp_pad_s8,
    tp_reshape_s8,
    tp_softmax_s8,
};
