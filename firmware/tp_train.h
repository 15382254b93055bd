/* tp_train.h - what the training step shares with the forward loop and the loader. */
#ifndef TP_TRAIN_H
#define TP_TRAIN_H

#include "tp_internal.h"

/* Run op i; train != 0 places activations at the training plan's offsets. Returns the op's
 * int8 output in the arena. */
const int8_t *tp_run_op(tp_session *s, uint32_t i, int train);

/* Row o of a weighted op's weights as the forward pass sees them: the params copy of a trained
 * channel, else the blob's constant. Depthwise weights: the whole (1, KH, KW, C) tensor. */
const int8_t *tp_weight_row(const tp_session *s, const tp_op *op, const tp_tensor *w, uint32_t o);

/* Training-plan arena offset of a tensor's activation (TP_NONE32 if it has none). */
uint32_t tp_train_act_offset(const tp_session *s, uint32_t tensor);

/* The TRAN record of op k, or NULL when op k takes no part in the backward pass. */
const uint8_t *tp_train_op_of(const tp_session *s, uint32_t k);

/* Bounds and consistency of the TRAN section (tp_session_init calls it). */
tp_status tp_train_check(const tp_session *s);

/* float32 e^x for x <= 0 and ln(x) for x >= 1, bit-identical to host/tinyprop/fmath.py. */
float tp_exp_neg(float x);
float tp_log_pos(float x);

#endif
