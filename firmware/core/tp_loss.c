/* tp_loss.c - softmax cross-entropy and its gradient, bit-identical to the NumPy reference. */
#include "tp_loss.h"

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
