/* tp_forward.h - the forward interpreter's side the training interpreter uses. */
#ifndef TP_FORWARD_H
#define TP_FORWARD_H

#include "tp_session.h"

/* Which arena plan places the activations: inference, or a training step's (TRAN). */
typedef enum { TP_PLAN_INFER = 0, TP_PLAN_TRAIN = 1 } tp_plan;

/* An activation operand of one kernel call: its bytes and its NHWC shape (rows shape.w *
 * shape.c bytes apart). */
typedef struct {
    int8_t *data;
    tp_shape shape;
} tp_act;

/* One op's run on given operands, as tp_exec_op hands it to its kind's forward entry. */
typedef struct {
    tp_session *s;
    const tp_op *op;
    tp_plan plan;
    const tp_act *in, *in2, *out; /* in2: a 2-input kind's second input, else NULL */
} tp_op_run;

/* The forward entry of each op kind (tp_ops.h's row; tp_exec.c). */
#define TP_EXEC_DECL(KIND, code, name, weights, inputs, grad, q_row, q_chan) \
    void tp_exec_##name(const tp_op_run *r);
TP_OPS(TP_EXEC_DECL)
#undef TP_EXEC_DECL

/* Run op's kernel (tp_exec.c) on the given operands, its padding as *op says (a tile's);
 * in2: a 2-input kind's second input, else NULL. */
void tp_exec_op(tp_session *s, const tp_op *op, tp_plan plan, const tp_act *in, const tp_act *in2,
                const tp_act *out);

/* A depthwise convolution with multiplier 1 in place (out->data == in->data): channel by
 * channel through chan, one output channel's plane (out h x w bytes). */
void tp_exec_inplace(tp_session *s, const tp_op *op, tp_plan plan, const tp_act *in,
                     const tp_act *out, int8_t *chan);

/* Run the blob's tiled stage (tp_patch.c) under the plan; *n: its op count (0: no stage).
 * TP_ERR_BAD_INPUT when it reads row bands and the session has no (working) row source. */
tp_status tp_run_stage(tp_session *s, tp_plan plan, uint32_t *n);

/* Run op i of the blob on whole tensors with the session's kernels, activations at the plan's
 * offsets (in place when INPL says so). Returns the op's int8 output. */
const int8_t *tp_run_op(tp_session *s, uint32_t i, tp_plan plan);

/* Index of the largest of n int8 values (the first of equals). */
int32_t tp_argmax_s8(const int8_t *x, uint32_t n);

/* NHWC shape of a rank-4 activation; other ranks are 1 x 1 x elements. */
void tp_shape_of(const tp_tensor *t, tp_shape *shape);

/* The convolution parameters of a CONV_2D or DEPTHWISE_CONV_2D op (also its gradients'). */
void tp_conv_params_of(const tp_op *op, tp_conv_params *p);
/* Likewise for AVERAGE_POOL_2D, MAX_POOL_2D and PAD. */
void tp_pool_params_of(const tp_op *op, tp_pool_params *p);
void tp_pad_params_of(const tp_op *op, tp_pad_params *p);

#endif /* TP_FORWARD_H */
