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

/* Output channel c's bias, multiplier and shift, read once for all its output positions. */
typedef struct {
    int32_t bias, mult, shift;
} channel_quant;

static channel_quant quant_of(const tp_kernel_args *a, uint32_t c)
{
    channel_quant q;
    q.bias = a->bias != NULL ? tp_le_i32(a->bias, c) : 0;
    q.mult = tp_le_i32(a->mult, c);
    q.shift = tp_le_i32(a->shift, c);
    return q;
}

/* bias + requantize + zero point + activation clamp */
static int8_t requantize(const tp_kernel_args *a, int64_t acc, const channel_quant *q)
{
    return clamp_act(tp_mbqm(acc + q->bias, q->mult, q->shift) + a->op->out_zp, a->op);
}

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

/* The kernel window of output (oy, ox): taps [*y0, *y1) x [*x0, *x1) inside the input. */
static void window(const tp_op *op, int32_t h, int32_t w, int32_t oy, int32_t ox, int32_t *y0,
                   int32_t *y1, int32_t *x0, int32_t *x1)
{
    int32_t iy = oy * op->stride[0] - op->pad[0], ix = ox * op->stride[1] - op->pad[1];
    *y0 = iy < 0 ? -iy : 0;
    *y1 = iy + op->k[0] > h ? h - iy : op->k[0];
    *x0 = ix < 0 ? -ix : 0;
    *x1 = ix + op->k[1] > w ? w - ix : op->k[1];
}

/* Output channel outer: its weights, bias and requantization are looked up once. Padded taps
 * are skipped: they add (zp - zp) * w = 0. */
void tp_conv2d_s8(const tp_kernel_args *a)
{
    const tp_op *op = a->op;
    int32_t h = DIM_H(a->t_in), w = DIM_W(a->t_in), cin = DIM_C(a->t_in);
    int32_t oh = DIM_H(a->t_out), ow = DIM_W(a->t_out), cout = DIM_C(a->t_out);
    int32_t kw = op->k[1];
    int32_t oy, ox, co, ky, kx0, kx1, ky0, ky1;
    for (co = 0; co < cout; co++) {
        const int8_t *wk = tp_weight_row(a->s, op, a->t_in2, (uint32_t)co, NULL);
        channel_quant q = quant_of(a, (uint32_t)co);
        for (oy = 0; oy < oh; oy++) {
            for (ox = 0; ox < ow; ox++) {
                int32_t iy = oy * op->stride[0] - op->pad[0], ix = ox * op->stride[1] - op->pad[1];
                int64_t acc = 0;
                window(op, h, w, oy, ox, &ky0, &ky1, &kx0, &kx1);
                for (ky = ky0; ky < ky1; ky++) {
                    /* the window row's taps kx0..kx1 are contiguous in the input and the row */
                    acc += dot_s8(a->in + ((iy + ky) * w + ix + kx0) * cin, op->in_zp,
                                  wk + (ky * kw + kx0) * cin, (uint32_t)((kx1 - kx0) * cin));
                }
                a->out[(oy * ow + ox) * cout + co] = requantize(a, acc, &q);
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
    int32_t kw = op->k[1];
    int32_t oy, ox, co, ky, kx, ky0, ky1, kx0, kx1;
    uint32_t step;
    for (co = 0; co < cout; co++) {
        int32_t c = co / mult; /* output channel c * mult + m reads input channel c */
        /* channel co's taps: a held row (step 1) or strided through the blob's tensor */
        const int8_t *wd = tp_weight_row(a->s, op, a->t_in2, (uint32_t)co, &step);
        channel_quant q = quant_of(a, (uint32_t)co);
        for (oy = 0; oy < oh; oy++) {
            for (ox = 0; ox < ow; ox++) {
                int32_t iy = oy * op->stride[0] - op->pad[0], ix = ox * op->stride[1] - op->pad[1];
                int32_t acc = 0; /* at most 255 * 255 taps: exact, as in dot_s8 */
                window(op, h, w, oy, ox, &ky0, &ky1, &kx0, &kx1);
                for (ky = ky0; ky < ky1; ky++) {
                    const int8_t *x = a->in + ((iy + ky) * w + ix) * cin + c;
                    for (kx = kx0; kx < kx1; kx++) {
                        acc += ((int32_t)x[kx * cin] - op->in_zp) *
                               wd[(uint32_t)(ky * kw + kx) * step];
                    }
                }
                a->out[(oy * ow + ox) * cout + co] = requantize(a, acc, &q);
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
