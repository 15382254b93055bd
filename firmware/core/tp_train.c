/* tp_train.c - the training interpreter: one sparse-update step, in place (docs/training.md).
 *
 * Mirrors host/tinyprop/reference/backward.py op for op: the forward pass under the training
 * plan (with 1-bit masks of the RELUs of trained ops), the loss, then each op of the backward
 * pass in reverse order down to the earliest one updated: its input gradients, then its
 * update, right there (no gradient outlives its layer). Every buffer is at the offset the host
 * planned (TRAN section); nothing else is used.
 */
#include <string.h>

#include "tp_forward.h"
#include "tp_loss.h"
#include "tp_optim.h"

static float *grad_of(tp_session *s, uint32_t tensor, uint32_t elems)
{
    return (float *)(void *)tp_arena_at(s, tp_tran_grad_offset(&s->b, tensor), 4u * elems);
}

/* One op of the backward pass, decoded once. */
typedef struct {
    tp_session *s;
    const tp_gradient_kernels *k;
    tp_train_op t;
    tp_op op;
    tp_tensor tin, tout;
    tp_shape in_shape, out_shape;
    tp_conv_params conv; /* CONV_2D, DEPTHWISE_CONV_2D */
    tp_weights w;        /* weighted ops */
    float *dy;
} backward_ctx;

/* dX of input 0 (plus, for ADD, input 1), accumulated from dY by the op's gradient kernel. */
static void input_grads(const backward_ctx *c)
{
    tp_session *s = c->s;
    uint32_t i;
    if (c->t.flags & TP_TRAN_GRAD_IN0) {
        uint32_t nin = tp_tensor_elems(&c->tin);
        float *dx = grad_of(s, c->op.inputs[0], nin);
        if (c->t.flags & TP_TRAN_ZERO_IN0) {
            for (i = 0; i < nin; i++) {
                dx[i] = 0.0f;
            }
        }
        switch (c->op.kind) {
        case TP_OP_FULLY_CONNECTED:
            c->k->fully_connected_input(&c->w, c->dy, dx);
            break;
        case TP_OP_CONV_2D:
            c->k->conv2d_input(&c->conv, &c->in_shape, &c->out_shape, &c->w, c->dy, dx);
            break;
        case TP_OP_DEPTHWISE_CONV_2D:
            c->k->depthwise_conv2d_input(&c->conv, &c->in_shape, &c->out_shape, &c->w, c->dy, dx);
            break;
        case TP_OP_ADD:
            c->k->add_input(nin, c->dy, dx);
            break;
        case TP_OP_AVERAGE_POOL_2D: {
            tp_pool_params p;
            memcpy(p.stride, c->conv.stride, 2);
            memcpy(p.pad, c->conv.pad, 2);
            memcpy(p.k, c->conv.k, 2);
            c->k->avg_pool2d_input(&p, &c->in_shape, &c->out_shape, c->dy, dx);
            break;
        }
        case TP_OP_MEAN:
            c->k->mean_hw_input(&c->in_shape, c->dy, dx);
            break;
        case TP_OP_PAD: {
            tp_pad_params p;
            memcpy(p.before, c->op.pad, 2);
            memcpy(p.after, c->op.pad_after, 2);
            c->k->pad_input(&p, &c->in_shape, &c->out_shape, c->dy, dx);
            break;
        }
        default: /* RESHAPE shares its gradient buffer with its input */
            break;
        }
    }
    if (c->t.flags & TP_TRAN_GRAD_IN1) { /* ADD's second input */
        tp_tensor t2;
        float *dx;
        uint32_t n2;
        tp_decode_tensor(s->b.tensors, c->op.inputs[1], &t2);
        n2 = tp_tensor_elems(&t2);
        dx = grad_of(s, c->op.inputs[1], n2);
        if (c->t.flags & TP_TRAN_ZERO_IN1) {
            for (i = 0; i < n2; i++) {
                dx[i] = 0.0f;
            }
        }
        c->k->add_input(n2, c->dy, dx);
    }
}

/* The op's bias and held weight rows, updated from dY. *v_end: velocities not yet handed out,
 * counted from the region's end (ops run descending, velocities are laid out ascending). */
static void update(const backward_ctx *c, uint32_t key, uint32_t *v_end)
{
    tp_session *s = c->s;
    uint32_t n_out = c->w.n_out, row_len = c->w.row_len, o;
    uint32_t positions = tp_tensor_elems(&c->tout) / n_out;
    tp_update u;
    u.params = s->params;
    u.velocity = NULL;
    u.lr = s->hp.lr;
    u.momentum = s->hp.momentum;
    u.scale_floor = c->t.scale_floor;
    u.s_x = c->tin.scale;
    u.key = key;
    u.qas = (s->hp.flags & TP_HP_NO_QAS) == 0u;
    if (s->b.req.optimizer != 0u) { /* counts checked by the loader */
        *v_end -= ((c->t.flags & TP_TRAN_BIAS) ? n_out : 0u) +
                  ((c->t.flags & TP_TRAN_WEIGHT) ? c->t.n_sel * row_len : 0u);
        u.velocity = s->params + tp_param_bytes(&s->b) + 4u * *v_end;
    }
    if (c->t.flags & TP_TRAN_BIAS) {
        for (o = 0; o < n_out; o++) {
            float db = c->k->bias(c->dy, positions, n_out, o);
            tp_optim_update_bias(&u, c->t.bias_params, o, db, tp_weights_scale(&c->w, o));
        }
    }
    if (c->t.flags & TP_TRAN_WEIGHT) {
        float *row = (float *)(void *)tp_arena_at(s, c->t.scratch_offset, 4u * row_len);
        uint32_t v0 = (c->t.flags & TP_TRAN_BIAS) ? n_out : 0u; /* first weight velocity */
        const int8_t *x = (const int8_t *)tp_arena_at(
            s, tp_tran_act_offset(&s->b, c->op.inputs[0]), c->tin.size);
        for (o = 0; o < n_out; o++) { /* held rows, in channel order */
            uint32_t r = tp_held_row(&s->b, &c->op, o);
            if (r == TP_NONE16) {
                continue;
            }
            if (c->op.kind == TP_OP_FULLY_CONNECTED) {
                c->k->fully_connected_weight(row_len, x, c->tin.zero_point, c->tin.scale, c->dy,
                                             o, row);
            } else if (c->op.kind == TP_OP_CONV_2D) {
                c->k->conv2d_weight(&c->conv, &c->in_shape, x, c->tin.zero_point, c->tin.scale,
                                    &c->out_shape, c->dy, o, row);
            } else {
                c->k->depthwise_conv2d_weight(&c->conv, &c->in_shape, x, c->tin.zero_point,
                                              c->tin.scale, &c->out_shape, c->dy, o, row);
            }
            tp_optim_update_row(&u, c->op.held_params + r * row_len, v0 + r * row_len, row,
                                row_len, tp_weights_scale(&c->w, o));
        }
    }
}

static void backward_op(tp_session *s, const uint8_t *rec, uint32_t key, uint32_t *v_end)
{
    backward_ctx c;
    uint32_t i, n;
    memset(&c, 0, sizeof c);
    c.s = s;
    c.k = (s->flags & TP_SESSION_REFERENCE_KERNELS) ? &tp_ref_gradient : &tp_target_gradient;
    tp_decode_train_op(rec, &c.t);
    tp_decode_op(s->b.ops, c.t.op, &c.op);
    tp_decode_tensor(s->b.tensors, c.op.inputs[0], &c.tin);
    tp_decode_tensor(s->b.tensors, c.op.output, &c.tout);
    tp_shape_of(&c.tin, &c.in_shape);
    tp_shape_of(&c.tout, &c.out_shape);
    tp_conv_params_of(&c.op, &c.conv);
    n = tp_tensor_elems(&c.tout);
    c.dy = grad_of(s, c.op.output, n);
    if (c.t.flags & TP_TRAN_MASK) { /* what the RELU clamped passes no gradient */
        const uint8_t *mask = tp_arena_at(s, c.t.mask_offset, (n + 7u) / 8u);
        for (i = 0; i < n; i++) {
            if (!(mask[i >> 3] & (1u << (i & 7u)))) {
                c.dy[i] = 0.0f;
            }
        }
    }
    if (c.op.kind <= TP_OP_FULLY_CONNECTED) {
        tp_tensor tw;
        tp_decode_tensor(s->b.tensors, c.op.inputs[1], &tw);
        tp_weights_of(s, &c.op, &tw, &c.w);
    }
    input_grads(&c);
    if (c.t.flags & (TP_TRAN_BIAS | TP_TRAN_WEIGHT)) {
        update(&c, key, v_end);
    }
}

/* 1-bit mask of the outputs a RELU/RELU6 passed through (1) or clamped (0). */
static void save_mask(tp_session *s, const uint8_t *rec, const int8_t *y)
{
    tp_train_op t;
    tp_op op;
    tp_tensor to;
    uint32_t i, n;
    uint8_t *mask;
    tp_decode_train_op(rec, &t);
    tp_decode_op(s->b.ops, t.op, &op);
    tp_decode_tensor(s->b.tensors, op.output, &to);
    n = to.size;
    mask = tp_arena_at(s, t.mask_offset, (n + 7u) / 8u);
    memset(mask, 0, (n + 7u) / 8u);
    for (i = 0; i < n; i++) {
        int keep = y[i] > op.act_min && (op.activation != 2u || y[i] < op.act_max);
        if (keep) {
            mask[i >> 3] = (uint8_t)(mask[i >> 3] | (1u << (i & 7u)));
        }
    }
}

tp_status tp_train_step(tp_session *s, int32_t label, tp_result *r)
{
    uint32_t k, first, last, n_cls;
    const int8_t *logits = NULL;
    float loss;
    tp_tensor tz;
    int32_t pred;
    if (s == NULL) {
        return TP_ERR_ARG;
    }
    if (s->b.ops == NULL) {
        return TP_ERR_NOT_LOADED;
    }
    if (s->b.train == NULL || s->params == NULL) {
        return TP_ERR_NO_TRAIN;
    }
    if (s->arena_len < s->b.req.arena_train) {
        return TP_ERR_ARENA_TOO_SMALL;
    }
    n_cls = s->b.req.n_classes;
    if (label < 0 || (uint32_t)label >= n_cls) {
        return TP_ERR_BAD_LABEL;
    }
    if (!(s->hp.lr >= 0.0f && s->hp.lr <= 1e30f) ||
        !(s->hp.momentum >= 0.0f && s->hp.momentum < 1.0f) ||
        (s->hp.momentum != 0.0f && s->b.req.optimizer == 0u)) {
        return TP_ERR_ARG; /* momentum needs the optimizer state (convert --momentum) */
    }
    first = tp_tran_first(&s->b);
    last = tp_tran_last(&s->b);
    s->arena_high = 0;
    {
        uint32_t tiled;
        tp_status st = tp_run_stage(s, TP_PLAN_TRAIN, &tiled); /* frozen: nothing to keep */
        if (st != TP_OK) {
            return st;
        }
        k = tiled;
    }
    for (; k <= last; k++) {
        const uint8_t *rec = tp_tran_record_of(&s->b, k);
        const int8_t *y = tp_run_op(s, k, TP_PLAN_TRAIN);
        if (rec != NULL && (rec[2] & TP_TRAN_MASK)) {
            save_mask(s, rec, y);
        }
        if (k == last) {
            logits = y;
        }
    }
    tp_decode_tensor(s->b.tensors, s->b.logits, &tz);
    pred = tp_argmax_s8(logits, n_cls);
    /* loss and logits gradient in the logits' gradient buffer */
    loss = tp_softmax_xent_f32(logits, tz.zero_point, tz.scale, n_cls, label,
                               grad_of(s, s->b.logits, n_cls));
    if (r != NULL) {
        memset(r, 0, sizeof *r);
        r->loss = loss;
        r->prediction = pred;
        r->label = label;
    }
    if (!(loss - loss == 0.0f)) { /* NaN or +-inf, exactly the reference's !isfinite */
        s->step++;
        if (r != NULL) {
            r->skipped = 1;
            r->arena_peak = s->arena_high;
        }
        return TP_ERR_NONFINITE;
    }
    {
        uint32_t key = tp_optim_step_key(s->hp.seed, s->step);
        uint32_t v_end = s->b.req.optimizer / 4u;
        for (k = last + 1; k-- > first;) {
            const uint8_t *rec = tp_tran_record_of(&s->b, k);
            if (rec != NULL) {
                backward_op(s, rec, key, &v_end);
            }
        }
    }
    s->step++;
    if (r != NULL) {
        r->arena_peak = s->arena_high;
    }
    return TP_OK;
}
