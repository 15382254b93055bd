/* tp_blob.c - the blob v2 loader (docs/blob-format.md): checks everything a kernel or an
 * interpreter will later trust, the training program (TRAN) included.
 *
 * Every check reads only inside blob[0..len) and compares in 64-bit or by subtraction, so no
 * field value can overflow an offset; it is the fuzz entry point (tp_blob_requirements).
 */
#include "tp_blob.h"

#include <string.h>

/* The tensor (int8 activation, int8 weights, int32 bias) a position of an op must hold. */
typedef enum { ROLE_ACT, ROLE_WEIGHTS, ROLE_BIAS } tensor_role;

static int within(uint32_t offset, uint64_t size, uint32_t region)
{
    return offset <= region && size <= (uint64_t)(region - offset);
}

static int same_section_id(const uint8_t *p, const char *id)
{
    return memcmp(p, id, 4) == 0;
}

static tp_status read_sections(tp_blob_view *v, const uint8_t *blob, uint32_t total)
{
    static const char *const ids[8] = {"TENS", "OPS ", "DATA", "NAME",
                                       "TRAN", "SCRA", "TILE", "INPL"};
    uint32_t n_sec = tp_rd_u16(blob + 16), body_end = total - TP_CRC_SIZE;
    uint32_t table_end = TP_HEADER_SIZE + n_sec * TP_SECTION_SIZE, i, k;
    const uint8_t *found[8] = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    uint32_t sizes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (table_end > body_end) {
        return TP_ERR_BLOB_BOUNDS;
    }
    for (i = 0; i < n_sec; i++) {
        const uint8_t *rec = blob + TP_HEADER_SIZE + i * TP_SECTION_SIZE;
        uint32_t off = tp_rd_u32(rec + 4), size = tp_rd_u32(rec + 8);
        if (off < table_end || !within(off, size, body_end)) {
            return TP_ERR_BLOB_BOUNDS;
        }
        if (off % TP_SECTION_ALIGN != 0u) {
            return TP_ERR_BLOB_INVALID;
        }
        for (k = 0; k < 8; k++) { /* unknown sections are skipped: later minor additions */
            if (same_section_id(rec, ids[k])) {
                if (found[k] != NULL) {
                    return TP_ERR_BLOB_INVALID;
                }
                found[k] = blob + off;
                sizes[k] = size;
            }
        }
    }
    if (found[0] == NULL || found[1] == NULL || found[2] == NULL ||
        sizes[0] % TP_TENSOR_SIZE != 0u || sizes[1] % TP_OP_SIZE != 0u || sizes[1] == 0u ||
        sizes[0] / TP_TENSOR_SIZE >= TP_NONE16) {
        return TP_ERR_BLOB_INVALID;
    }
    v->tensors = found[0];
    v->n_tensors = sizes[0] / TP_TENSOR_SIZE;
    v->ops = found[1];
    v->n_ops = sizes[1] / TP_OP_SIZE;
    v->data = found[2];
    v->data_len = sizes[2];
    v->train = found[4]; /* checked last (check_train), against the rest */
    v->train_len = sizes[4];
    /* the scratch plan: exactly its header and one record an op (check_scratch) */
    if (found[5] != NULL && (sizes[5] < TP_SCRA_HEADER || tp_rd_u16(found[5]) != v->n_ops ||
                             sizes[5] != TP_SCRA_HEADER + TP_SCRA_OP * v->n_ops)) {
        return TP_ERR_BLOB_INVALID;
    }
    v->scratch = found[5];
    /* the tiled stage and the in-place ops: checked last (check_tile, check_inplace) */
    v->tile = found[6];
    v->tile_len = sizes[6];
    v->inplace = found[7];
    v->inplace_len = sizes[7];
    return TP_OK;
}

static tp_status check_tensor(const tp_blob_view *v, const tp_tensor *t)
{
    static const uint32_t dtype_size[4] = {0, 1, 4, 4};
    uint64_t bytes;
    uint32_t d;
    if (t->dtype == TP_DT_NONE) {
        return t->flags == 0u && t->size == 0u ? TP_OK : TP_ERR_BLOB_INVALID;
    }
    if (t->dtype > TP_DT_FLOAT32 || t->rank > 4u || (t->flags & ~15u) != 0u ||
        ((t->flags & TP_T_TILED) != 0u && (t->flags != TP_T_TILED || t->dtype != TP_DT_INT8)) ||
        (t->flags & (TP_T_CONST | TP_T_ARENA)) == (TP_T_CONST | TP_T_ARENA) ||
        ((t->flags & TP_T_TRAINABLE) != 0u && (t->flags & TP_T_CONST) == 0u)) {
        return TP_ERR_BLOB_INVALID;
    }
    bytes = dtype_size[t->dtype];
    for (d = 0; d < 4; d++) {
        if ((d < t->rank) != (t->dims[d] != 0u)) {
            return TP_ERR_BLOB_INVALID; /* no empty dims; unused ones are 0 */
        }
        bytes *= d < t->rank ? t->dims[d] : 1u;
    }
    /* < 2^31 bytes: kernels index with int32 */
    if (bytes != t->size || bytes > 0x7FFFFFFFu) {
        return TP_ERR_BLOB_INVALID;
    }
    /* int8 zero points lie in the int8 range (TFLite's spec); the kernels' offsets rely on it */
    if (t->dtype == TP_DT_INT8 && (t->zero_point < -128 || t->zero_point > 127)) {
        return TP_ERR_BLOB_INVALID;
    }
    if ((t->flags & TP_T_CONST) != 0u && !within(t->offset, t->size, v->data_len)) {
        return TP_ERR_BLOB_BOUNDS;
    }
    if ((t->flags & TP_T_ARENA) != 0u) {
        if (t->dtype != TP_DT_INT8) {
            return TP_ERR_BLOB_INVALID;
        }
        if (!within(t->offset, t->size, v->req.arena_infer)) {
            return TP_ERR_BLOB_BOUNDS;
        }
    }
    /* TRAINABLE marks biases, held whole; held weight rows are an op's (check_held) */
    if ((t->flags & TP_T_TRAINABLE) != 0u) {
        if (t->dtype != TP_DT_INT32) {
            return TP_ERR_BLOB_INVALID;
        }
        if (!within(t->params_offset, t->size, tp_param_bytes(v))) {
            return TP_ERR_BLOB_BOUNDS;
        }
    }
    if (t->n_scales != 0u && !within(t->scales_offset, 4ull * t->n_scales, v->data_len)) {
        return TP_ERR_BLOB_BOUNDS;
    }
    return TP_OK;
}

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
        return t->dtype == TP_DT_INT8 && (t->flags & (TP_T_ARENA | TP_T_TILED)) ? TP_OK
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
static tp_status check_multipliers(const tp_blob_view *v, const tp_op *op)
{
    uint32_t i;
    if (op->n_mult == 0u) {
        return TP_OK;
    }
    if (!within(op->mult_offset, 8ull * op->n_mult, v->data_len)) {
        return TP_ERR_BLOB_BOUNDS;
    }
    for (i = 0; i < op->n_mult; i++) {
        int32_t m = tp_le_i32(v->data + op->mult_offset, i);
        int32_t sh = tp_le_i32(v->data + op->mult_offset + 4u * op->n_mult, i);
        if (m < 0 || sh < -31 || sh > 30) {
            return TP_ERR_BLOB_INVALID;
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
    if (d->inputs == 2u && (operand(v, op->inputs[1], ROLE_ACT, 0, &c->in2) != TP_OK ||
                            !int8_range(op->in2_zp))) {
        return 0;
    }
    return d->check(c);
}

/* The weight rows an op holds in the params region: a u16 map from output channel to held
 * row inside DATA, rows numbered 0, 1, ... in channel order, all inside params_bytes. */
static tp_status check_held(const tp_blob_view *v, const tp_op *op)
{
    tp_tensor w;
    uint32_t n_ch, o, held = 0;
    if (op->held_map == TP_NONE32) {
        return op->held_params == TP_NONE32 ? TP_OK : TP_ERR_BLOB_INVALID;
    }
    if (!tp_op_defs[op->kind].weighted) {
        return TP_ERR_BLOB_INVALID;
    }
    tp_decode_tensor(v->tensors, op->inputs[1], &w); /* checked by op_shapes_ok */
    n_ch = tp_weight_channels(op, &w);
    if (!within(op->held_map, 2ull * n_ch, v->data_len)) {
        return TP_ERR_BLOB_BOUNDS;
    }
    for (o = 0; o < n_ch; o++) {
        uint32_t r = tp_rd_u16(v->data + op->held_map + 2u * o);
        if (r != TP_NONE16 && r != held++) { /* held counts the rows seen so far */
            return TP_ERR_BLOB_INVALID;
        }
    }
    if (held == 0u) {
        return TP_ERR_BLOB_INVALID;
    }
    return within(op->held_params, (uint64_t)held * (w.size / n_ch), tp_param_bytes(v))
               ? TP_OK
               : TP_ERR_BLOB_BOUNDS;
}

static tp_status check_op(const tp_blob_view *v, const tp_op *op)
{
    tp_checked_op c;
    tp_status st;
    if (op->kind == 0u || op->kind >= TP_OP_KIND_COUNT || op->activation > 2u ||
        op->mode > 2u || !int8_range(op->in_zp) || !int8_range(op->out_zp) ||
        !int8_range(op->act_min) || !int8_range(op->act_max) || op->act_min > op->act_max) {
        return TP_ERR_BLOB_INVALID;
    }
    st = check_multipliers(v, op);
    if (st != TP_OK) {
        return st;
    }
    memset(&c, 0, sizeof c);
    c.v = v;
    c.op = op;
    if (operand(v, op->inputs[0], ROLE_ACT, 0, &c.in) != TP_OK ||
        operand(v, op->output, ROLE_ACT, 0, &c.out) != TP_OK || !op_shapes_ok(&c)) {
        return TP_ERR_BLOB_INVALID;
    }
    return check_held(v, op);
}

/* ---- the training program ---- */

const uint8_t *tp_tran_record_of(const tp_blob_view *b, uint32_t k)
{
    uint32_t j, n;
    if (b->train == NULL) {
        return NULL;
    }
    n = tp_rd_u16(b->train + 4);
    for (j = 0; j < n; j++) {
        const uint8_t *p = b->train + TP_TRAN_HEADER + 8u * b->n_tensors + TP_TRAN_OP * j;
        if (tp_rd_u16(p) == k) {
            return p;
        }
    }
    return NULL;
}

uint32_t tp_producer_of(const tp_blob_view *b, uint32_t tensor)
{
    uint32_t k;
    for (k = 0; k < b->n_ops; k++) {
        if (tp_rd_u16(b->ops + (uint32_t)TP_OP_SIZE * k + 10) == tensor) {
            return k;
        }
    }
    return TP_NONE32;
}

/* Whether tensor's gradient buffer holds a sink's channel sums (its producer's record is
 * REDUCED). */
static int is_sums(const tp_blob_view *b, uint32_t tensor)
{
    uint32_t k = tp_producer_of(b, tensor);
    const uint8_t *rec = k != TP_NONE32 ? tp_tran_record_of(b, k) : NULL;
    return rec != NULL && (rec[3] & TP_TRAN_REDUCED) != 0u;
}

/* Bytes of a sink's gradient buffer: exponent and padding, one int64 a channel. */
static uint64_t sums_bytes(const tp_tensor *t)
{
    return TP_GM_HEADER + 8ull * (t->rank > 0u ? t->dims[t->rank - 1u] : 1u);
}

void tp_map_rows(const tp_tensor *t, uint32_t *rows, uint32_t *row_elems)
{
    uint32_t n = tp_tensor_elems(t);
    *rows = t->rank == 4u && t->dims[1] != 0u ? t->dims[1] : 1u;
    *row_elems = n / *rows;
}

uint32_t tp_backward_scratch_bytes(const tp_blob_view *b, const tp_op *op, uint32_t flags)
{
    uint64_t need = 0;
    tp_tensor tin, tout, tw;
    uint32_t rows, row_elems;
    tp_decode_tensor(b->tensors, op->inputs[0], &tin);
    if ((flags & TP_TRAN_WEIGHT) && tp_op_defs[op->kind].weighted) {
        uint32_t n_out;
        tp_decode_tensor(b->tensors, op->inputs[1], &tw);
        n_out = tp_weight_channels(op, &tw);
        need = n_out != 0u ? 4ull * (tw.size / n_out) : 0u;
    }
    if (tp_tran_grad_format(b) == TP_GRAD_FLOAT32) {
        return (uint32_t)need;
    }
    if (flags & (TP_TRAN_GRAD_IN0 | TP_TRAN_GRAD_IN1)) {
        uint64_t grad;
        tp_map_rows(&tin, &rows, &row_elems);
        grad = (rows + 3u) & ~3u;
        tp_decode_tensor(b->tensors, op->output, &tout);
        grad += (uint64_t)tp_op_defs[op->kind].q_row * row_elems +
                (uint64_t)tp_op_defs[op->kind].q_chan *
                    (tout.rank > 0u ? tout.dims[tout.rank - 1u] : 1u);
        need = grad > need ? grad : need;
    }
    need = (need + 7u) & ~(uint64_t)7u;
    return need > 0x7FFFFFFFu ? 0x7FFFFFFFu : (uint32_t)need;
}

/* Every training-plan offset inside the training arena, gradient buffers 4-aligned. */
static tp_status check_train_tensors(const tp_blob_view *v)
{
    uint32_t i, format = tp_tran_grad_format(v);
    for (i = 0; i < v->n_tensors; i++) {
        tp_tensor t;
        uint32_t a = tp_tran_act_offset(v, i), g = tp_tran_grad_offset(v, i);
        tp_decode_tensor(v->tensors, i, &t);
        if (a != TP_NONE32 && !within(a, t.size, v->req.arena_train)) {
            return TP_ERR_BLOB_BOUNDS;
        }
        if (g != TP_NONE32 &&
            (t.size > 0x3FFFFFFFu ||
             !within(g, is_sums(v, i) ? sums_bytes(&t) : tp_gm_buffer_bytes(format, t.size),
                     v->req.arena_train))) {
            return TP_ERR_BLOB_BOUNDS;
        }
        if (g != TP_NONE32 && (g & 3u) != 0u) {
            return TP_ERR_BLOB_INVALID; /* float gradients and a map's exponent: an unaligned one
                                           faults on the M4 */
        }
    }
    return TP_OK;
}

/* One TRAN op record against its op; *velocities counts the parameters it trains. */
static tp_status check_train_op(const tp_blob_view *v, const tp_train_op *t, uint64_t *velocities)
{
    tp_op op;
    tp_tensor tw, to;
    uint32_t n_out = 0, row = 0, i;
    if (t->op >= v->n_ops || t->op < v->stage_ops) {
        return TP_ERR_BLOB_INVALID;
    }
    tp_decode_op(v->ops, t->op, &op);
    tp_decode_tensor(v->tensors, op.output, &to);
    if (tp_tran_grad_offset(v, op.output) == TP_NONE32) {
        return TP_ERR_BLOB_INVALID;
    }
    if ((t->flags & TP_TRAN_GRAD_IN0) && tp_tran_grad_offset(v, op.inputs[0]) == TP_NONE32) {
        return TP_ERR_BLOB_INVALID;
    }
    if ((t->flags & TP_TRAN_GRAD_IN1) &&
        (op.kind != TP_OP_ADD || tp_tran_grad_offset(v, op.inputs[1]) == TP_NONE32)) {
        return TP_ERR_BLOB_INVALID;
    }
    /* sinks and their writers: integer maps only; a sink trains just its bias; an input whose
     * gradient is a sink's sums is written only by reducing into them, as its first writer */
    if ((t->flags2 & ~(uint32_t)(TP_TRAN_REDUCED | TP_TRAN_REDUCE_IN0 | TP_TRAN_REDUCE_IN1)) ||
        (t->flags2 != 0u && tp_tran_grad_format(v) == TP_GRAD_FLOAT32) ||
        ((t->flags2 & TP_TRAN_REDUCED) &&
         (t->flags & (TP_TRAN_BIAS | TP_TRAN_WEIGHT | TP_TRAN_GRAD_IN0 | TP_TRAN_GRAD_IN1)) !=
             TP_TRAN_BIAS)) {
        return TP_ERR_BLOB_INVALID;
    }
    for (i = 0; i < 2u; i++) {
        uint32_t need = i == 0u ? TP_TRAN_GRAD_IN0 : TP_TRAN_GRAD_IN1;
        uint32_t zero = i == 0u ? TP_TRAN_ZERO_IN0 : TP_TRAN_ZERO_IN1;
        uint32_t reduce = i == 0u ? TP_TRAN_REDUCE_IN0 : TP_TRAN_REDUCE_IN1;
        int sums = (t->flags & need) && is_sums(v, op.inputs[i]);
        if (((t->flags2 & reduce) != 0u) != sums ||
            (sums && (t->flags & zero) == 0u)) {
            return TP_ERR_BLOB_INVALID;
        }
    }
    if ((t->flags & TP_TRAN_MASK) &&
        !within(t->mask_offset, (to.size + 7u) / 8u, v->req.arena_train)) {
        return TP_ERR_BLOB_BOUNDS;
    }
    if (t->flags & (TP_TRAN_BIAS | TP_TRAN_WEIGHT)) {
        if (!tp_op_defs[op.kind].weighted) {
            return TP_ERR_BLOB_INVALID;
        }
        tp_decode_tensor(v->tensors, op.inputs[1], &tw);
        n_out = tp_weight_channels(&op, &tw);
        if (n_out == 0u) {
            return TP_ERR_BLOB_INVALID;
        }
        row = tw.size / n_out;
    }
    if ((t->flags & TP_TRAN_BIAS) &&
        (op.inputs[2] == TP_NONE16 || !within(t->bias_params, 4ull * n_out, tp_param_bytes(v)))) {
        return TP_ERR_BLOB_BOUNDS;
    }
    *velocities += (t->flags & TP_TRAN_BIAS) ? n_out : 0u;
    *velocities += (t->flags & TP_TRAN_WEIGHT) ? (uint64_t)t->n_sel * row : 0u;
    if (t->flags & TP_TRAN_WEIGHT) {
        uint32_t held = 0;
        for (i = 0; i < n_out; i++) {
            held += tp_held_row(v, &op, i) != TP_NONE16 ? 1u : 0u;
        }
        if (t->n_sel == 0u || t->n_sel != held) {
            return TP_ERR_BLOB_INVALID; /* check_held checked the rows fit the params */
        }
    }
    i = tp_backward_scratch_bytes(v, &op, t->flags);
    if (i != 0u) {
        if (!within(t->scratch_offset, i, v->req.arena_train)) {
            return TP_ERR_BLOB_BOUNDS;
        }
        if ((t->scratch_offset & 3u) != 0u) {
            return TP_ERR_BLOB_INVALID;
        }
    }
    return TP_OK;
}

/* The TRAN section against the rest of the blob: every offset the training step will use lies
 * inside the training arena or the params region, and the ops it names can do what it asks. */
static tp_status check_train(const tp_blob_view *v)
{
    uint32_t n_ops, j, first, last;
    uint64_t velocities = 0; /* trained parameters: one float32 velocity each under momentum */
    tp_op op;
    tp_status st;
    if (v->train == NULL) {
        return TP_OK;
    }
    if (v->train_len < TP_TRAN_HEADER) {
        return TP_ERR_BLOB_BOUNDS;
    }
    n_ops = tp_rd_u16(v->train + 4);
    first = tp_tran_first(v);
    last = tp_tran_last(v);
    if (tp_rd_u32(v->train + 8) != v->n_tensors || last >= v->n_ops || first > last ||
        tp_tran_grad_format(v) >= TP_GRAD_FORMATS) {
        return TP_ERR_BLOB_INVALID;
    }
    if ((uint64_t)TP_TRAN_HEADER + 8ull * v->n_tensors + (uint64_t)TP_TRAN_OP * n_ops >
        v->train_len) {
        return TP_ERR_BLOB_BOUNDS;
    }
    /* the step takes the loss on the header's last op: it must make the logits, and the logits
     * need a gradient buffer (the loss writes it before any train op runs) */
    tp_decode_op(v->ops, last, &op);
    if (op.output != v->logits || tp_tran_grad_offset(v, v->logits) == TP_NONE32) {
        return TP_ERR_BLOB_INVALID;
    }
    /* nothing trains inside the tiled stage: the backward pass never reaches it */
    if (first < v->stage_ops) {
        return TP_ERR_BLOB_INVALID;
    }
    /* the training forward (ops 0..last, after the tiled stage) finds its activations under the
     * training plan (the op checks covered these operands: input 0, ADD's input 1, the output) */
    for (j = v->stage_ops; j <= last; j++) {
        tp_decode_op(v->ops, j, &op);
        if (tp_tran_act_offset(v, op.inputs[0]) == TP_NONE32 ||
            tp_tran_act_offset(v, op.output) == TP_NONE32 ||
            (op.kind == TP_OP_ADD && tp_tran_act_offset(v, op.inputs[1]) == TP_NONE32)) {
            return TP_ERR_BLOB_INVALID;
        }
    }
    st = check_train_tensors(v);
    for (j = 0; j < n_ops && st == TP_OK; j++) {
        tp_train_op t;
        tp_decode_train_op(v->train + TP_TRAN_HEADER + 8u * v->n_tensors + TP_TRAN_OP * j, &t);
        st = check_train_op(v, &t, &velocities);
    }
    /* optimizer state, when there is any, is exactly one velocity per trained parameter */
    if (st == TP_OK && v->req.optimizer != 0u && 4u * velocities != v->req.optimizer) {
        st = TP_ERR_BLOB_INVALID;
    }
    return st;
}

/* ---- the scratch plan ---- */

/* One plan's (offset, size) of an op's scratch: none (size 0, offset TP_NONE32), or inside
 * that plan's arena at a multiple of 8 (kernels read it by words). */
static tp_status check_scratch_entry(const uint8_t *e, uint32_t arena)
{
    uint32_t offset = tp_rd_u32(e), size = tp_rd_u32(e + 4);
    if (size == 0u) {
        return offset == TP_NONE32 ? TP_OK : TP_ERR_BLOB_INVALID;
    }
    if (!within(offset, size, arena)) {
        return TP_ERR_BLOB_BOUNDS;
    }
    return offset % TP_SCRA_ALIGN == 0u ? TP_OK : TP_ERR_BLOB_INVALID;
}

/* Every op's scratch inside the inference arena, and inside the training arena when the blob
 * trains (a blob without TRAN plans none for training). */
static tp_status check_scratch(const tp_blob_view *v)
{
    uint32_t i;
    tp_status st = TP_OK;
    if (v->scratch == NULL) {
        return TP_OK;
    }
    for (i = 0; i < v->n_ops && st == TP_OK; i++) {
        const uint8_t *e = v->scratch + TP_SCRA_HEADER + TP_SCRA_OP * i;
        st = check_scratch_entry(e, v->req.arena_infer);
        if (st == TP_OK) {
            st = check_scratch_entry(e + 8, v->train != NULL ? v->req.arena_train : 0u);
        }
    }
    return st;
}

/* ---- the tiled stage ---- */

/* The activation inputs of stage op k: two for ADD, else one. */
static uint32_t op_n_in(const tp_blob_view *v, uint32_t k)
{
    return v->ops[(uint32_t)TP_OP_SIZE * k] == TP_OP_ADD ? 2u : 1u;
}

/* The stage tensor holding tensor `ti` among the first `n` (n: not found). */
static uint32_t tile_index(const tp_blob_view *v, uint32_t ti, uint32_t n)
{
    uint32_t i;
    for (i = 0; i < n; i++) {
        if (tp_rd_u16(tp_tile_tensor(v, i)) == ti) {
            return i;
        }
    }
    return n;
}


void tp_tile_need(const tp_op *op, uint32_t axis, uint32_t lo, uint32_t hi, uint32_t n,
                  uint32_t *need_lo, uint32_t *need_hi, uint32_t *pad)
{
    int64_t a, b;
    if (op->kind == TP_OP_ADD) {
        a = lo;
        b = hi;
    } else if (op->kind == TP_OP_PAD) {
        a = (int64_t)lo - op->pad[axis];
        b = (int64_t)hi - op->pad[axis];
    } else {
        a = (int64_t)lo * op->stride[axis] - op->pad[axis];
        b = (int64_t)(hi - 1u) * op->stride[axis] - op->pad[axis] + op->k[axis];
    }
    *need_lo = a < 0 ? 0u : (a > (int64_t)n ? n : (uint32_t)a);
    *need_hi = b < 0 ? 0u : (b > (int64_t)n ? n : (uint32_t)b);
    /* the kernel's padding: where the window starts before the image (PAD: how many rows /
     * columns of the output window come before its input) */
    *pad = (uint32_t)((int64_t)*need_lo - a);
}

/* Stage tensor i's tile buffer bytes and offset under a plan (0 inference, 1 training). */
static uint32_t tile_bytes(const tp_blob_view *v, uint32_t i)
{
    return tp_rd_u32(tp_tile_tensor(v, i) + 4);
}

/* Along one axis: the spans of band r, every op's input span containing what its output span
 * reads (columns: from exactly its first in-image tap, to exactly its last for a PAD: the
 * kernel runs on the buffer's columns), nothing empty. *most: the largest span of each tensor
 * (most[i]). */
static tp_status check_spans(const tp_blob_view *v, uint32_t axis, uint32_t bands)
{
    uint32_t nt = tp_tile_tensors(v), r, i, lo, hi, prev = 0u;
    for (r = 0; r < bands; r++) {
        for (i = 0; i < nt; i++) {
            tp_tensor t;
            tp_decode_tensor(v->tensors, tp_rd_u16(tp_tile_tensor(v, i)), &t);
            tp_tile_span(v, axis, r, i, &lo, &hi);
            if (lo >= hi || hi > t.dims[1u + axis]) {
                return TP_ERR_BLOB_INVALID;
            }
        }
        /* the stage output's spans cover its map in order, once */
        tp_tile_span(v, axis, r, nt - 1u, &lo, &hi);
        if (lo != prev) {
            return TP_ERR_BLOB_INVALID;
        }
        prev = hi;
        for (i = 1; i < nt; i++) {
            tp_op op;
            uint32_t j, n_in = op_n_in(v, i - 1u);
            tp_decode_op(v->ops, i - 1u, &op);
            tp_tile_span(v, axis, r, i, &lo, &hi);
            for (j = 0; j < n_in; j++) {
                uint32_t in = tile_index(v, op.inputs[j], i), a, b, pad, in_lo, in_hi;
                tp_tensor t;
                tp_decode_tensor(v->tensors, op.inputs[j], &t);
                tp_tile_need(&op, axis, lo, hi, t.dims[1u + axis], &a, &b, &pad);
                tp_tile_span(v, axis, r, in, &in_lo, &in_hi);
                if (a >= b || a < in_lo || b > in_hi) {
                    return TP_ERR_BLOB_INVALID;
                }
                if (axis == 1u && op.kind != TP_OP_ADD &&
                    (a != in_lo || (op.kind == TP_OP_PAD && b != in_hi))) {
                    return TP_ERR_BLOB_INVALID;
                }
            }
        }
    }
    {
        tp_tensor t;
        tp_decode_tensor(v->tensors, tp_rd_u16(tp_tile_tensor(v, nt - 1u)), &t);
        return prev == t.dims[1u + axis] ? TP_OK : TP_ERR_BLOB_INVALID;
    }
}

/* The largest span of stage tensor i along an axis. */
static uint32_t most_span(const tp_blob_view *v, uint32_t axis, uint32_t i)
{
    uint32_t r, lo, hi, most = 0u, bands = v->tile[4u + axis];
    for (r = 0; r < bands; r++) {
        tp_tile_span(v, axis, r, i, &lo, &hi);
        most = hi - lo > most ? hi - lo : most;
    }
    return most;
}

/* Every column span of stage tensor i is the map's full width (its windows are whole rows). */
static int full_width(const tp_blob_view *v, uint32_t i, uint32_t width)
{
    uint32_t c, lo, hi;
    for (c = 0; c < v->tile[5]; c++) {
        tp_tile_span(v, 1u, c, i, &lo, &hi);
        if (lo != 0u || hi != width) {
            return 0;
        }
    }
    return 1;
}

/* A tile buffer's (or the band's) offset under each plan: inside that plan's arena, none
 * (TP_NONE32) for the training plan of a blob that does not train. */
static tp_status check_tile_offsets(const tp_blob_view *v, const uint8_t *offsets, uint32_t bytes)
{
    if (!within(tp_rd_u32(offsets), bytes, v->req.arena_infer)) {
        return TP_ERR_BLOB_BOUNDS;
    }
    if (v->train == NULL) {
        return tp_rd_u32(offsets + 4) == TP_NONE32 ? TP_OK : TP_ERR_BLOB_INVALID;
    }
    return within(tp_rd_u32(offsets + 4), bytes, v->req.arena_train) ? TP_OK
                                                                      : TP_ERR_BLOB_BOUNDS;
}

/* The TILE section: ops 0..n-1 of kinds a tile can run, each reading the model input or an
 * earlier stage tensor; their inner tensors TILED and read by no later op; every tile's
 * windows contain what its ops read (check_spans); every buffer holds its largest window and
 * lies inside each plan's arena; the band's rows stream in order. */
static tp_status check_tile(tp_blob_view *v)
{
    uint32_t nt, i, j, tiled = 0u, flags, rows, cols;
    tp_status st;
    tp_tensor t;
    if (v->tile == NULL) {
        for (i = 0; i < v->n_tensors; i++) {
            tp_decode_tensor(v->tensors, i, &t);
            if (t.flags & TP_T_TILED) {
                return TP_ERR_BLOB_INVALID;
            }
        }
        return TP_OK;
    }
    if (v->tile_len < TP_TILE_HEADER) {
        return TP_ERR_BLOB_INVALID;
    }
    v->stage_ops = tp_rd_u16(v->tile);
    nt = tp_tile_tensors(v);
    rows = v->tile[4];
    cols = v->tile[5];
    flags = tp_rd_u16(v->tile + 6);
    if (v->stage_ops == 0u || v->stage_ops >= v->n_ops || nt != v->stage_ops + 1u ||
        rows == 0u || cols == 0u || (flags & ~TP_TILE_INPUT_ROWS) != 0u ||
        tp_rd_u32(v->tile + 20) != 0u ||
        v->tile_len != TP_TILE_HEADER + TP_TILE_TENSOR * nt + TP_TILE_SPAN * nt * (rows + cols)) {
        return TP_ERR_BLOB_INVALID;
    }
    /* the stage's tensors: the input, then each op's output; its ops' operands among them */
    for (i = 0; i < nt; i++) {
        const uint8_t *rec = tp_tile_tensor(v, i);
        uint32_t ti = tp_rd_u16(rec), want;
        tp_op op;
        if (tp_rd_u16(rec + 2) != 0u || ti >= v->n_tensors) {
            return TP_ERR_BLOB_INVALID;
        }
        if (i == 0u) {
            want = (flags & TP_TILE_INPUT_ROWS) ? TP_T_TILED : TP_T_ARENA;
            if (ti != v->input) {
                return TP_ERR_BLOB_INVALID;
            }
        } else {
            tp_decode_op(v->ops, i - 1u, &op);
            want = i + 1u < nt ? TP_T_TILED : TP_T_ARENA;
            if (op.output != ti || (op.kind != TP_OP_CONV_2D && op.kind != TP_OP_ADD &&
                                    op.kind != TP_OP_DEPTHWISE_CONV_2D &&
                                    op.kind != TP_OP_AVERAGE_POOL_2D && op.kind != TP_OP_PAD)) {
                return TP_ERR_BLOB_INVALID;
            }
            for (j = 0; j < op_n_in(v, i - 1u); j++) {
                if (tile_index(v, op.inputs[j], i) >= i) {
                    return TP_ERR_BLOB_INVALID;
                }
            }
        }
        tp_decode_tensor(v->tensors, ti, &t);
        if ((t.flags & (TP_T_TILED | TP_T_ARENA)) != want || !tp_is_nhwc(&t)) {
            return TP_ERR_BLOB_INVALID;
        }
        tiled += want == TP_T_TILED ? 1u : 0u;
    }
    /* no other tensor is tiled, and no op after the stage reads a tiled one */
    for (i = 0, j = 0; i < v->n_tensors; i++) {
        tp_decode_tensor(v->tensors, i, &t);
        j += (t.flags & TP_T_TILED) ? 1u : 0u;
    }
    if (j != tiled) {
        return TP_ERR_BLOB_INVALID;
    }
    for (i = v->stage_ops; i < v->n_ops; i++) {
        tp_op op;
        tp_decode_op(v->ops, i, &op);
        for (j = 0; j < 2u; j++) {
            if (op.inputs[j] != TP_NONE16 && op.inputs[j] < v->n_tensors) {
                tp_decode_tensor(v->tensors, op.inputs[j], &t);
                if (t.flags & TP_T_TILED) {
                    return TP_ERR_BLOB_INVALID;
                }
            }
        }
    }
    st = check_spans(v, 0u, rows);
    if (st == TP_OK) {
        st = check_spans(v, 1u, cols);
    }
    /* buffers: the largest window; none only for the input or output read / written in place
     * as whole rows */
    for (i = 0; i < nt && st == TP_OK; i++) {
        const uint8_t *rec = tp_tile_tensor(v, i);
        uint32_t bytes = tile_bytes(v, i);
        tp_decode_tensor(v->tensors, tp_rd_u16(rec), &t);
        if (bytes == 0u) {
            if ((i != 0u && i + 1u != nt) || !full_width(v, i, t.dims[2]) ||
                tp_rd_u32(rec + 8) != TP_NONE32 || tp_rd_u32(rec + 12) != TP_NONE32) {
                st = TP_ERR_BLOB_INVALID;
            }
            continue;
        }
        if ((uint64_t)most_span(v, 0u, i) * most_span(v, 1u, i) * t.dims[3] > bytes) {
            st = TP_ERR_BLOB_INVALID;
        } else {
            st = check_tile_offsets(v, rec + 8, bytes);
        }
    }
    if (st != TP_OK) {
        return st;
    }
    /* the band: the input rows of a tile row, full width, streaming forward */
    tp_decode_tensor(v->tensors, v->input, &t);
    if (flags & TP_TILE_INPUT_ROWS) {
        uint32_t row = (uint32_t)t.dims[2] * t.dims[3], band = tp_rd_u32(v->tile + 8);
        uint32_t lo, hi, plo = 0u, phi = 0u;
        for (i = 0; i < rows; i++) {
            tp_tile_span(v, 0u, i, 0u, &lo, &hi);
            if (lo < plo || hi < phi || (uint64_t)(hi - lo) * row > band) {
                return TP_ERR_BLOB_INVALID;
            }
            plo = lo;
            phi = hi;
        }
        return check_tile_offsets(v, v->tile + 12, band);
    }
    return tp_rd_u32(v->tile + 8) == 0u && tp_rd_u32(v->tile + 12) == TP_NONE32 &&
                   tp_rd_u32(v->tile + 16) == TP_NONE32
               ? TP_OK
               : TP_ERR_BLOB_INVALID;
}

/* ---- the in-place ops ---- */

uint32_t tp_inplace_of(const tp_blob_view *b, uint32_t k, uint32_t plan)
{
    uint32_t j, n;
    if (b->inplace == NULL) {
        return TP_NONE32;
    }
    n = tp_rd_u16(b->inplace);
    for (j = 0; j < n; j++) {
        const uint8_t *p = b->inplace + TP_INPL_HEADER + TP_INPL_OP * j;
        if (tp_rd_u16(p) == k) {
            return (p[2] & (1u << plan)) ? tp_rd_u32(p + 4u + 4u * plan) : TP_NONE32;
        }
    }
    return TP_NONE32;
}

/* Under one plan (its arena), an in-place op's input and output at one offset `at` (their
 * region: `region` bytes) and its channel buffer (`chan` bytes at `c`) inside the arena,
 * apart from them. */
static tp_status check_inplace_plan(uint32_t at_in, uint32_t at_out, uint32_t region,
                                    uint32_t c, uint32_t chan, uint32_t arena)
{
    if (at_in != at_out || at_in == TP_NONE32) {
        return TP_ERR_BLOB_INVALID;
    }
    if (!within(at_in, region, arena) || !within(c, chan, arena)) {
        return TP_ERR_BLOB_BOUNDS;
    }
    return (c + chan <= at_in || at_in + region <= c) ? TP_OK : TP_ERR_BLOB_INVALID;
}

/* The INPL section: ascending ops, each a depthwise convolution with multiplier 1 whose input
 * no other op reads (and, when it trains, no weight gradient reads: it is overwritten), its
 * input and output sharing bytes under each plan it names, its channel buffer beside them. */
static tp_status check_inplace(const tp_blob_view *v)
{
    uint32_t n, j, i, prev = 0u;
    if (v->inplace == NULL) {
        return TP_OK;
    }
    if (v->inplace_len < TP_INPL_HEADER || tp_rd_u16(v->inplace + 2) != 0u ||
        tp_rd_u32(v->inplace + 4) != 0u) {
        return TP_ERR_BLOB_INVALID;
    }
    n = tp_rd_u16(v->inplace);
    if (v->inplace_len != TP_INPL_HEADER + TP_INPL_OP * n) {
        return TP_ERR_BLOB_INVALID;
    }
    for (j = 0; j < n; j++) {
        const uint8_t *p = v->inplace + TP_INPL_HEADER + TP_INPL_OP * j;
        uint32_t k = tp_rd_u16(p), plans = p[2], plan;
        tp_op op, other;
        tp_tensor tin, tout;
        const uint8_t *rec;
        if (k >= v->n_ops || (j > 0u && k <= prev) || plans == 0u || plans > 3u || p[3] != 0u ||
            ((plans & 2u) && v->train == NULL)) {
            return TP_ERR_BLOB_INVALID;
        }
        prev = k;
        tp_decode_op(v->ops, k, &op);
        if (op.kind != TP_OP_DEPTHWISE_CONV_2D || op.depth_multiplier != 1u) {
            return TP_ERR_BLOB_INVALID;
        }
        for (i = 0; i < v->n_ops; i++) {
            tp_decode_op(v->ops, i, &other);
            if (i != k && (other.inputs[0] == op.inputs[0] ||
                           (other.kind == TP_OP_ADD && other.inputs[1] == op.inputs[0]))) {
                return TP_ERR_BLOB_INVALID;
            }
        }
        rec = tp_tran_record_of(v, k);
        if ((plans & 2u) && rec != NULL && (rec[2] & TP_TRAN_WEIGHT)) {
            return TP_ERR_BLOB_INVALID;
        }
        tp_decode_tensor(v->tensors, op.inputs[0], &tin);
        tp_decode_tensor(v->tensors, op.output, &tout);
        for (plan = 0; plan < 2u; plan++) {
            uint32_t c = tp_rd_u32(p + 4u + 4u * plan), arena, a_in, a_out, region, chan;
            tp_status st;
            if (!(plans & (1u << plan))) {
                if (c != TP_NONE32) {
                    return TP_ERR_BLOB_INVALID;
                }
                continue;
            }
            arena = plan == 0u ? v->req.arena_infer : v->req.arena_train;
            if (k < v->stage_ops) { /* tile buffers: stage tensors k and k + 1 */
                const uint8_t *r_in = tp_tile_tensor(v, k), *r_out = tp_tile_tensor(v, k + 1u);
                uint32_t b_in = tile_bytes(v, k), b_out = tile_bytes(v, k + 1u);
                if (tp_rd_u16(r_in) != op.inputs[0] || b_in == 0u || b_out == 0u) {
                    return TP_ERR_BLOB_INVALID;
                }
                a_in = tp_rd_u32(r_in + 8u + 4u * plan);
                a_out = tp_rd_u32(r_out + 8u + 4u * plan);
                region = b_in > b_out ? b_in : b_out;
                chan = most_span(v, 0u, k + 1u) * most_span(v, 1u, k + 1u);
            } else {
                a_in = plan == 0u ? tin.offset : tp_tran_act_offset(v, op.inputs[0]);
                a_out = plan == 0u ? tout.offset : tp_tran_act_offset(v, op.output);
                region = tin.size > tout.size ? tin.size : tout.size;
                chan = (uint32_t)tout.dims[1] * tout.dims[2];
            }
            st = check_inplace_plan(a_in, a_out, region, c, chan, arena);
            if (st != TP_OK) {
                return st;
            }
        }
    }
    return TP_OK;
}

tp_status tp_blob_parse(tp_blob_view *v, const uint8_t *blob, uint32_t len)
{
    uint32_t total, i, logits_made = 0u;
    tp_tensor t;
    tp_status st;
    if (len < 4u) {
        return TP_ERR_BLOB_TRUNCATED;
    }
    if (memcmp(blob, "TPRB", 4) != 0) {
        return TP_ERR_BLOB_MAGIC;
    }
    if (len < TP_HEADER_SIZE + TP_CRC_SIZE) {
        return TP_ERR_BLOB_TRUNCATED;
    }
    if (tp_rd_u16(blob + 4) != TP_BLOB_VERSION) {
        return TP_ERR_BLOB_VERSION;
    }
    if (tp_rd_u16(blob + 6) != TP_HEADER_SIZE) {
        return TP_ERR_BLOB_INVALID;
    }
    total = tp_rd_u32(blob + 8);
    if (total > len) {
        return TP_ERR_BLOB_TRUNCATED;
    }
    if (total != len) {
        return TP_ERR_BLOB_SIZE;
    }
    if (tp_crc32(0, blob, total - TP_CRC_SIZE) != tp_rd_u32(blob + total - TP_CRC_SIZE)) {
        return TP_ERR_BLOB_CRC;
    }
    st = read_sections(v, blob, total);
    if (st != TP_OK) {
        return st;
    }
    v->blob = blob;
    v->blob_len = len;
    v->req.model_id = tp_rd_u32(blob + 12);
    v->req.arena_infer = tp_rd_u32(blob + 20);
    v->req.arena_train = tp_rd_u32(blob + 24);
    v->req.params = tp_rd_u32(blob + 28);
    v->input = tp_rd_u16(blob + 32);
    v->output = tp_rd_u16(blob + 34);
    v->logits = tp_rd_u16(blob + 36);
    v->req.n_classes = tp_rd_u16(blob + 38);
    v->req.blob_id = tp_rd_u32(blob + total - TP_CRC_SIZE);
    v->req.optimizer = tp_rd_u32(blob + 40);
    if (v->req.arena_infer > 0x7FFFFFFFu) {
        return TP_ERR_BLOB_INVALID;
    }
    /* optimizer state: float32s at the end of the params region, after the parameters (which
     * end 4-aligned), and only with a training program, which says how many (check_train) */
    if (v->req.optimizer > v->req.params || (v->req.optimizer & 3u) != 0u ||
        ((v->req.params - v->req.optimizer) & 3u) != 0u ||
        (v->req.optimizer != 0u && v->train == NULL)) {
        return TP_ERR_BLOB_INVALID;
    }
    for (i = 0; i < v->n_tensors; i++) {
        tp_decode_tensor(v->tensors, i, &t);
        st = check_tensor(v, &t);
        if (st != TP_OK) {
            return st;
        }
    }
    for (i = 0; i < v->n_ops; i++) {
        tp_op op;
        tp_decode_op(v->ops, i, &op);
        st = check_op(v, &op);
        if (st != TP_OK) {
            return st;
        }
        logits_made |= op.output == v->logits ? 1u : 0u;
    }
    /* no op writing the logits: inference would return no prediction */
    if (!logits_made || operand(v, v->input, ROLE_ACT, 0, &t) != TP_OK) {
        return TP_ERR_BLOB_INVALID;
    }
    v->req.input_bytes = t.size;
    if (operand(v, v->output, ROLE_ACT, 0, &t) != TP_OK || !(t.flags & TP_T_ARENA) ||
        operand(v, v->logits, ROLE_ACT, 0, &t) != TP_OK || !(t.flags & TP_T_ARENA) ||
        tp_tensor_elems(&t) != v->req.n_classes) {
        return TP_ERR_BLOB_INVALID;
    }
    st = check_tile(v);
    if (st == TP_OK) {
        st = check_train(v);
    }
    if (st == TP_OK) {
        st = check_scratch(v);
    }
    return st == TP_OK ? check_inplace(v) : st;
}

tp_status tp_blob_requirements(const uint8_t *blob, uint32_t len, tp_requirements *out)
{
    tp_blob_view v;
    tp_status st;
    if (blob == NULL || out == NULL) {
        return TP_ERR_ARG;
    }
    memset(&v, 0, sizeof v);
    st = tp_blob_parse(&v, blob, len);
    if (st == TP_OK) {
        *out = v.req;
    }
    return st;
}
