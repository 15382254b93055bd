/* tp_forward.c - the forward interpreter: each op of a checked blob unpacked into its kernel's
 * parameters and run with the session's kernels, every activation at its planned offset and
 * every arena access counted in the call's high-water mark. */
#include "tp_forward.h"

#include <string.h>

void tp_shape_of(const tp_tensor *t, tp_shape *shape)
{
    if (t->rank == 4u) {
        shape->h = t->dims[1];
        shape->w = t->dims[2];
        shape->c = t->dims[3];
    } else {
        shape->h = shape->w = 1;
        shape->c = (int32_t)tp_tensor_elems(t);
    }
}

void tp_conv_params_of(const tp_op *op, tp_conv_params *p)
{
    uint32_t j;
    for (j = 0; j < 2; j++) {
        p->stride[j] = op->stride[j];
        p->pad[j] = op->pad[j];
        p->k[j] = op->k[j];
    }
    p->depth_multiplier = op->depth_multiplier;
    p->in_zp = op->in_zp;
    p->out_zp = op->out_zp;
    p->act_min = op->act_min;
    p->act_max = op->act_max;
}

/* Arena offset of activation tensor `index` under the plan. */
static uint32_t act_offset(const tp_session *s, uint32_t index, const tp_tensor *t, tp_plan plan)
{
    return plan == TP_PLAN_TRAIN ? tp_tran_act_offset(&s->b, index) : t->offset;
}

/* An activation operand: its bytes in the arena (counted) and its decoded record. */
static const int8_t *activation(tp_session *s, uint32_t index, tp_tensor *t, tp_plan plan)
{
    tp_decode_tensor(s->b.tensors, index, t);
    return (const int8_t *)tp_arena_at(s, act_offset(s, index, t, plan), t->size);
}

/* Little-endian int32 element i of the op's multiplier (j = 0) or shift (j = 1) array. */
static int32_t op_quant(const tp_session *s, const tp_op *op, uint32_t j, uint32_t i)
{
    return tp_le_i32(s->b.data + op->mult_offset + 4u * op->n_mult * j, i);
}

/* The scratch an op's kernel asks for (need bytes) at the plan's offset, or NULL when the
 * plan gives it less: *k becomes the reference kernels, which need none. */
static void *op_scratch(tp_session *s, const tp_op *op, tp_plan plan, uint32_t need,
                        const tp_forward_kernels **k)
{
    uint32_t offset, have = tp_scratch_plan(&s->b, op->index, (uint32_t)plan, &offset);
    if (need == 0u) {
        return NULL;
    }
    if (need > have) {
        *k = &tp_ref_forward;
        return NULL;
    }
    return tp_arena_at(s, offset, need);
}

/* CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED: weights, bias and requantization. */
static void run_weighted(tp_session *s, const tp_forward_kernels *k, const tp_op *op,
                         tp_plan plan, const tp_tensor *t_in, const int8_t *in,
                         const tp_tensor *t_out, int8_t *out)
{
    tp_tensor t_w, t_bias;
    tp_weights w;
    const uint8_t *bias = NULL;
    void *scratch;
    tp_decode_tensor(s->b.tensors, op->inputs[1], &t_w);
    tp_weights_of(s, op, &t_w, &w);
    if (op->inputs[2] != TP_NONE16) {
        tp_decode_tensor(s->b.tensors, op->inputs[2], &t_bias);
        bias = tp_const_data(s, &t_bias);
    }
    if (op->kind == TP_OP_FULLY_CONNECTED) {
        tp_fc_params p;
        p.in_zp = op->in_zp;
        p.out_zp = op->out_zp;
        p.act_min = op->act_min;
        p.act_max = op->act_max;
        p.in_scale = t_in->scale;
        p.out_scale = t_out->scale;
        scratch = op_scratch(s, op, plan,
                             k->fully_connected_scratch_bytes(&p, tp_tensor_elems(t_in), w.n_out),
                             &k);
        k->fully_connected(&p, tp_tensor_elems(t_in), in, &w, bias, out, scratch);
    } else {
        tp_conv_params p;
        tp_shape in_shape, out_shape;
        tp_requant q;
        tp_conv_params_of(op, &p);
        tp_shape_of(t_in, &in_shape);
        tp_shape_of(t_out, &out_shape);
        q.bias = bias;
        q.mult = s->b.data + op->mult_offset;
        q.shift = q.mult + 4u * op->n_mult;
        if (op->kind == TP_OP_CONV_2D) {
            scratch = op_scratch(s, op, plan, k->conv2d_scratch_bytes(&p, &in_shape, &out_shape),
                                 &k);
            k->conv2d(&p, &in_shape, in, &w, &q, &out_shape, out, scratch);
        } else {
            scratch = op_scratch(
                s, op, plan, k->depthwise_conv2d_scratch_bytes(&p, &in_shape, &out_shape), &k);
            k->depthwise_conv2d(&p, &in_shape, in, &w, &q, &out_shape, out, scratch);
        }
    }
}

const int8_t *tp_run_op(tp_session *s, uint32_t i, tp_plan plan)
{
    const tp_forward_kernels *k =
        (s->flags & TP_SESSION_REFERENCE_KERNELS) ? &tp_ref_forward : &tp_target_forward;
    tp_op op;
    tp_tensor t_in, t_out;
    tp_shape in_shape, out_shape;
    const int8_t *in;
    int8_t *out;
    tp_decode_op(s->b.ops, i, &op);
    in = activation(s, op.inputs[0], &t_in, plan);
    tp_decode_tensor(s->b.tensors, op.output, &t_out);
    out = (int8_t *)tp_arena_at(s, act_offset(s, op.output, &t_out, plan), t_out.size);
    tp_shape_of(&t_in, &in_shape);
    tp_shape_of(&t_out, &out_shape);
    switch (op.kind) {
    case TP_OP_CONV_2D:
    case TP_OP_DEPTHWISE_CONV_2D:
    case TP_OP_FULLY_CONNECTED:
        run_weighted(s, k, &op, plan, &t_in, in, &t_out, out);
        break;
    case TP_OP_ADD: {
        tp_tensor t_in2;
        const int8_t *in2 = activation(s, op.inputs[1], &t_in2, plan);
        tp_add_params p;
        uint32_t j;
        p.in1_zp = op.in_zp;
        p.in2_zp = op.in2_zp;
        p.out_zp = op.out_zp;
        p.act_min = op.act_min;
        p.act_max = op.act_max;
        p.left_shift = op.left_shift;
        for (j = 0; j < 3; j++) { /* [output, input 1, input 2] */
            p.mult[j] = op_quant(s, &op, 0, j);
            p.shift[j] = op_quant(s, &op, 1, j);
        }
        k->add(&p, tp_tensor_elems(&t_out), in, in2, out);
        break;
    }
    case TP_OP_AVERAGE_POOL_2D: {
        tp_pool_params p;
        uint32_t j;
        for (j = 0; j < 2; j++) {
            p.stride[j] = op.stride[j];
            p.pad[j] = op.pad[j];
            p.k[j] = op.k[j];
        }
        p.act_min = op.act_min;
        p.act_max = op.act_max;
        k->avg_pool2d(&p, &in_shape, in, &out_shape, out);
        break;
    }
    case TP_OP_MEAN: {
        tp_mean_params p;
        p.in_zp = op.in_zp;
        p.out_zp = op.out_zp;
        p.mult = op_quant(s, &op, 0, 0);
        p.shift = op_quant(s, &op, 1, 0);
        k->mean_hw(&p, &in_shape, in, out);
        break;
    }
    case TP_OP_PAD: {
        tp_pad_params p;
        p.before[0] = op.pad[0];
        p.before[1] = op.pad[1];
        p.after[0] = op.pad_after[0];
        p.after[1] = op.pad_after[1];
        p.value = op.out_zp;
        k->pad(&p, &in_shape, in, &out_shape, out);
        break;
    }
    case TP_OP_SOFTMAX: {
        tp_softmax_params p;
        uint32_t depth = t_in.dims[t_in.rank - 1];
        p.mult = op_quant(s, &op, 0, 0);
        p.left_shift = op_quant(s, &op, 1, 0);
        p.diff_min = op.diff_min;
        k->softmax(&p, tp_tensor_elems(&t_in) / depth, depth, in, out);
        break;
    }
    default: /* RESHAPE: the planner aliases it; copy only when it did not */
        if (out != in) {
            memmove(out, in, t_out.size);
        }
        break;
    }
    return out;
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
    uint32_t i;
    int32_t prediction = -1;
    if (s == NULL) {
        return TP_ERR_ARG;
    }
    if (s->b.ops == NULL) {
        return TP_ERR_NOT_LOADED;
    }
    s->arena_high = 0;
    for (i = 0; i < s->b.n_ops; i++) {
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
