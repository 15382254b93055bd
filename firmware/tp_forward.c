/* tp_forward.c - the op loop over a checked blob: tp_run_op and tp_infer, all memory at the
 * planned offsets and every arena access counted in the call's high-water mark. */
#include <string.h>

#include "tp_kernels.h"

uint8_t *tp_arena_at(tp_session *s, uint32_t offset, uint32_t size)
{
    if (offset + size > s->arena_high) {
        s->arena_high = offset + size;
    }
    return s->arena + offset;
}

/* Arena offset of activation tensor t under the inference or the training plan. */
static uint32_t act_offset(const tp_session *s, uint32_t index, const tp_tensor *t, int train)
{
    return train ? tp_train_act_offset(s, index) : t->offset;
}

static const int8_t *tensor_bytes(const tp_session *s, uint32_t index)
{
    tp_tensor t;
    if (s == NULL || s->ops == NULL) {
        return NULL;
    }
    tp_decode_tensor(s->tensors, index, &t);
    return (const int8_t *)(s->arena + t.offset);
}

int8_t *tp_input(tp_session *s)
{
    return (int8_t *)tensor_bytes(s, s != NULL ? s->input : 0);
}

const int8_t *tp_output(const tp_session *s)
{
    return tensor_bytes(s, s != NULL ? s->output : 0);
}

uint32_t tp_output_bytes(const tp_session *s)
{
    tp_tensor t;
    if (s == NULL || s->ops == NULL) {
        return 0;
    }
    tp_decode_tensor(s->tensors, s->output, &t);
    return t.size;
}

/* Memory of one operand: activations from the arena (counted), constants from DATA/params. */
static const int8_t *operand(tp_session *s, uint16_t index, tp_tensor *t, int train)
{
    if (index == TP_NONE16) {
        return NULL;
    }
    tp_decode_tensor(s->tensors, index, t);
    if ((t->flags & TP_T_ARENA) != 0u) {
        return (const int8_t *)tp_arena_at(s, act_offset(s, index, t, train), t->size);
    }
    return (const int8_t *)tp_const_data(s, t);
}

const int8_t *tp_run_op(tp_session *s, uint32_t i, int train)
{
    tp_op op;
    tp_tensor t_in, t_in2, t_bias, t_out;
    tp_kernel_args a;
    tp_decode_op(s->ops, i, &op);
    memset(&a, 0, sizeof a);
    a.s = s;
    a.op = &op;
    a.t_in = &t_in;
    a.t_in2 = &t_in2;
    a.t_out = &t_out;
    a.in = operand(s, op.inputs[0], &t_in, train);
    if (op.kind == TP_OP_ADD) {
        a.in2 = operand(s, op.inputs[1], &t_in2, train);
    } else if (op.kind <= TP_OP_FULLY_CONNECTED) { /* weighted: rows via tp_weight_row */
        tp_decode_tensor(s->tensors, op.inputs[1], &t_in2);
        a.bias = (const uint8_t *)operand(s, op.inputs[2], &t_bias, train);
    }
    if (op.n_mult > 0u) {
        a.mult = s->data + op.mult_offset;
        a.shift = a.mult + 4u * op.n_mult;
    }
    tp_decode_tensor(s->tensors, op.output, &t_out);
    a.out = (int8_t *)tp_arena_at(s, act_offset(s, op.output, &t_out, train), t_out.size);
    tp_ref_kernels[op.kind](&a);
    return a.out;
}

static int32_t argmax_s8(const int8_t *x, uint32_t n)
{
    uint32_t i, best = 0;
    for (i = 1; i < n; i++) {
        best = x[i] > x[best] ? i : best;
    }
    return (int32_t)best;
}

tp_status tp_infer(tp_session *s, tp_result *r)
{
    uint32_t i;
    int32_t prediction = -1;
    if (s == NULL) {
        return TP_ERR_ARG;
    }
    if (s->ops == NULL) {
        return TP_ERR_NOT_LOADED;
    }
    s->arena_high = 0;
    for (i = 0; i < s->n_ops; i++) {
        const int8_t *y = tp_run_op(s, i, 0);
        tp_op op;
        tp_decode_op(s->ops, i, &op);
        if (op.output == s->logits) { /* argmax now: a later op may reuse the logits' bytes */
            prediction = argmax_s8(y, s->req.n_classes);
        }
    }
    if (r != NULL) {
        memset(r, 0, sizeof *r);
        r->prediction = prediction;
        r->label = -1;
        r->arena_peak = s->arena_high;
    }
    return TP_OK;
}
