/* tp_check_plans.c - the kernels' optional sections: SCRA (each op's kernel scratch under each
 * plan), INPL (depthwise ops run in place) and PWIG (the DSP 1x1 input gradient's weights in
 * pairs). */
#include "tinyprop.h"
#include "tp_check.h"

/* One plan's (offset, size) of op k's scratch: none (size 0, offset TP_NONE32), or inside that
 * plan's arena at a multiple of TP_SCRA_ALIGN (kernels read it by words). */
static tp_status check_scratch_entry(uint32_t offset, uint32_t size, uint32_t arena, uint32_t k,
                                     uint32_t field, tp_fault *f)
{
    if (size == 0u) {
        return offset == TP_NONE32
                   ? TP_OK
                   : TP_REFUSE_FIELD(f, TP_ERR_BLOB_INVALID, SCRATCH_NONE, SCRA, k, field);
    }
    if (!within(offset, size, arena)) {
        return TP_REFUSE_FIELD(f, TP_ERR_BLOB_BOUNDS, SCRATCH_BOUNDS, SCRA, k, field);
    }
    return offset % TP_SCRA_ALIGN == 0u
               ? TP_OK
               : TP_REFUSE_FIELD(f, TP_ERR_BLOB_INVALID, SCRATCH_ALIGN, SCRA, k, field);
}

/* Every op's scratch inside the inference arena, and inside the training arena when the blob
 * trains (a blob without TRAN plans none for training). */
tp_status tp_check_scratch(const tp_blob_view *v, tp_fault *f)
{
    uint32_t k, offset, size;
    tp_status st = TP_OK;
    if (v->scratch == NULL) {
        return TP_OK;
    }
    for (k = 0; k < v->n_ops && st == TP_OK; k++) {
        size = tp_scratch_plan(v, k, 0u, &offset);
        st = check_scratch_entry(offset, size, v->req.arena_infer, k, TP_FIELD_SCRA_OP_INFER_OFFSET,
                                 f);
        if (st == TP_OK) {
            size = tp_scratch_plan(v, k, 1u, &offset);
            st = check_scratch_entry(offset, size, v->train != NULL ? v->req.arena_train : 0u, k,
                                     TP_FIELD_SCRA_OP_TRAIN_OFFSET, f);
        }
    }
    return st;
}

/* Under one plan (its arena), INPL record j's op's input and output at one offset (their
 * region: `region` bytes) and its channel buffer (`chan` bytes at `c`) inside the arena,
 * apart from them. */
static tp_status check_inplace_plan(uint32_t at_in, uint32_t at_out, uint32_t region, uint32_t c,
                                    uint32_t chan, uint32_t arena, uint32_t j, tp_fault *f)
{
    if (at_in != at_out || at_in == TP_NONE32) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, INPLACE_SHARED, INPL, j, INPL_OP_OP);
    }
    if (!within(at_in, region, arena) || !within(c, chan, arena)) {
        return TP_REFUSE(f, TP_ERR_BLOB_BOUNDS, INPLACE_BOUNDS, INPL, j, INPL_OP_CHANNEL_OFFSET);
    }
    return (c + chan <= at_in || at_in + region <= c)
               ? TP_OK
               : TP_REFUSE(f, TP_ERR_BLOB_INVALID, INPLACE_OVERLAP, INPL, j,
                           INPL_OP_CHANNEL_OFFSET);
}

/* INPL record j (op k) under the plans it names: in the tiled stage, its tile buffers; after
 * it, its tensors' offsets under each plan. */
static tp_status check_inplace_buffers(const tp_blob_view *v, uint32_t j, const tp_op *op,
                                       uint32_t plans, tp_fault *f)
{
    const uint8_t *p = v->inplace + TP_INPL_HDR_BYTES + TP_INPL_OP_BYTES * j;
    uint32_t k = op->index, plan;
    tp_tensor tin, tout;
    tp_decode_tensor(v->tensors, op->inputs[0], &tin);
    tp_decode_tensor(v->tensors, op->output, &tout);
    for (plan = 0; plan < 2u; plan++) {
        uint32_t c = tp_rd_u32(p + TP_INPL_OP_CHANNEL_OFFSET(plan)), arena, a_in, a_out, region,
                 chan;
        tp_status st;
        if (!(plans & (1u << plan))) {
            if (c != TP_NONE32) {
                return TP_REFUSE(f, TP_ERR_BLOB_INVALID, INPLACE_UNPLANNED, INPL, j,
                                 INPL_OP_CHANNEL_OFFSET);
            }
            continue;
        }
        arena = plan == 0u ? v->req.arena_infer : v->req.arena_train;
        if (k < v->stage_ops) { /* tile buffers: stage tensors k and k + 1 */
            uint32_t b_in = tp_tile_bytes(v, k), b_out = tp_tile_bytes(v, k + 1u);
            if (tp_tile_tensor_index(v, k) != op->inputs[0] || b_in == 0u || b_out == 0u) {
                return TP_REFUSE(f, TP_ERR_BLOB_INVALID, INPLACE_STAGE, INPL, j, INPL_OP_OP);
            }
            a_in = tp_tile_offset(v, k, plan);
            a_out = tp_tile_offset(v, k + 1u, plan);
            region = b_in > b_out ? b_in : b_out;
            chan = tp_tile_most_span(v, 0u, k + 1u) * tp_tile_most_span(v, 1u, k + 1u);
        } else {
            a_in = plan == 0u ? tin.offset : tp_tran_act_offset(v, op->inputs[0]);
            a_out = plan == 0u ? tout.offset : tp_tran_act_offset(v, op->output);
            region = tin.size > tout.size ? tin.size : tout.size;
            chan = (uint32_t)tout.dims[1] * tout.dims[2];
        }
        st = check_inplace_plan(a_in, a_out, region, c, chan, arena, j, f);
        if (st != TP_OK) {
            return st;
        }
    }
    return TP_OK;
}

/* The INPL section: ascending ops, each a depthwise convolution with multiplier 1 whose input
 * no other op reads (and, when it trains, no weight gradient reads: it is overwritten), its
 * input and output sharing bytes under each plan it names, its channel buffer beside them. */
tp_status tp_check_inplace(const tp_blob_view *v, tp_fault *f)
{
    uint32_t n, j, i, prev = 0u;
    if (v->inplace == NULL) {
        return TP_OK;
    }
    if (v->inplace_len < TP_INPL_HDR_BYTES || tp_rd_u16(v->inplace + TP_INPL_HDR_RESERVED) != 0u ||
        tp_rd_u32(v->inplace + TP_INPL_HDR_RESERVED_END) != 0u) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, INPLACE_LENGTH, INPL, TP_NO_RECORD, NONE);
    }
    n = tp_rd_u16(v->inplace + TP_INPL_HDR_N);
    if (v->inplace_len != TP_INPL_HDR_BYTES + TP_INPL_OP_BYTES * n) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, INPLACE_LENGTH, INPL, TP_NO_RECORD, INPL_HDR_N);
    }
    for (j = 0; j < n; j++) {
        const uint8_t *p = v->inplace + TP_INPL_HDR_BYTES + TP_INPL_OP_BYTES * j;
        uint32_t k = tp_rd_u16(p + TP_INPL_OP_OP), plans = p[TP_INPL_OP_PLANS];
        tp_op op, other;
        const uint8_t *rec;
        tp_status st;
        if (k >= v->n_ops || (j > 0u && k <= prev) || plans == 0u || plans > 3u ||
            p[TP_INPL_OP_RESERVED] != 0u || ((plans & 2u) && v->train == NULL)) {
            return TP_REFUSE(f, TP_ERR_BLOB_INVALID, INPLACE_ORDER, INPL, j, INPL_OP_OP);
        }
        prev = k;
        tp_decode_op(v->ops, k, &op);
        if (op.kind != TP_OP_DEPTHWISE_CONV_2D || op.depth_multiplier != 1u) {
            return TP_REFUSE(f, TP_ERR_BLOB_INVALID, INPLACE_KIND, INPL, j, INPL_OP_OP);
        }
        for (i = 0; i < v->n_ops; i++) {
            tp_decode_op(v->ops, i, &other);
            if (i != k && (other.inputs[0] == op.inputs[0] ||
                           (other.kind == TP_OP_ADD && other.inputs[1] == op.inputs[0]))) {
                return TP_REFUSE(f, TP_ERR_BLOB_INVALID, INPLACE_READERS, INPL, j, INPL_OP_OP);
            }
        }
        rec = tp_tran_record_of(v, k);
        if ((plans & 2u) && rec != NULL && (rec[TP_TRAN_OP_FLAGS] & TP_TRAN_WEIGHT)) {
            return TP_REFUSE(f, TP_ERR_BLOB_INVALID, INPLACE_TRAINED, INPL, j, INPL_OP_PLANS);
        }
        st = check_inplace_buffers(v, j, &op, plans, f);
        if (st != TP_OK) {
            return st;
        }
    }
    return TP_OK;
}

/* PWIG record j's op k: a 1x1 convolution of stride 1 without padding whose input channels are
 * a multiple of 4, its input gradient in TRAN and its weights not trained (no held rows). */
static tp_status check_pairs_op(const tp_blob_view *v, uint32_t j, uint32_t k, const tp_op *op,
                                tp_fault *f)
{
    const uint8_t *rec = tp_tran_record_of(v, k);
    tp_tensor w;
    if (rec == NULL || !(rec[TP_TRAN_OP_FLAGS] & TP_TRAN_GRAD_IN0)) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, PAIRS_ORDER, PWIG, j, PWIG_OP_OP);
    }
    if (op->kind != TP_OP_CONV_2D || op->k[0] != 1u || op->k[1] != 1u || op->stride[0] != 1u ||
        op->stride[1] != 1u || op->pad[0] != 0u || op->pad[1] != 0u) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, PAIRS_KIND, PWIG, j, PWIG_OP_OP);
    }
    tp_decode_tensor(v->tensors, op->inputs[1], &w); /* (O, 1, 1, I) int8 (tp_check_ops) */
    if (w.dims[3] % 4u != 0u) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, PAIRS_KIND, PWIG, j, PWIG_OP_OP);
    }
    if ((rec[TP_TRAN_OP_FLAGS] & TP_TRAN_WEIGHT) || op->held_map != TP_NONE32) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, PAIRS_TRAINED, PWIG, j, PWIG_OP_OP);
    }
    return TP_OK;
}

/* PWIG record j's channels (n ascending channels of the weights' o_n, every other row zero) and
 * pairs (each listed row's weights where pairs_section puts them, an odd last one's partner
 * zero), `at` in the section. */
static tp_status check_pairs_data(const tp_blob_view *v, uint32_t j, const uint8_t *at, uint32_t n,
                                  const tp_tensor *w, tp_fault *f)
{
    const int8_t *rows = (const int8_t *)(v->data + w->offset);
    const uint8_t *pairs = at + 2u * (n + (n & 1u));
    uint32_t o_n = w->dims[0], ic = w->dims[3], i, o, x, next = 0u, prev = 0u;
    for (i = 0; i < n; i++) {
        uint32_t c = tp_le_u16(at, i);
        if (c >= o_n || (i > 0u && c <= prev)) {
            return TP_REFUSE(f, TP_ERR_BLOB_INVALID, PAIRS_CHANNELS, PWIG, j, PWIG_OP_N_LIVE);
        }
        prev = c;
    }
    for (o = 0; o < o_n; o++) { /* unlisted rows zero */
        if (next < n && tp_le_u16(at, next) == o) {
            next++;
            continue;
        }
        for (x = 0; x < ic; x++) {
            if (rows[o * ic + x] != 0) {
                return TP_REFUSE(f, TP_ERR_BLOB_INVALID, PAIRS_CHANNELS, PWIG, j, PWIG_OP_N_LIVE);
            }
        }
    }
    for (i = 0; i < n; i++) { /* channel i's weights: bytes (i & 1) * 2, + 1 of each word */
        const int8_t *row = rows + tp_le_u16(at, i) * ic;
        const uint8_t *word = pairs + (i / 2u) * 2u * ic + (i & 1u) * 2u;
        for (x = 0; x < ic; x += 2u, word += 4) {
            if ((int8_t)word[0] != row[x] || (int8_t)word[1] != row[x + 1u] ||
                ((n & 1u) && i == n - 1u && (word[2] != 0u || word[3] != 0u))) {
                return TP_REFUSE(f, TP_ERR_BLOB_INVALID, PAIRS_WEIGHTS, PWIG, j, PWIG_OP_OFFSET);
            }
        }
    }
    return TP_OK;
}

/* The PWIG section (the DSP 1x1 input gradient's weights in pairs): ascending ops, each a 1x1
 * convolution whose input gradient trains and whose weights do not, its channels and pairs inside
 * the section and equal to its weights, read whole once here so that the kernel may trust
 * them. */
tp_status tp_check_pairs(const tp_blob_view *v, tp_fault *f)
{
    uint32_t len, n, j, prev = 0u;
    const uint8_t *sec = tp_blob_section(v, "PWIG", &len);
    if (sec == NULL) {
        return TP_OK;
    }
    if (len < TP_PWIG_HDR_BYTES || tp_rd_u16(sec + TP_PWIG_HDR_RESERVED) != 0u ||
        tp_rd_u32(sec + TP_PWIG_HDR_RESERVED_END) != 0u) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, PAIRS_LENGTH, PWIG, TP_NO_RECORD, NONE);
    }
    n = tp_rd_u16(sec + TP_PWIG_HDR_N);
    if (len < TP_PWIG_HDR_BYTES + TP_PWIG_OP_BYTES * n) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, PAIRS_LENGTH, PWIG, TP_NO_RECORD, PWIG_HDR_N);
    }
    for (j = 0; j < n; j++) {
        const uint8_t *p = sec + TP_PWIG_HDR_BYTES + TP_PWIG_OP_BYTES * j;
        uint32_t k = tp_rd_u16(p + TP_PWIG_OP_OP), live = tp_rd_u16(p + TP_PWIG_OP_N_LIVE);
        uint32_t at = tp_rd_u32(p + TP_PWIG_OP_OFFSET);
        tp_op op;
        tp_tensor w;
        tp_status st;
        if (k >= v->n_ops || (j > 0u && k <= prev) || v->train == NULL) {
            return TP_REFUSE(f, TP_ERR_BLOB_INVALID, PAIRS_ORDER, PWIG, j, PWIG_OP_OP);
        }
        prev = k;
        tp_decode_op(v->ops, k, &op);
        st = check_pairs_op(v, j, k, &op, f);
        if (st != TP_OK) {
            return st;
        }
        tp_decode_tensor(v->tensors, op.inputs[1], &w);
        if (live == 0u || live > w.dims[0]) {
            return TP_REFUSE(f, TP_ERR_BLOB_INVALID, PAIRS_KIND, PWIG, j, PWIG_OP_N_LIVE);
        }
        if (at % 4u != 0u ||
            !within(at, 2ull * (live + (live & 1u)) + 2ull * w.dims[3] * ((live + 1u) / 2u), len)) {
            return TP_REFUSE(f, TP_ERR_BLOB_BOUNDS, PAIRS_BOUNDS, PWIG, j, PWIG_OP_OFFSET);
        }
        st = check_pairs_data(v, j, sec + at, live, &w, f);
        if (st != TP_OK) {
            return st;
        }
    }
    return TP_OK;
}
