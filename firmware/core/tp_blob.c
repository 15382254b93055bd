/* tp_blob.c - the run-time views of a checked blob (core/blob/ checks it): lookups the
 * interpreters make, indexed or searched in records the loader checked are in order. */
#include "tp_blob.h"
#include "tinyprop.h"

#include <string.h>

const uint8_t *tp_tran_record_of(const tp_blob_view *b, uint32_t k)
{
    uint32_t lo = 0u, hi = tp_tran_ops(b); /* the records' ops ascend (tp_check_train) */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2u, op = tp_tran_record_op(b, mid);
        if (op == k) {
            return tp_tran_record(b, mid);
        }
        if (op < k) {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    return NULL;
}

const uint8_t *tp_blob_section(const tp_blob_view *b, const char *id, uint32_t *len)
{
    uint32_t i, n = tp_rd_u16(b->blob + TP_HDR_N_SECTIONS);
    for (i = 0; i < n; i++) { /* every entry inside the blob (tp_check_header) */
        const uint8_t *rec = b->blob + TP_HDR_BYTES + TP_SEC_BYTES * i;
        if (memcmp(rec + TP_SEC_ID, id, 4) == 0) {
            *len = tp_rd_u32(rec + TP_SEC_SIZE);
            return b->blob + tp_rd_u32(rec + TP_SEC_OFFSET);
        }
    }
    *len = 0u;
    return NULL;
}

const uint8_t *tp_pairs_of(const tp_blob_view *b, uint32_t k, const uint8_t **live,
                           uint32_t *n_live)
{
    uint32_t len, lo = 0u, hi;
    const uint8_t *sec = tp_blob_section(b, "PWIG", &len);
    *live = NULL;
    *n_live = 0u;
    if (sec == NULL) {
        return NULL;
    }
    hi = tp_rd_u16(sec + TP_PWIG_HDR_N); /* ascending ops (tp_check_pairs) */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2u;
        const uint8_t *p = sec + TP_PWIG_HDR_BYTES + TP_PWIG_OP_BYTES * mid;
        uint32_t op = tp_rd_u16(p + TP_PWIG_OP_OP);
        if (op == k) {
            uint32_t n = tp_rd_u16(p + TP_PWIG_OP_N_LIVE);
            *live = sec + tp_rd_u32(p + TP_PWIG_OP_OFFSET);
            *n_live = n;
            return *live + 2u * (n + (n & 1u));
        }
        if (op < k) {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    return NULL;
}

uint32_t tp_producer_of(const tp_blob_view *b, uint32_t tensor)
{
    uint32_t k;
    for (k = 0; k < b->n_ops; k++) {
        if (tp_rd_u16(b->ops + TP_OPS_BYTES * k + TP_OPS_OUTPUT) == tensor) {
            return k;
        }
    }
    return TP_NONE32;
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

uint32_t tp_inplace_of(const tp_blob_view *b, uint32_t k, uint32_t plan)
{
    uint32_t lo = 0u, hi;
    if (b->inplace == NULL) {
        return TP_NONE32;
    }
    hi = tp_rd_u16(b->inplace + TP_INPL_HDR_N);
    while (lo < hi) { /* the records' ops ascend (tp_check_inplace) */
        uint32_t mid = lo + (hi - lo) / 2u;
        const uint8_t *p = b->inplace + TP_INPL_HDR_BYTES + TP_INPL_OP_BYTES * mid;
        uint32_t op = tp_rd_u16(p + TP_INPL_OP_OP);
        if (op == k) {
            return (p[TP_INPL_OP_PLANS] & (1u << plan))
                       ? tp_rd_u32(p + TP_INPL_OP_CHANNEL_OFFSET(plan))
                       : TP_NONE32;
        }
        if (op < k) {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    return TP_NONE32;
}
