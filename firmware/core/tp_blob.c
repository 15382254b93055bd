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
    static const char *const ids[6] = {"TENS", "OPS ", "DATA", "NAME", "TRAN", "SCRA"};
    uint32_t n_sec = tp_rd_u16(blob + 16), body_end = total - TP_CRC_SIZE;
    uint32_t table_end = TP_HEADER_SIZE + n_sec * TP_SECTION_SIZE, i, k;
    const uint8_t *found[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    uint32_t sizes[6] = {0, 0, 0, 0, 0, 0};
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
        for (k = 0; k < 6; k++) { /* unknown sections are skipped: later minor additions */
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
    if (t->dtype > TP_DT_FLOAT32 || t->rank > 4u || (t->flags & ~7u) != 0u ||
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
    case ROLE_ACT:
        return t->dtype == TP_DT_INT8 && (t->flags & TP_T_ARENA) ? TP_OK : TP_ERR_BLOB_INVALID;
    case ROLE_WEIGHTS:
        return t->dtype == TP_DT_INT8 && (t->flags & TP_T_CONST) ? TP_OK : TP_ERR_BLOB_INVALID;
    default:
        return t->dtype == TP_DT_INT32 && (t->flags & TP_T_CONST) && t->rank == 1u
                   ? TP_OK
                   : TP_ERR_BLOB_INVALID;
    }
}

static int is_nhwc(const tp_tensor *t)
{
    return t->rank == 4u && t->dims[0] == 1u;
}

/* Output size of a window op: TFLite's VALID (no padding) or SAME (ComputePaddingHeightWidth).
 * Either way every window overlaps the input, so average pooling never divides by zero. */
static int window_ok(uint32_t in, uint32_t k, uint32_t stride, uint32_t pad, uint32_t out)
{
    uint32_t same_out, need;
    if (k == 0u || stride == 0u) {
        return 0;
    }
    if (pad == 0u && in >= k && out == (in - k) / stride + 1u) {
        return 1;
    }
    same_out = (in + stride - 1u) / stride;
    need = (same_out - 1u) * stride + k;
    return out == same_out && pad == (need > in ? need - in : 0u) / 2u;
}

static int windows_ok(const tp_op *op, const tp_tensor *in, const tp_tensor *out)
{
    return is_nhwc(in) && is_nhwc(out) &&
           window_ok(in->dims[1], op->k[0], op->stride[0], op->pad[0], out->dims[1]) &&
           window_ok(in->dims[2], op->k[1], op->stride[1], op->pad[1], out->dims[2]);
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

/* The kind-specific part: operand types, shapes and parameter counts. */
static int op_shapes_ok(const tp_blob_view *v, const tp_op *op, const tp_tensor *in,
                        const tp_tensor *out)
{
    tp_tensor w, b;
    uint32_t n_in = tp_tensor_elems(in), n_out = tp_tensor_elems(out);
    switch (op->kind) {
    case TP_OP_CONV_2D:
    case TP_OP_DEPTHWISE_CONV_2D:
    case TP_OP_FULLY_CONNECTED: {
        uint32_t n_ch;
        int ok;
        if (operand(v, op->inputs[1], ROLE_WEIGHTS, 0, &w) != TP_OK ||
            operand(v, op->inputs[2], ROLE_BIAS, 1, &b) != TP_OK) {
            return 0;
        }
        n_ch = tp_weight_channels(op, &w);
        if (op->kind == TP_OP_FULLY_CONNECTED) {
            ok = w.rank == 2u && n_ch == n_out && w.dims[1] == n_in;
        } else if (op->kind == TP_OP_CONV_2D) {
            ok = w.rank == 4u && windows_ok(op, in, out) && n_ch == out->dims[3] &&
                 w.dims[1] == op->k[0] && w.dims[2] == op->k[1] && w.dims[3] == in->dims[3];
        } else {
            ok = w.rank == 4u && windows_ok(op, in, out) && w.dims[0] == 1u &&
                 w.dims[1] == op->k[0] && w.dims[2] == op->k[1] && op->depth_multiplier >= 1u &&
                 n_ch == out->dims[3] &&
                 (uint32_t)in->dims[3] * op->depth_multiplier == out->dims[3];
        }
        /* per-channel scales (FULLY_CONNECTED's requantization, QAS) are read one a channel */
        ok = ok && (w.n_scales <= 1u || w.n_scales == n_ch);
        return ok && op->n_mult == n_ch && (b.rank == 0u || b.dims[0] == n_ch);
    }
    case TP_OP_ADD:
        return operand(v, op->inputs[1], ROLE_ACT, 0, &w) == TP_OK && w.size == out->size &&
               in->size == out->size && op->n_mult == 3u && op->left_shift >= 0 &&
               op->left_shift <= 30 && int8_range(op->in2_zp);
    case TP_OP_AVERAGE_POOL_2D:
        return windows_ok(op, in, out) && in->dims[3] == out->dims[3];
    case TP_OP_MEAN:
        return is_nhwc(in) && n_out == in->dims[3] && op->mode == 2u && op->n_mult == 1u;
    case TP_OP_PAD:
        return is_nhwc(in) && is_nhwc(out) && in->dims[3] == out->dims[3] &&
               (uint32_t)in->dims[1] + op->pad[0] + op->pad_after[0] == out->dims[1] &&
               (uint32_t)in->dims[2] + op->pad[1] + op->pad_after[1] == out->dims[2];
    case TP_OP_RESHAPE:
        return in->size == out->size;
    case TP_OP_SOFTMAX:
        return in->size == out->size && in->rank >= 1u && op->n_mult == 1u &&
               op->diff_min <= 0 && tp_le_i32(v->data + op->mult_offset, 1) >= 0;
    default:
        return 0;
    }
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
    if (op->kind > TP_OP_FULLY_CONNECTED) {
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
    tp_tensor in, out;
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
    if (operand(v, op->inputs[0], ROLE_ACT, 0, &in) != TP_OK ||
        operand(v, op->output, ROLE_ACT, 0, &out) != TP_OK || !op_shapes_ok(v, op, &in, &out)) {
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

/* Every training-plan offset inside the training arena, float gradients 4-aligned. */
static tp_status check_train_tensors(const tp_blob_view *v)
{
    uint32_t i;
    for (i = 0; i < v->n_tensors; i++) {
        tp_tensor t;
        uint32_t a = tp_tran_act_offset(v, i), g = tp_tran_grad_offset(v, i);
        tp_decode_tensor(v->tensors, i, &t);
        if (a != TP_NONE32 && !within(a, t.size, v->req.arena_train)) {
            return TP_ERR_BLOB_BOUNDS;
        }
        if (g != TP_NONE32 && (t.size > 0x3FFFFFFFu || !within(g, 4ull * t.size,
                                                                v->req.arena_train))) {
            return TP_ERR_BLOB_BOUNDS;
        }
        if (g != TP_NONE32 && (g & 3u) != 0u) {
            return TP_ERR_BLOB_INVALID; /* float gradients: an unaligned one faults on the M4 */
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
    if (t->op >= v->n_ops) {
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
    if ((t->flags & TP_TRAN_MASK) &&
        !within(t->mask_offset, (to.size + 7u) / 8u, v->req.arena_train)) {
        return TP_ERR_BLOB_BOUNDS;
    }
    if (t->flags & (TP_TRAN_BIAS | TP_TRAN_WEIGHT)) {
        if (op.kind > TP_OP_FULLY_CONNECTED) {
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
        if (!within(t->scratch_offset, 4ull * row, v->req.arena_train)) {
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
    if (tp_rd_u32(v->train + 8) != v->n_tensors || last >= v->n_ops || first > last) {
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
    /* the training forward (ops 0..last) finds its activations under the training plan (the
     * op checks covered these operands: input 0, ADD's input 1, the output) */
    for (j = 0; j <= last; j++) {
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
    if (operand(v, v->output, ROLE_ACT, 0, &t) != TP_OK ||
        operand(v, v->logits, ROLE_ACT, 0, &t) != TP_OK ||
        tp_tensor_elems(&t) != v->req.n_classes) {
        return TP_ERR_BLOB_INVALID;
    }
    st = check_train(v);
    return st == TP_OK ? check_scratch(v) : st;
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
