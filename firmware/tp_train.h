/* tp_train.h - training-only helpers shared by tp_train.c and tp_fmath.c. The functions the
 * loader and the forward loop share with training are declared in tp_internal.h. */
#ifndef TP_TRAIN_H
#define TP_TRAIN_H

#include "tp_internal.h"

/* The TRAN record of op k, or NULL when op k takes no part in the backward pass. */
const uint8_t *tp_train_op_of(const tp_session *s, uint32_t k);

/* float32 e^x for x <= 0 and ln(x) for x >= 1, bit-identical to host/tinyprop/fmath.py. */
float tp_exp_neg(float x);
float tp_log_pos(float x);

#endif
