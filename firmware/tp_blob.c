/* tp_blob.c - the blob v1 loader (docs/blob-format.md): checks everything a kernel will later
 * trust, then binds the blob to the caller's arena and params region.
 *
 * Every check reads only inside blob[0..len) and compares in 64-bit or by subtraction, so no
 * field value can overflow an offset; it is the fuzz entry point (tp_blob_requirements).
 */
#include <string.h>

#include "tp_internal.h"

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

static tp_status read_sections(tp_session *v, const uint8_t *blob, uint32_t total)
{
    static const char *const ids[5] = {"TENS", "OPS ", "DATA", "NAME", "TRAN"};
    uint32_t n_sec = tp_rd_u16(blob + 16), body_end = total - TP_CRC_SIZE;
    uint32_t table_end = TP_HEADER_SIZE + n_sec * TP_SECTION_SIZE, i, k;
    const uint8_t *found[5] = {NULL, NULL, NULL, NULL, NULL};
    uint32_t sizes[5] = {0, 0, 0, 0, 0};
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
        for (k = 0; k < 5; k++) { /* unknown sections are skipped: later minor additions */
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
    v->train = found[4]; /* the training program is checked by its own code (tp_train.c) */
    v->train_len = sizes[4];
    return TP_OK;
}

static tp_status check_tensor(const tp_session *v, const tp_tensor *t)
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
        if (!within(t->params_offset, t->size, v->req.params - v->req.optimizer)) {
            return TP_ERR_BLOB_BOUNDS;
        }
    }
    if (t->n_scales != 0u && !within(t->scales_offset, 4ull * t->n_scales, v->data_len)) {
        return TP_ERR_BLOB_BOUNDS;
    }
    return TP_OK;
}

/* Decode tensor index i (TP_NONE16 allowed when optional) and check it can play role. */
static tp_status operand(const tp_session *v, uint32_t i, tensor_role role, int optional,
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
static tp_status check_multipliers(const tp_session *v, const tp_op *op)
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
static int op_shapes_ok(const tp_session *v, const tp_op *op, const tp_tensor *in,
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
        if (op->kind == TP_OP_FULLY_CONNECTED) {
            n_ch = n_out;
            ok = w.rank == 2u && w.dims[0] == n_out && w.dims[1] == n_in &&
                 (w.n_scales <= 1u || w.n_scales == n_out); /* fc_real_scale reads them */
        } else if (op->kind == TP_OP_CONV_2D) {
            n_ch = w.dims[0];
            ok = w.rank == 4u && windows_ok(op, in, out) && w.dims[0] == out->dims[3] &&
                 w.dims[1] == op->k[0] && w.dims[2] == op->k[1] && w.dims[3] == in->dims[3];
        } else {
            n_ch = w.dims[3];
            ok = w.rank == 4u && windows_ok(op, in, out) && w.dims[0] == 1u &&
                 w.dims[1] == op->k[0] && w.dims[2] == op->k[1] && op->depth_multiplier >= 1u &&
                 w.dims[3] == out->dims[3] &&
                 (uint32_t)in->dims[3] * op->depth_multiplier == out->dims[3];
        }
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
static tp_status check_held(const tp_session *v, const tp_op *op)
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
    n_ch = op->kind == TP_OP_DEPTHWISE_CONV_2D ? w.dims[3] : w.dims[0];
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
    return within(op->held_params, (uint64_t)held * (w.size / n_ch),
                  v->req.params - v->req.optimizer)
               ? TP_OK
               : TP_ERR_BLOB_BOUNDS;
}

static tp_status check_op(const tp_session *v, const tp_op *op)
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

/* Check the whole blob; on success v holds the section views and requirements. */
static tp_status parse(tp_session *v, const uint8_t *blob, uint32_t len)
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
     * end 4-aligned), and only with a training program, which says how many (tp_train_check) */
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
    return TP_OK;
}

tp_status tp_blob_requirements(const uint8_t *blob, uint32_t len, tp_requirements *out)
{
    tp_session v;
    tp_status st;
    if (blob == NULL || out == NULL) {
        return TP_ERR_ARG;
    }
    memset(&v, 0, sizeof v);
    st = parse(&v, blob, len);
    if (st == TP_OK) {
        *out = v.req;
    }
    return st;
}

tp_status tp_session_init(tp_session *s, const uint8_t *blob, uint32_t len, uint8_t *arena,
                          uint32_t arena_len, uint8_t *params, uint32_t params_len)
{
    tp_session v;
    tp_status st;
    if (s == NULL || blob == NULL || (params == NULL && params_len != 0u)) {
        return TP_ERR_ARG;
    }
    memset(s, 0, sizeof *s); /* a failed init leaves the session not loaded */
    memset(&v, 0, sizeof v);
    st = parse(&v, blob, len);
    if (st == TP_OK) {
        st = tp_train_check(&v); /* the training program, by the code that runs it */
    }
    if (st != TP_OK) {
        return st;
    }
    if (arena == NULL || arena_len < v.req.arena_infer) {
        return TP_ERR_ARENA_TOO_SMALL;
    }
    if (params != NULL && params_len < v.req.params) {
        return TP_ERR_PARAMS_TOO_SMALL;
    }
    v.arena = arena;
    v.arena_len = arena_len;
    v.params = params; /* NULL: inference only, every constant is read from the blob */
    v.params_len = params_len;
    *s = v;
    st = params != NULL ? tp_copy_params(s) : TP_OK;
    if (st != TP_OK) {
        memset(s, 0, sizeof *s);
    }
    return st;
}

const uint8_t *tp_const_data(const tp_session *s, const tp_tensor *t)
{
    if ((t->flags & TP_T_TRAINABLE) != 0u && s->params != NULL) { /* a training session */
        return s->params + t->params_offset;
    }
    return s->data + t->offset;
}

uint32_t tp_session_size(void)
{
    return (uint32_t)sizeof(tp_session);
}

const char *tp_status_name(tp_status st)
{
    static const char *const names[] = {
        "TP_OK",
        "TP_ERR_BLOB_TRUNCATED",
        "TP_ERR_BLOB_MAGIC",
        "TP_ERR_BLOB_VERSION",
        "TP_ERR_BLOB_SIZE",
        "TP_ERR_BLOB_CRC",
        "TP_ERR_BLOB_BOUNDS",
        "TP_ERR_BLOB_INVALID",
        "TP_ERR_ARENA_TOO_SMALL",
        "TP_ERR_PARAMS_TOO_SMALL",
        "TP_ERR_BAD_LABEL",
        "TP_ERR_BAD_INPUT",
        "TP_ERR_NOT_LOADED",
        "TP_ERR_NONFINITE",
        "TP_ERR_NO_TRAIN",
        "TP_ERR_ARG",
    };
    unsigned i = (unsigned)st;
    return i < sizeof names / sizeof names[0] ? names[i] : "TP_ERR_UNKNOWN";
}
