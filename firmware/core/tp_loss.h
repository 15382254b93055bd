/* tp_loss.h - the training loss: softmax cross-entropy on the dequantized logits. */
#ifndef TP_LOSS_H
#define TP_LOSS_H

#include <stdint.h>

/* Loss of label over n int8 logits (zero point, scale), computed as reference/backward.py
 * does, with exp and log from tp_fmath.c; grad[0..n) receives d loss / d logits. */
float tp_softmax_xent_f32(const int8_t *logits, int32_t zero_point, float scale, uint32_t n,
                          int32_t label, float *grad);

#endif /* TP_LOSS_H */
