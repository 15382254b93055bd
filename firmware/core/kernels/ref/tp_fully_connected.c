/* tp_fully_connected.c - reference FULLY_CONNECTED (reference/forward.py). */
#include "tinyprop.h"
#include "tp_ref.h"

void tp_fully_connected_s8(const tp_fc_params *p, uint32_t n_in, const int8_t *in,
                           const tp_weights *w, const uint8_t *bias, int8_t *out, void *scratch)
{
    uint32_t o, i, step;
    (void)scratch;
    for (o = 0; o < w->n_out; o++) {
        const int8_t *row = tp_weights_row(w, o, &step);
        int64_t acc = bias != 0 ? tp_le_i32(bias, o) : 0;
        /* TFLite's reference requantizes in double with the real scale s_in * s_w[o] / s_out
         * (opparams.real_scale), computed here from the blob's float32 scales: binary64 held
         * in integers (tp_f64), the same bits without floating-point code */
        tp_f64 real_scale = tp_real_scale(tp_f32_bits(p->in_scale),
                                          tp_f32_bits(tp_weights_scale(w, o)),
                                          tp_f32_bits(p->out_scale));
        for (i = 0; i < n_in; i++) {
            acc += (int32_t)(in[i] - p->in_zp) * row[i];
        }
        out[o] = tp_clamp_act(tp_requantize_double(acc, &real_scale) + p->out_zp, p->act_min,
                              p->act_max);
    }
}

uint32_t tp_fully_connected_s8_scratch_bytes(const tp_fc_params *p, uint32_t n_in, uint32_t n_out)
{
    (void)p;
    (void)n_in;
    (void)n_out;
    return 0u;
}
