/* tp_loss.h - the training loss: softmax cross-entropy on the dequantized logits. */
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

#endif /* TP_LOSS_H */
