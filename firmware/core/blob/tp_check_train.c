/* tp_check_train.c - the TRAN section against the rest of the blob: every offset the training
 * step will use lies inside the training arena or the params region, and the ops it names can
 * do what it asks. */
#include "tinyprop.h"
#include "tp_check.h"

/* Whether tensor's gradient buffer holds a sink's channel sums (its producer's record is
 * REDUCED). */
static int is_sums(const tp_blob_view *b, uint32_t tensor)
{
    uint32_t k = tp_producer_of(b, tensor);
    const uint8_t *rec = k != TP_NONE32 ? tp_tran_record_of(b, k) : NULL;
    return rec != NULL && (rec[TP_TRAN_OP_FLAGS2] & TP_TRAN_REDUCED) != 0u;
}

/* Bytes of a sink's gradient buffer: exponent and padding, one int64 a channel. */
static uint64_t sums_bytes(const tp_tensor *t)
{
    return TP_GM_HEADER + 8ull * (t->rank > 0u ? t->dims[t->rank - 1u] : 1u);
}

/* Bytes of tensor i's gradient buffer in the blob's gradient format. */
static uint64_t grad_bytes(const tp_blob_view *v, uint32_t i)
{
    tp_tensor t;
    tp_decode_tensor(v->tensors, i, &t);
    return is_sums(v, i) ? sums_bytes(&t) : tp_gm_buffer_bytes(tp_tran_grad_format(v), t.size);
}

/* Whether the gradient buffers of tensors a and b (both have one) overlap other than as one
 * buffer: the planner runs an op whose gradient passes through unchanged (RESHAPE) in place,
 * but the backward reads an op's output gradient while it writes its inputs', and a buffer
 * shifted against the other would make the kernels' row copies memcpy over themselves. */
static int grads_overlap(const tp_blob_view *v, uint32_t a, uint32_t b)
{
    uint64_t ga = tp_tran_grad_offset(v, a), gb = tp_tran_grad_offset(v, b);
    uint64_t na = grad_bytes(v, a), nb = grad_bytes(v, b);
    return ga < gb + nb && gb < ga + na && (ga != gb || na != nb);
}

/* Every training-plan offset inside the training arena, gradient buffers 4-aligned (sums 8). */
static tp_status check_train_tensors(const tp_blob_view *v, tp_fault *f)
{
    uint32_t i;
    for (i = 0; i < v->n_tensors; i++) {
        tp_tensor t;
        uint32_t a = tp_tran_act_offset(v, i), g = tp_tran_grad_offset(v, i);
        tp_decode_tensor(v->tensors, i, &t);
        if (a != TP_NONE32 && !within(a, t.size, v->req.arena_train)) {
            return TP_REFUSE(f, TP_ERR_BLOB_BOUNDS, TRAN_ACTIVATION_BOUNDS, TRAN, TP_NO_RECORD,
                             TRAN_OFF_OFFSET);
        }
        if (g != TP_NONE32 &&
            (t.size > 0x3FFFFFFFu || !within(g, grad_bytes(v, i), v->req.arena_train))) {
            return TP_REFUSE(f, TP_ERR_BLOB_BOUNDS, TRAN_GRADIENT_BOUNDS, TRAN, TP_NO_RECORD,
                             TRAN_OFF_OFFSET);
        }
        if (g != TP_NONE32 && (g & (is_sums(v, i) ? 7u : 3u)) != 0u) {
            /* float gradients, a map's exponent and a sink's int64 sums (after the 8-byte
             * header): an unaligned one faults on the M4 */
            return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TRAN_GRADIENT_ALIGN, TRAN, TP_NO_RECORD,
                             TRAN_OFF_OFFSET);
        }
    }
    return TP_OK;
}

/* TRAN record j against its op; *velocities counts the parameters it trains. */
static tp_status check_train_op(const tp_blob_view *v, uint32_t j, const tp_train_op *t,
                                uint64_t *velocities, tp_fault *f)
{
    tp_op op;
    tp_tensor tw, to;
    uint32_t n_out = 0, row = 0, i;
    /* ascending ops inside [first, last], after the stage: the step walks them in order */
    if (t->op >= v->n_ops || t->op < v->stage_ops || t->op < tp_tran_first(v) ||
        t->op > tp_tran_last(v) || (j > 0u && t->op <= tp_tran_record_op(v, j - 1u))) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TRAN_ORDER, TRAN, j, TRAN_OP_OP);
    }
    tp_decode_op(v->ops, t->op, &op);
    tp_decode_tensor(v->tensors, op.output, &to);
    if (tp_tran_grad_offset(v, op.output) == TP_NONE32) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TRAN_OUTPUT_GRADIENT, TRAN, j, TRAN_OP_OP);
    }
    if ((t->flags & TP_TRAN_GRAD_IN0) && tp_tran_grad_offset(v, op.inputs[0]) == TP_NONE32) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TRAN_INPUT_GRADIENT, TRAN, j, TRAN_OP_FLAGS);
    }
    if ((t->flags & TP_TRAN_GRAD_IN1) &&
        (op.kind != TP_OP_ADD || tp_tran_grad_offset(v, op.inputs[1]) == TP_NONE32)) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TRAN_INPUT_GRADIENT, TRAN, j, TRAN_OP_FLAGS);
    }
    if (((t->flags & TP_TRAN_GRAD_IN0) && grads_overlap(v, op.inputs[0], op.output)) ||
        ((t->flags & TP_TRAN_GRAD_IN1) && grads_overlap(v, op.inputs[1], op.output))) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TRAN_GRADIENT_OVERLAP, TRAN, j, TRAN_OP_FLAGS);
    }
    /* sinks and their writers: integer maps only; a sink trains just its bias; an input whose
     * gradient is a sink's sums is written only by reducing into them, as its first writer */
    if ((t->flags2 & ~(uint32_t)(TP_TRAN_REDUCED | TP_TRAN_REDUCE_IN0 | TP_TRAN_REDUCE_IN1)) ||
        (t->flags2 != 0u && tp_tran_grad_format(v) == TP_GRAD_FLOAT32) ||
        ((t->flags2 & TP_TRAN_REDUCED) &&
         (t->flags & (TP_TRAN_BIAS | TP_TRAN_WEIGHT | TP_TRAN_GRAD_IN0 | TP_TRAN_GRAD_IN1)) !=
             TP_TRAN_BIAS)) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TRAN_SINK, TRAN, j, TRAN_OP_FLAGS2);
    }
    for (i = 0; i < 2u; i++) {
        uint32_t need = i == 0u ? TP_TRAN_GRAD_IN0 : TP_TRAN_GRAD_IN1;
        uint32_t zero = i == 0u ? TP_TRAN_ZERO_IN0 : TP_TRAN_ZERO_IN1;
        uint32_t reduce = i == 0u ? TP_TRAN_REDUCE_IN0 : TP_TRAN_REDUCE_IN1;
        int sums = (t->flags & need) && is_sums(v, op.inputs[i]);
        if (((t->flags2 & reduce) != 0u) != sums || (sums && (t->flags & zero) == 0u)) {
            return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TRAN_SINK_WRITER, TRAN, j, TRAN_OP_FLAGS2);
        }
    }
    if ((t->flags & TP_TRAN_MASK) &&
        !within(t->mask_offset, (to.size + 7u) / 8u, v->req.arena_train)) {
        return TP_REFUSE(f, TP_ERR_BLOB_BOUNDS, TRAN_MASK, TRAN, j, TRAN_OP_MASK_OFFSET);
    }
    if (t->flags & (TP_TRAN_BIAS | TP_TRAN_WEIGHT)) {
        if (!tp_op_defs[op.kind].weighted) {
            return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TRAN_UPDATE_KIND, TRAN, j, TRAN_OP_FLAGS);
        }
        tp_decode_tensor(v->tensors, op.inputs[1], &tw);
        n_out = tp_weight_channels(&op, &tw);
        if (n_out == 0u) {
            return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TRAN_UPDATE_KIND, TRAN, j, TRAN_OP_FLAGS);
        }
        row = tw.size / n_out;
    }
    if ((t->flags & TP_TRAN_BIAS) &&
        (op.inputs[2] == TP_NONE16 || !within(t->bias_params, 4ull * n_out, tp_param_bytes(v)))) {
        return TP_REFUSE(f, TP_ERR_BLOB_BOUNDS, TRAN_BIAS, TRAN, j, TRAN_OP_BIAS_PARAMS);
    }
    *velocities += (t->flags & TP_TRAN_BIAS) ? n_out : 0u;
    *velocities += (t->flags & TP_TRAN_WEIGHT) ? (uint64_t)t->n_sel * row : 0u;
    if (t->flags & TP_TRAN_WEIGHT) {
        uint32_t held = 0;
        for (i = 0; i < n_out; i++) {
            held += tp_held_row(v, &op, i) != TP_NONE16 ? 1u : 0u;
        }
        if (t->n_sel == 0u || t->n_sel != held) { /* check_held: the rows fit the params */
            return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TRAN_N_SEL, TRAN, j, TRAN_OP_N_SEL);
        }
    }
    i = tp_backward_scratch_bytes(v, &op, t->flags);
    if (i != 0u) {
        if (!within(t->scratch_offset, i, v->req.arena_train)) {
            return TP_REFUSE(f, TP_ERR_BLOB_BOUNDS, TRAN_SCRATCH_BOUNDS, TRAN, j,
                             TRAN_OP_SCRATCH_OFFSET);
        }
        if ((t->scratch_offset & 3u) != 0u) {
            return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TRAN_SCRATCH_ALIGN, TRAN, j,
                             TRAN_OP_SCRATCH_OFFSET);
        }
    }
    return TP_OK;
}

tp_status tp_check_train(const tp_blob_view *v, tp_fault *f)
{
    uint32_t n_ops, j, first, last;
    uint64_t velocities = 0; /* trained parameters: one float32 velocity each under momentum */
    tp_op op;
    tp_status st;
    if (v->train == NULL) {
        return TP_OK;
    }
    if (v->train_len < TP_TRAN_HDR_BYTES) {
        return TP_REFUSE(f, TP_ERR_BLOB_BOUNDS, TRAN_HEADER, TRAN, TP_NO_RECORD, NONE);
    }
    n_ops = tp_tran_ops(v);
    first = tp_tran_first(v);
    last = tp_tran_last(v);
    if (tp_rd_u32(v->train + TP_TRAN_HDR_N_TENSORS) != v->n_tensors || last >= v->n_ops ||
        first > last || tp_tran_grad_format(v) >= TP_GRAD_FORMATS || tp_tran_loss(v) >= TP_LOSSES ||
        tp_rd_u16(v->train + TP_TRAN_HDR_RESERVED) != 0u) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TRAN_FIELDS, TRAN, TP_NO_RECORD, NONE);
    }
    if ((uint64_t)TP_TRAN_HDR_BYTES + 2ull * TP_TRAN_OFF_BYTES * v->n_tensors +
            (uint64_t)TP_TRAN_OP_BYTES * n_ops >
        v->train_len) {
        return TP_REFUSE(f, TP_ERR_BLOB_BOUNDS, TRAN_LENGTH, TRAN, TP_NO_RECORD, TRAN_HDR_N_OPS);
    }
    /* the step takes the loss on the header's last op: it must make the logits, and the logits
     * need a gradient buffer (the loss writes it before any train op runs) */
    tp_decode_op(v->ops, last, &op);
    if (op.output != v->logits || tp_tran_grad_offset(v, v->logits) == TP_NONE32) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TRAN_LOSS, TRAN, TP_NO_RECORD, TRAN_HDR_LAST);
    }
    /* mse's target is the input, read whole from the training arena after the forward pass */
    if (tp_tran_loss(v) == TP_LOSS_MSE) {
        tp_tensor in, out;
        tp_decode_tensor(v->tensors, v->input, &in);
        tp_decode_tensor(v->tensors, v->logits, &out);
        if (tp_tensor_elems(&in) != tp_tensor_elems(&out) || (in.flags & TP_T_TILED) ||
            tp_tran_act_offset(v, v->input) == TP_NONE32) {
            return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TRAN_TARGET, TRAN, TP_NO_RECORD,
                             TRAN_HDR_LOSS);
        }
    }
    /* nothing trains inside the tiled stage: the backward pass never reaches it */
    if (first < v->stage_ops) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TRAN_STAGE, TRAN, TP_NO_RECORD, TRAN_HDR_FIRST);
    }
    /* the training forward (ops 0..last, after the tiled stage) finds its activations under the
     * training plan (the op checks covered these operands: input 0, ADD's input 1, the output) */
    for (j = v->stage_ops; j <= last; j++) {
        tp_decode_op(v->ops, j, &op);
        if (tp_tran_act_offset(v, op.inputs[0]) == TP_NONE32 ||
            tp_tran_act_offset(v, op.output) == TP_NONE32 ||
            (op.kind == TP_OP_ADD && tp_tran_act_offset(v, op.inputs[1]) == TP_NONE32)) {
            return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TRAN_ACTIVATION, OPS, j, NONE);
        }
    }
    st = check_train_tensors(v, f);
    for (j = 0; j < n_ops && st == TP_OK; j++) {
        tp_train_op t;
        tp_decode_train_op(tp_tran_record(v, j), &t);
        st = check_train_op(v, j, &t, &velocities, f);
    }
    /* optimizer state, when there is any, is exactly one velocity per trained parameter */
    if (st == TP_OK && v->req.optimizer != 0u && 4u * velocities != v->req.optimizer) {
        st = TP_REFUSE(f, TP_ERR_BLOB_INVALID, TRAN_VELOCITIES, HEADER, TP_NO_RECORD,
                       HDR_OPTIMIZER_BYTES);
    }
    return st;
}
