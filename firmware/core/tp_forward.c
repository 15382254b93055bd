/* tp_forward.c - the forward interpreter: the tiled stage (tp_patch.c), then each op of a
 * checked blob on whole tensors (tp_exec.c), every activation at its planned offset and every
 * arena access counted in the call's high-water mark. */
#include "tp_forward.h"
#include "tinyprop.h"

#include <string.h>

/* Arena offset of activation tensor `index` under the plan. */
static uint32_t act_offset(const tp_session *s, uint32_t index, const tp_tensor *t, tp_plan plan)
{
    return plan == TP_PLAN_TRAIN ? tp_tran_act_offset(&s->b, index) : t->offset;
}

/* A whole activation operand: its bytes in the arena (counted) and its shape. */
static void whole_act(tp_session *s, uint32_t index, tp_plan plan, tp_act *a)
{
    tp_tensor t;
    tp_decode_tensor(s->b.tensors, index, &t);
    tp_shape_of(&t, &a->shape);
    a->data = (int8_t *)tp_arena_at(s, act_offset(s, index, &t, plan), t.size);
}

const int8_t *tp_run_op(tp_session *s, uint32_t i, tp_plan plan)
{
    tp_op op;
    tp_act in, in2, out;
    const tp_act *second = NULL;
    uint32_t chan;
    tp_decode_op(s->b.ops, i, &op);
    whole_act(s, op.inputs[0], plan, &in);
    whole_act(s, op.output, plan, &out);
    if (tp_op_defs[op.kind].inputs == 2u) {
        whole_act(s, op.inputs[1], plan, &in2);
        second = &in2;
    }
    chan = tp_inplace_of(&s->b, i, (uint32_t)plan);
    if (chan != TP_NONE32) { /* the output overwrites the input (the loader: same bytes) */
        tp_exec_inplace(s, &op, plan, &in, &out,
                        (int8_t *)tp_arena_at(s, chan, (uint32_t)(out.shape.h * out.shape.w)));
    } else {
        tp_exec_op(s, &op, plan, &in, second, &out);
    }
    return out.data;
}

int32_t tp_argmax_s8(const int8_t *x, uint32_t n)
{
    uint32_t i, best = 0;
    for (i = 1; i < n; i++) {
        best = x[i] > x[best] ? i : best;
    }
    return (int32_t)best;
}

tp_status tp_infer(tp_session *s, tp_result *r)
{
    uint32_t i, first;
    tp_status st;
    int32_t prediction = -1;
    if (s == NULL) {
        return TP_ERR_ARG;
    }
    if (s->b.ops == NULL) {
        return TP_ERR_NOT_LOADED;
    }
    s->run.phase = 0u; /* it takes the arena: a training step under way is abandoned */
    s->arena_high = 0;
    st = tp_run_stage(s, TP_PLAN_INFER, &first);
    if (st != TP_OK) {
        return st;
    }
    for (i = first; i < s->b.n_ops; i++) {
        const int8_t *y = tp_run_op(s, i, TP_PLAN_INFER);
        tp_op op;
        tp_decode_op(s->b.ops, i, &op);
        if (op.output == s->b.logits) { /* argmax now: a later op may reuse the logits' bytes */
            prediction = tp_argmax_s8(y, s->b.req.n_classes);
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
