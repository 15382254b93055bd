/* tp_forward.h - the forward interpreter's side the training interpreter uses. */
#ifndef TP_FORWARD_H
#define TP_FORWARD_H

#include "tp_session.h"

/* Which arena plan places the activations: inference, or a training step's (TRAN). */
typedef enum { TP_PLAN_INFER = 0, TP_PLAN_TRAIN = 1 } tp_plan;

/* Run op i of the blob with the session's kernels, activations at the plan's offsets.
 * Returns the op's int8 output. */
const int8_t *tp_run_op(tp_session *s, uint32_t i, tp_plan plan);

/* Index of the largest of n int8 values (the first of equals). */
int32_t tp_argmax_s8(const int8_t *x, uint32_t n);

/* NHWC shape of a rank-4 activation; other ranks are 1 x 1 x elements. */
void tp_shape_of(const tp_tensor *t, tp_shape *shape);

/* The convolution parameters of a CONV_2D or DEPTHWISE_CONV_2D op (also its gradients'). */
void tp_conv_params_of(const tp_op *op, tp_conv_params *p);

#endif /* TP_FORWARD_H */
