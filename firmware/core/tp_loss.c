/* tp_loss.c - the losses and their gradients, bit-identical to the NumPy reference. */
#include "tp_loss.h"
#include "tinyprop.h"

#include "tp_fmath.h"

float tp_softmax_xent_f32(const int8_t *logits, int32_t zero_point, float scale, uint32_t n,
                          int32_t label, float *grad)
{
    uint32_t j;
    float m, sum, loss;
    for (j = 0; j < n; j++) {
        grad[j] = (float)((int32_t)logits[j] - zero_point) * scale;
    }
    m = grad[0];
    for (j = 1; j < n; j++) {
        m = grad[j] > m ? grad[j] : m;
    }
    loss = grad[label] - m;
    sum = 0.0f;
    for (j = 0; j < n; j++) {
        grad[j] = tp_exp_neg(grad[j] - m);
        sum = sum + grad[j];
    }
    for (j = 0; j < n; j++) {
        grad[j] = grad[j] / sum;
    }
    grad[label] = grad[label] - 1.0f;
    return tp_log_pos(sum) - loss;
}

static float logit(const int8_t *logits, uint32_t j, int32_t zero_point, float scale)
{
    return (float)((int32_t)logits[j] - zero_point) * scale;
}

/* p_j - [j == label] in units of 2^-30, computed as tp_softmax_xent_f32 computes grad[j] */
static int64_t grad_units(const int8_t *logits, uint32_t j, int32_t zero_point, float scale,
                          float m, float sum, int32_t label)
{
    float g = tp_exp_neg(logit(logits, j, zero_point, scale) - m) / sum;
    if ((int32_t)j == label) {
        g = g - 1.0f;
    }
    return tp_gm_round_f32(g * (float)((int32_t)1 << TP_GM_LOSS_FRAC));
}

float tp_softmax_xent_q(const int8_t *logits, int32_t zero_point, float scale, uint32_t n,
                        int32_t label, tp_gm_writer *w)
{
    uint32_t j;
    uint64_t top = 0;
    float m = logit(logits, 0u, zero_point, scale), sum = 0.0f, loss;
    for (j = 1; j < n; j++) {
        float z = logit(logits, j, zero_point, scale);
        m = z > m ? z : m;
    }
    for (j = 0; j < n; j++) {
        sum = sum + tp_exp_neg(logit(logits, j, zero_point, scale) - m);
    }
    loss = tp_log_pos(sum) - (logit(logits, (uint32_t)label, zero_point, scale) - m);
    if (!(loss - loss == 0.0f)) {
        return loss;
    }
    for (j = 0; j < n; j++) {
        int64_t v = grad_units(logits, j, zero_point, scale, m, sum, label);
        uint64_t a = v < 0 ? 0u - (uint64_t)v : (uint64_t)v;
        top = a > top ? a : top;
    }
    tp_gm_row_begin(w, 0u, top);
    for (j = 0; j < n; j++) {
        tp_gm_put(w, j, grad_units(logits, j, zero_point, scale, m, sum, label));
    }
    return loss;
}

/* y_j - t_j, dequantized (float32 each, as mse_and_grad's d) */
static float mse_diff(const int8_t *y, int32_t y_zp, float y_scale, const int8_t *t, int32_t t_zp,
                      float t_scale, uint32_t j)
{
    return logit(y, j, y_zp, y_scale) - logit(t, j, t_zp, t_scale);
}

static float mse_sum(const int8_t *y, int32_t y_zp, float y_scale, const int8_t *t, int32_t t_zp,
                     float t_scale, uint32_t n)
{
    uint32_t j;
    float sum = 0.0f;
    for (j = 0; j < n; j++) {
        float d = mse_diff(y, y_zp, y_scale, t, t_zp, t_scale, j);
        sum = sum + d * d;
    }
    return sum / (float)n;
}

float tp_mse_f32(const int8_t *y, int32_t y_zp, float y_scale, const int8_t *t, int32_t t_zp,
                 float t_scale, uint32_t n, float *grad)
{
    uint32_t j;
    float c = 2.0f / (float)n, sum = 0.0f;
    for (j = 0; j < n; j++) { /* the sum in mse_sum's order: the same bits */
        float d = mse_diff(y, y_zp, y_scale, t, t_zp, t_scale, j);
        grad[j] = d * c;
        sum = sum + d * d;
    }
    return sum / (float)n;
}

float tp_mse_q(const int8_t *y, int32_t y_zp, float y_scale, const int8_t *t, int32_t t_zp,
               float t_scale, uint32_t n, tp_gm_writer *w)
{
    uint32_t j;
    uint64_t top = 0;
    float c = 2.0f / (float)n, unit = (float)((int32_t)1 << TP_GM_LOSS_FRAC);
    float loss = mse_sum(y, y_zp, y_scale, t, t_zp, t_scale, n);
    if (!(loss - loss == 0.0f)) {
        return loss;
    }
    for (j = 0; j < n; j++) {
        int64_t v = tp_gm_round_f32(mse_diff(y, y_zp, y_scale, t, t_zp, t_scale, j) * c * unit);
        uint64_t a = v < 0 ? 0u - (uint64_t)v : (uint64_t)v;
        top = a > top ? a : top;
    }
    tp_gm_row_begin(w, 0u, top);
    for (j = 0; j < n; j++) {
        tp_gm_put(w, j,
                  tp_gm_round_f32(mse_diff(y, y_zp, y_scale, t, t_zp, t_scale, j) * c * unit));
    }
    return loss;
}
