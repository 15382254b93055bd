/* tp_fully_connected_grad.c - reference float32 gradients of FULLY_CONNECTED
 * (reference/backward.py). */
#include "tinyprop.h"
#include "tp_ref.h"

void tp_fully_connected_input_grad_f32(const tp_weights *w, const float *dy, float *dx)
{
    uint32_t i, o, step;
    for (o = 0; o < w->n_out; o++) {
        float sw = tp_weights_scale(w, o), g = dy[o];
        const int8_t *row = tp_weights_row(w, o, &step); /* rows are contiguous */
        for (i = 0; i < w->row_len; i++) {
            float wr = (float)row[i] * sw;
            dx[i] = dx[i] + g * wr;
        }
    }
}

void tp_fully_connected_weight_grad_f32(uint32_t n_in, const int8_t *x, int32_t x_zp, float x_scale,
                                        const float *dy, uint32_t o, float *row)
{
    uint32_t k;
    for (k = 0; k < n_in; k++) {
        float xv = (float)((int32_t)x[k] - x_zp) * x_scale;
        row[k] = 0.0f + dy[o] * xv;
    }
}
