/* tp_exec.c - one op of a checked blob run by the session's kernels on given operands: whole
 * tensors (tp_forward.c), a tile's windows (tp_patch.c), or in place channel by channel. Every
 * arena access the caller makes goes through tp_arena_at; this file only adds the scratch. */
#include "tinyprop.h"
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

void tp_pool_params_of(const tp_op *op, tp_pool_params *p)
{
    uint32_t j;
    for (j = 0; j < 2; j++) {
        p->stride[j] = op->stride[j];
        p->pad[j] = op->pad[j];
        p->k[j] = op->k[j];
    }
    p->act_min = op->act_min;
    p->act_max = op->act_max;
}

void tp_pad_params_of(const tp_op *op, tp_pad_params *p)
{
    uint32_t j;
    for (j = 0; j < 2; j++) {
        p->before[j] = op->pad[j];
        p->after[j] = op->pad_after[j];
    }
    p->value = op->out_zp;
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

static const tp_forward_kernels *kernels_of(const tp_session *s)
{
    return (s->flags & TP_SESSION_REFERENCE_KERNELS) ? &tp_ref_forward : &tp_target_forward;
}

/* A weighted op's weights and requantization, channels from `first` on (a depthwise op run
 * channel by channel reads channel `first` as its channel 0). */
static void weights_from(tp_session *s, const tp_op *op, uint32_t first, tp_weights *w,
                         tp_requant *q)
{
    tp_tensor t_w, t_bias;
    tp_decode_tensor(s->b.tensors, op->inputs[1], &t_w);
    tp_weights_of(s, op, &t_w, w);
    q->bias = NULL;
    if (op->inputs[2] != TP_NONE16) {
        tp_decode_tensor(s->b.tensors, op->inputs[2], &t_bias);
        q->bias = tp_const_data(s, &t_bias) + 4u * first;
    }
    q->mult = s->b.data + op->mult_offset + 4u * first;
    q->shift = s->b.data + op->mult_offset + 4u * op->n_mult + 4u * first;
    /* a depthwise channel of the blob is its tensor's column `first`, taps n_out apart */
    w->data += first;
    if (w->held_map != NULL) {
        w->held_map += 2u * first;
    }
    if (w->n_scales > 1u) {
        w->scales += 4u * first;
    }
}

/* A depthwise convolution's output channels from `first` on (tp_exec_inplace: one). */
static void exec_depthwise(tp_session *s, const tp_op *op, tp_plan plan, const tp_act *in,
                           const tp_act *out, uint32_t first)
{
    const tp_forward_kernels *k = kernels_of(s);
    tp_conv_params p;
    tp_weights w;
    tp_requant q;
    void *scratch;
    tp_conv_params_of(op, &p);
    weights_from(s, op, first, &w, &q);
    scratch = op_scratch(s, op, plan,
                         k->depthwise_conv2d_scratch_bytes(&p, &in->shape, &out->shape), &k);
    k->depthwise_conv2d(&p, &in->shape, in->data, &w, &q, &out->shape, out->data, scratch);
}

void tp_exec_depthwise_conv2d(const tp_op_run *r)
{
    exec_depthwise(r->s, r->op, r->plan, r->in, r->out, 0u);
}

void tp_exec_conv2d(const tp_op_run *r)
{
    const tp_forward_kernels *k = kernels_of(r->s);
    const tp_act *in = r->in, *out = r->out;
    tp_conv_params p;
    tp_weights w;
    tp_requant q;
    void *scratch;
    tp_conv_params_of(r->op, &p);
    weights_from(r->s, r->op, 0u, &w, &q);
    scratch = op_scratch(r->s, r->op, r->plan, k->conv2d_scratch_bytes(&p, &in->shape, &out->shape),
                         &k);
    k->conv2d(&p, &in->shape, in->data, &w, &q, &out->shape, out->data, scratch);
}

void tp_exec_fully_connected(const tp_op_run *r)
{
    tp_session *s = r->s;
    const tp_op *op = r->op;
    const tp_forward_kernels *k = kernels_of(s);
    tp_tensor t_in, t_out;
    tp_weights w;
    tp_requant q;
    tp_fc_params p;
    uint32_t n_in = (uint32_t)(r->in->shape.h * r->in->shape.w * r->in->shape.c);
    void *scratch;
    tp_decode_tensor(s->b.tensors, op->inputs[0], &t_in);
    tp_decode_tensor(s->b.tensors, op->output, &t_out);
    weights_from(s, op, 0u, &w, &q);
    p.in_zp = op->in_zp;
    p.out_zp = op->out_zp;
    p.act_min = op->act_min;
    p.act_max = op->act_max;
    p.in_scale = t_in.scale;
    p.out_scale = t_out.scale;
    scratch = op_scratch(s, op, r->plan, k->fully_connected_scratch_bytes(&p, n_in, w.n_out), &k);
    k->fully_connected(&p, n_in, r->in->data, &w, q.bias, r->out->data, scratch);
}

void tp_exec_add(const tp_op_run *r)
{
    const tp_op *op = r->op;
    const tp_act *out = r->out;
    tp_add_params p;
    uint32_t j;
    p.in1_zp = op->in_zp;
    p.in2_zp = op->in2_zp;
    p.out_zp = op->out_zp;
    p.act_min = op->act_min;
    p.act_max = op->act_max;
    p.left_shift = op->left_shift;
    for (j = 0; j < 3; j++) { /* [output, input 1, input 2] */
        p.mult[j] = op_quant(r->s, op, 0, j);
        p.shift[j] = op_quant(r->s, op, 1, j);
    }
    kernels_of(r->s)->add(&p, (uint32_t)(out->shape.h * out->shape.w * out->shape.c), r->in->data,
                          r->in2->data, out->data);
}

void tp_exec_avg_pool2d(const tp_op_run *r)
{
    tp_pool_params p;
    tp_pool_params_of(r->op, &p);
    kernels_of(r->s)->avg_pool2d(&p, &r->in->shape, r->in->data, &r->out->shape, r->out->data);
}

void tp_exec_max_pool2d(const tp_op_run *r)
{
    tp_pool_params p;
    tp_pool_params_of(r->op, &p);
    kernels_of(r->s)->max_pool2d(&p, &r->in->shape, r->in->data, &r->out->shape, r->out->data);
}

void tp_exec_mean_hw(const tp_op_run *r)
{
    tp_mean_params p;
    p.in_zp = r->op->in_zp;
    p.out_zp = r->op->out_zp;
    p.mult = op_quant(r->s, r->op, 0, 0);
    p.shift = op_quant(r->s, r->op, 1, 0);
    kernels_of(r->s)->mean_hw(&p, &r->in->shape, r->in->data, r->out->data);
}

void tp_exec_pad(const tp_op_run *r)
{
    tp_pad_params p;
    tp_pad_params_of(r->op, &p);
    kernels_of(r->s)->pad(&p, &r->in->shape, r->in->data, &r->out->shape, r->out->data);
}

void tp_exec_softmax(const tp_op_run *r)
{
    tp_softmax_params p;
    const tp_shape *in = &r->in->shape;
    p.mult = op_quant(r->s, r->op, 0, 0);
    p.left_shift = op_quant(r->s, r->op, 1, 0);
    p.diff_min = r->op->diff_min;
    kernels_of(r->s)->softmax(&p, (uint32_t)(in->h * in->w), (uint32_t)in->c, r->in->data,
                              r->out->data);
}

/* The planner aliases a RESHAPE's output to its input; copy only when it did not. */
void tp_exec_reshape(const tp_op_run *r)
{
    const tp_act *in = r->in, *out = r->out;
    if (out->data != in->data) {
        memmove(out->data, in->data,
                (size_t)out->shape.h * (size_t)out->shape.w * (size_t)out->shape.c);
    }
}

#define EXEC_ENTRY(KIND, code, name, weights, inputs, grad, q_row, q_chan) \
    [TP_OP_##KIND] = tp_exec_##name,
static void (*const exec_entry[TP_OP_KIND_COUNT])(const tp_op_run *r) = {TP_OPS(EXEC_ENTRY)};
#undef EXEC_ENTRY

void tp_exec_op(tp_session *s, const tp_op *op, tp_plan plan, const tp_act *in, const tp_act *in2,
                const tp_act *out)
{
    tp_op_run r;
    r.s = s;
    r.op = op;
    r.plan = plan;
    r.in = in;
    r.in2 = in2;
    r.out = out;
    exec_entry[op->kind](&r); /* a kind the loader accepted: it has its row */
}

void tp_exec_inplace(tp_session *s, const tp_op *op, tp_plan plan, const tp_act *in,
                     const tp_act *out, int8_t *chan)
{
    uint32_t c, i, n = (uint32_t)(out->shape.h * out->shape.w), cout = (uint32_t)out->shape.c;
    tp_act in_c = *in, out_c;
    out_c.data = chan;
    out_c.shape = out->shape;
    out_c.shape.c = 1;
    for (c = 0; c < cout; c++) {
        /* channel c of the input is read by channel c of the output only (multiplier 1): once
         * it is in the buffer, nothing reads the input's channel c again, and the output's
         * channel c lands on the input's bytes of channel c of the first n pixels */
        in_c.data = in->data + c;
        exec_depthwise(s, op, plan, &in_c, &out_c, c);
        for (i = 0; i < n; i++) {
            out->data[i * cout + c] = chan[i];
        }
    }
}
