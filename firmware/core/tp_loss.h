/* tp_loss.h - the training losses (TRAN's loss): softmax cross-entropy on the dequantized
 * logits, or the mean squared error of the dequantized output against the dequantized input. */
#ifndef TP_LOSS_H
#define TP_LOSS_H

#include <stdint.h>

#include "tp_gradmap.h"

/* Loss of label over n int8 logits (zero point, scale), computed as reference/backward.py
 * does, with exp and log from tp_fmath.c; grad[0..n) receives d loss / d logits. */
float tp_softmax_xent_f32(const int8_t *logits, int32_t zero_point, float scale, uint32_t n,
                          int32_t label, float *grad);

/* The same loss; its gradient goes to an integer map through w (one row, the caller begun it at
 * exponent -TP_GM_LOSS_FRAC and ends it): d loss / d logits rounded to units of 2^-30
 * (gradmap.loss_map). A loss that is not finite writes nothing. */
float tp_softmax_xent_q(const int8_t *logits, int32_t zero_point, float scale, uint32_t n,
                        int32_t label, tp_gm_writer *w);

/* Mean squared error of n int8 outputs y (zero point, scale) against n int8 targets t (theirs),
 * computed as reference/backward.py's mse_and_grad does; grad[0..n) receives 2 (y - t) / n. */
float tp_mse_f32(const int8_t *y, int32_t y_zp, float y_scale, const int8_t *t, int32_t t_zp,
                 float t_scale, uint32_t n, float *grad);

/* The same loss; its gradient goes to an integer map through w as tp_softmax_xent_q's does. */
float tp_mse_q(const int8_t *y, int32_t y_zp, float y_scale, const int8_t *t, int32_t t_zp,
               float t_scale, uint32_t n, tp_gm_writer *w);

#endif /* TP_LOSS_H */
