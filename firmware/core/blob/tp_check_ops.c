/* tp_check_ops.c - every OPS record against the tensors it names: its fields, multipliers,
 * operands, the shapes its kind needs and its held weight rows; then the model's input,
 * output and logits. */
#include "tinyprop.h"
#include <string.h>

#include "tp_check.h"

/* The tensor (int8 activation, int8 weights, int32 bias) a position of an op must hold. */
typedef enum { ROLE_ACT, ROLE_WEIGHTS, ROLE_BIAS } tensor_role;

/* Decode tensor index i (TP_NONE16 allowed when optional) and check it can play role. */
static tp_status operand(const tp_blob_view *v, uint32_t i, tensor_role role, int optional,
                         tp_tensor *t)
{
    memset(t, 0, sizeof *t);
    if (i == TP_NONE16 && optional) {
        return TP_OK;
    }
    if (i >= v->n_tensors) {
        return TP_ERR_BLOB_INVALID;
    }
    tp_decode_tensor(v->tensors, i, t);
    switch (role) {
    case ROLE_ACT: /* whole in the arena, or tile by tile inside the stage (check_tile) */
        return t->dtype == TP_DT_INT8 && (t->flags & (TP_T_ARENA | TP_T_TILED))
                   ? TP_OK
                   : TP_ERR_BLOB_INVALID;
    case ROLE_WEIGHTS:
        return t->dtype == TP_DT_INT8 && (t->flags & TP_T_CONST) ? TP_OK : TP_ERR_BLOB_INVALID;
    default:
        return t->dtype == TP_DT_INT32 && (t->flags & TP_T_CONST) && t->rank == 1u
                   ? TP_OK
                   : TP_ERR_BLOB_INVALID;
    }
}

static int int8_range(int32_t v)
{
    return v >= -128 && v <= 127;
}

/* Multipliers and shifts inside DATA and inside what tp_mbqm accepts. */
static tp_status check_multipliers(const tp_blob_view *v, const tp_op *op, tp_fault *f)
{
    uint32_t i;
    if (op->n_mult == 0u) {
        return TP_OK;
    }
    if (!within(op->mult_offset, 8ull * op->n_mult, v->data_len)) {
        return TP_REFUSE(f, TP_ERR_BLOB_BOUNDS, OP_MULTIPLIERS_BOUNDS, OPS, op->index,
                         OPS_MULT_OFFSET);
    }
    for (i = 0; i < op->n_mult; i++) {
        int32_t m = tp_le_i32(v->data + op->mult_offset, i);
        int32_t sh = tp_le_i32(v->data + op->mult_offset + 4u * op->n_mult, i);
        if (m < 0 || sh < -31 || sh > 30) {
            return TP_REFUSE(f, TP_ERR_BLOB_INVALID, OP_MULTIPLIERS, OPS, op->index,
                             OPS_MULT_OFFSET);
        }
    }
    return TP_OK;
}

/* The operands of the op's kind (tp_ops.h) in c, checked for their roles, then the kind's own
 * checks (tp_op_checks.c). */
static int op_shapes_ok(tp_checked_op *c)
{
    const tp_blob_view *v = c->v;
    const tp_op *op = c->op;
    const tp_op_def *d = &tp_op_defs[op->kind];
    if (d->weighted) {
        uint32_t n_ch;
        if (operand(v, op->inputs[1], ROLE_WEIGHTS, 0, &c->weights) != TP_OK ||
            operand(v, op->inputs[2], ROLE_BIAS, 1, &c->bias) != TP_OK) {
            return 0;
        }
        n_ch = tp_weight_channels(op, &c->weights);
        /* per-channel scales (FULLY_CONNECTED's requantization, QAS) are read one a channel */
        if (!(c->weights.n_scales <= 1u || c->weights.n_scales == n_ch) || op->n_mult != n_ch ||
            (c->bias.rank != 0u && c->bias.dims[0] != n_ch)) {
            return 0;
        }
    }
    if (d->inputs == 2u &&
        (operand(v, op->inputs[1], ROLE_ACT, 0, &c->in2) != TP_OK || !int8_range(op->in2_zp))) {
        return 0;
    }
    return d->check(c);
}

/* The weight rows an op holds in the params region: a u16 map from output channel to held
 * row inside DATA, rows numbered 0, 1, ... in channel order, all inside params_bytes. */
static tp_status check_held(const tp_blob_view *v, const tp_op *op, tp_fault *f)
{
    tp_tensor w;
    uint32_t n_ch, o, held = 0;
    if (op->held_map == TP_NONE32) {
        return op->held_params == TP_NONE32 ? TP_OK
                                            : TP_REFUSE(f, TP_ERR_BLOB_INVALID, HELD_PARAMS_ALONE,
                                                        OPS, op->index, OPS_HELD_PARAMS);
    }
    if (!tp_op_defs[op->kind].weighted) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, HELD_KIND, OPS, op->index, OPS_HELD_MAP);
    }
    tp_decode_tensor(v->tensors, op->inputs[1], &w); /* checked by op_shapes_ok */
    n_ch = tp_weight_channels(op, &w);
    if (!within(op->held_map, 2ull * n_ch, v->data_len)) {
        return TP_REFUSE(f, TP_ERR_BLOB_BOUNDS, HELD_MAP_BOUNDS, OPS, op->index, OPS_HELD_MAP);
    }
    for (o = 0; o < n_ch; o++) {
        uint32_t r = tp_le_u16(v->data + op->held_map, o);
        if (r != TP_NONE16 && r != held++) { /* held counts the rows seen so far */
            return TP_REFUSE(f, TP_ERR_BLOB_INVALID, HELD_ROWS, OPS, op->index, OPS_HELD_MAP);
        }
    }
    if (held == 0u) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, HELD_ROWS, OPS, op->index, OPS_HELD_MAP);
    }
    return within(op->held_params, (uint64_t)held * (w.size / n_ch), tp_param_bytes(v))
               ? TP_OK
               : TP_REFUSE(f, TP_ERR_BLOB_BOUNDS, HELD_PARAMS, OPS, op->index, OPS_HELD_PARAMS);
}

static tp_status check_op(const tp_blob_view *v, const tp_op *op, tp_fault *f)
{
    tp_checked_op c;
    tp_status st;
    if (op->kind == 0u || op->kind >= TP_OP_KIND_COUNT || op->activation > 2u || op->mode > 2u ||
        !int8_range(op->in_zp) || !int8_range(op->out_zp) || !int8_range(op->act_min) ||
        !int8_range(op->act_max) || op->act_min > op->act_max) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, OP_FIELDS, OPS, op->index, OPS_KIND);
    }
    st = check_multipliers(v, op, f);
    if (st != TP_OK) {
        return st;
    }
    memset(&c, 0, sizeof c);
    c.v = v;
    c.op = op;
    if (operand(v, op->inputs[0], ROLE_ACT, 0, &c.in) != TP_OK) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, OP_OPERAND, OPS, op->index, OPS_INPUTS);
    }
    if (operand(v, op->output, ROLE_ACT, 0, &c.out) != TP_OK) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, OP_OPERAND, OPS, op->index, OPS_OUTPUT);
    }
    if (!op_shapes_ok(&c)) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, OP_SHAPES, OPS, op->index, NONE);
    }
    return check_held(v, op, f);
}

/* An activation the header names (input, output, logits): an int8 tensor in the arena (the
 * input may be TILED: read in row bands). */
static tp_status check_io(const tp_blob_view *v, uint32_t i, int whole, tp_tensor *t,
                          uint32_t field, tp_fault *f)
{
    if (operand(v, i, ROLE_ACT, 0, t) != TP_OK || (whole && !(t->flags & TP_T_ARENA))) {
        return TP_REFUSE_FIELD(f, TP_ERR_BLOB_INVALID, IO_TENSOR, HEADER, TP_NO_RECORD, field);
    }
    return TP_OK;
}

tp_status tp_check_ops(tp_blob_view *v, tp_fault *f)
{
    uint32_t i, logits_made = 0u;
    tp_tensor t;
    tp_status st;
    for (i = 0; i < v->n_ops; i++) {
        tp_op op;
        tp_decode_op(v->ops, i, &op);
        st = check_op(v, &op, f);
        if (st != TP_OK) {
            return st;
        }
        logits_made |= op.output == v->logits ? 1u : 0u;
    }
    /* no op writing the logits: inference would return no prediction */
    if (!logits_made) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, LOGITS_MADE, HEADER, TP_NO_RECORD, HDR_LOGITS);
    }
    st = check_io(v, v->input, 0, &t, TP_FIELD_HDR_INPUT, f);
    if (st != TP_OK) {
        return st;
    }
    v->req.input_bytes = t.size;
    st = check_io(v, v->output, 1, &t, TP_FIELD_HDR_OUTPUT, f);
    if (st == TP_OK) {
        st = check_io(v, v->logits, 1, &t, TP_FIELD_HDR_LOGITS, f);
    }
    if (st == TP_OK && tp_tensor_elems(&t) != v->req.n_classes) {
        st = TP_REFUSE(f, TP_ERR_BLOB_INVALID, N_CLASSES, HEADER, TP_NO_RECORD, HDR_N_CLASSES);
    }
    return st;
}
