/* tp_check_tile.c - the TILE section (the tiled stage, docs/blob-format.md): its ops and
 * tensors, every tile's windows, its buffers inside each plan's arena, the input's row bands. */
#include "tinyprop.h"
#include "tp_check.h"

/* The activation inputs of stage op k: two for ADD, else one. */
static uint32_t op_n_in(const tp_blob_view *v, uint32_t k)
{
    return v->ops[TP_OPS_BYTES * k + TP_OPS_KIND] == TP_OP_ADD ? 2u : 1u;
}

/* The stage tensor holding tensor `ti` among the first `n` (n: not found). */
static uint32_t tile_index(const tp_blob_view *v, uint32_t ti, uint32_t n)
{
    uint32_t i;
    for (i = 0; i < n; i++) {
        if (tp_tile_tensor_index(v, i) == ti) {
            return i;
        }
    }
    return n;
}

/* Along one axis: the spans of band r, every op's input span containing what its output span
 * reads (columns: from exactly its first in-image tap, to exactly its last for a PAD: the
 * kernel runs on the buffer's columns), nothing empty. */
static tp_status check_spans(const tp_blob_view *v, uint32_t axis, uint32_t bands, tp_fault *f)
{
    uint32_t nt = tp_tile_tensors(v), r, i, lo, hi, prev = 0u;
    for (r = 0; r < bands; r++) {
        for (i = 0; i < nt; i++) {
            tp_tensor t;
            tp_decode_tensor(v->tensors, tp_tile_tensor_index(v, i), &t);
            tp_tile_span(v, axis, r, i, &lo, &hi);
            if (lo >= hi || hi > t.dims[1u + axis]) {
                return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TILE_SPAN, TILE, i, TILE_SPAN_HI);
            }
        }
        /* the stage output's spans cover its map in order, once */
        tp_tile_span(v, axis, r, nt - 1u, &lo, &hi);
        if (lo != prev) {
            return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TILE_COVER, TILE, nt - 1u, TILE_SPAN_LO);
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
                    return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TILE_NEED, TILE, in, TILE_SPAN_LO);
                }
                if (axis == 1u && op.kind != TP_OP_ADD &&
                    (a != in_lo || (op.kind == TP_OP_PAD && b != in_hi))) {
                    return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TILE_NEED, TILE, in, TILE_SPAN_LO);
                }
            }
        }
    }
    {
        tp_tensor t;
        tp_decode_tensor(v->tensors, tp_tile_tensor_index(v, nt - 1u), &t);
        return prev == t.dims[1u + axis]
                   ? TP_OK
                   : TP_REFUSE(f, TP_ERR_BLOB_INVALID, TILE_COVER, TILE, nt - 1u, TILE_SPAN_HI);
    }
}

uint32_t tp_tile_most_span(const tp_blob_view *v, uint32_t axis, uint32_t i)
{
    uint32_t r, lo, hi, most = 0u, bands = tp_tile_grid(v, axis);
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
    for (c = 0; c < tp_tile_grid(v, 1u); c++) {
        tp_tile_span(v, 1u, c, i, &lo, &hi);
        if (lo != 0u || hi != width) {
            return 0;
        }
    }
    return 1;
}

/* A tile buffer's (or the band's) offset under each plan: inside that plan's arena, none
 * (TP_NONE32) for the training plan of a blob that does not train. */
static tp_status check_tile_offsets(const tp_blob_view *v, uint32_t infer, uint32_t train,
                                    uint32_t bytes, uint32_t record, uint32_t field, tp_fault *f)
{
    if (!within(infer, bytes, v->req.arena_infer) ||
        (v->train != NULL && !within(train, bytes, v->req.arena_train))) {
        return TP_REFUSE_FIELD(f, TP_ERR_BLOB_BOUNDS, TILE_BUFFER_BOUNDS, TILE, record, field);
    }
    if (v->train == NULL && train != TP_NONE32) {
        return TP_REFUSE_FIELD(f, TP_ERR_BLOB_INVALID, TILE_UNTRAINED, TILE, record, field);
    }
    return TP_OK;
}

/* The stage's tensors: the input, then each op's output; its ops' operands among them. */
static tp_status check_stage_tensors(const tp_blob_view *v, uint32_t flags, uint32_t *tiled,
                                     tp_fault *f)
{
    uint32_t nt = tp_tile_tensors(v), i, j;
    tp_tensor t;
    for (i = 0; i < nt; i++) {
        const uint8_t *rec = tp_tile_tensor(v, i);
        uint32_t ti = tp_tile_tensor_index(v, i), want;
        tp_op op;
        if (tp_rd_u16(rec + TP_TILE_TENSOR_RESERVED) != 0u || ti >= v->n_tensors) {
            return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TILE_TENSOR, TILE, i, TILE_TENSOR_TENSOR);
        }
        if (i == 0u) {
            want = (flags & TP_TILE_INPUT_ROWS) ? TP_T_TILED : TP_T_ARENA;
            if (ti != v->input) {
                return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TILE_TENSOR, TILE, i, TILE_TENSOR_TENSOR);
            }
        } else {
            tp_decode_op(v->ops, i - 1u, &op);
            want = i + 1u < nt ? TP_T_TILED : TP_T_ARENA;
            if (op.output != ti ||
                (op.kind != TP_OP_CONV_2D && op.kind != TP_OP_ADD &&
                 op.kind != TP_OP_DEPTHWISE_CONV_2D && op.kind != TP_OP_AVERAGE_POOL_2D &&
                 op.kind != TP_OP_MAX_POOL_2D && op.kind != TP_OP_PAD)) {
                return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TILE_TENSOR, TILE, i, TILE_TENSOR_TENSOR);
            }
            for (j = 0; j < op_n_in(v, i - 1u); j++) {
                if (tile_index(v, op.inputs[j], i) >= i) {
                    return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TILE_OPERAND, OPS, i - 1u, OPS_INPUTS);
                }
            }
        }
        tp_decode_tensor(v->tensors, ti, &t);
        if ((t.flags & (TP_T_TILED | TP_T_ARENA)) != want || !tp_is_nhwc(&t)) {
            return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TILE_FLAGS, TENS, ti, TENS_FLAGS);
        }
        *tiled += want == TP_T_TILED ? 1u : 0u;
    }
    return TP_OK;
}

/* No tensor is tiled but the stage's (tiled of them), and no op after the stage reads one. */
static tp_status check_tiled_elsewhere(const tp_blob_view *v, uint32_t tiled, tp_fault *f)
{
    uint32_t i, j, n = 0u;
    tp_tensor t;
    for (i = 0; i < v->n_tensors; i++) {
        tp_decode_tensor(v->tensors, i, &t);
        n += (t.flags & TP_T_TILED) ? 1u : 0u;
        if ((t.flags & TP_T_TILED) && v->tile == NULL) {
            return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TILED_WITHOUT_TILE, TENS, i, TENS_FLAGS);
        }
    }
    if (n != tiled) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TILE_OUTSIDE, TILE, TP_NO_RECORD, NONE);
    }
    for (i = v->stage_ops; i < v->n_ops; i++) {
        tp_op op;
        tp_decode_op(v->ops, i, &op);
        for (j = 0; j < 2u; j++) {
            if (op.inputs[j] != TP_NONE16 && op.inputs[j] < v->n_tensors) {
                tp_decode_tensor(v->tensors, op.inputs[j], &t);
                if (t.flags & TP_T_TILED) {
                    return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TILE_OUTSIDE, OPS, i, OPS_INPUTS);
                }
            }
        }
    }
    return TP_OK;
}

/* Buffers: each holds its largest window; none only for the input or output read / written in
 * place as whole rows. */
static tp_status check_buffers(const tp_blob_view *v, tp_fault *f)
{
    uint32_t nt = tp_tile_tensors(v), i;
    tp_status st = TP_OK;
    for (i = 0; i < nt && st == TP_OK; i++) {
        uint32_t bytes = tp_tile_bytes(v, i);
        tp_tensor t;
        tp_decode_tensor(v->tensors, tp_tile_tensor_index(v, i), &t);
        if (bytes == 0u) {
            if ((i != 0u && i + 1u != nt) || !full_width(v, i, t.dims[2]) ||
                tp_tile_offset(v, i, 0u) != TP_NONE32 || tp_tile_offset(v, i, 1u) != TP_NONE32) {
                st = TP_REFUSE(f, TP_ERR_BLOB_INVALID, TILE_BUFFER, TILE, i,
                               TILE_TENSOR_BUFFER_BYTES);
            }
            continue;
        }
        if ((uint64_t)tp_tile_most_span(v, 0u, i) * tp_tile_most_span(v, 1u, i) * t.dims[3] >
            bytes) {
            st = TP_REFUSE(f, TP_ERR_BLOB_INVALID, TILE_BUFFER, TILE, i, TILE_TENSOR_BUFFER_BYTES);
        } else {
            st = check_tile_offsets(v, tp_tile_offset(v, i, 0u), tp_tile_offset(v, i, 1u), bytes, i,
                                    TP_FIELD_TILE_TENSOR_OFFSET, f);
        }
    }
    return st;
}

/* The band: the input rows of a tile row, full width, streaming forward; no band fields without
 * row bands. */
static tp_status check_band(const tp_blob_view *v, uint32_t flags, tp_fault *f)
{
    uint32_t band = tp_rd_u32(v->tile + TP_TILE_HDR_BAND_BYTES), i;
    tp_tensor t;
    tp_decode_tensor(v->tensors, v->input, &t);
    if (flags & TP_TILE_INPUT_ROWS) {
        uint32_t row = (uint32_t)t.dims[2] * t.dims[3];
        uint32_t lo, hi, plo = 0u, phi = 0u;
        for (i = 0; i < tp_tile_grid(v, 0u); i++) {
            tp_tile_span(v, 0u, i, 0u, &lo, &hi);
            if (lo < plo || hi < phi || (uint64_t)(hi - lo) * row > band) {
                return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TILE_BAND, TILE, TP_NO_RECORD,
                                 TILE_HDR_BAND_BYTES);
            }
            plo = lo;
            phi = hi;
        }
        return check_tile_offsets(v, tp_rd_u32(v->tile + TP_TILE_HDR_BAND_OFFSET(0)),
                                  tp_rd_u32(v->tile + TP_TILE_HDR_BAND_OFFSET(1)), band,
                                  TP_NO_RECORD, TP_FIELD_TILE_HDR_BAND_OFFSET, f);
    }
    return band == 0u && tp_rd_u32(v->tile + TP_TILE_HDR_BAND_OFFSET(0)) == TP_NONE32 &&
                   tp_rd_u32(v->tile + TP_TILE_HDR_BAND_OFFSET(1)) == TP_NONE32
               ? TP_OK
               : TP_REFUSE(f, TP_ERR_BLOB_INVALID, TILE_BAND, TILE, TP_NO_RECORD,
                           TILE_HDR_BAND_OFFSET);
}

/* The TILE section: ops 0..n-1 of kinds a tile can run, each reading the model input or an
 * earlier stage tensor; their inner tensors TILED and read by no later op; every tile's
 * windows contain what its ops read (check_spans); every buffer holds its largest window and
 * lies inside each plan's arena; the band's rows stream in order. */
tp_status tp_check_tile(tp_blob_view *v, tp_fault *f)
{
    uint32_t nt, tiled = 0u, flags, rows, cols;
    tp_status st;
    if (v->tile == NULL) {
        return check_tiled_elsewhere(v, 0u, f);
    }
    if (v->tile_len < TP_TILE_HDR_BYTES) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TILE_HEADER, TILE, TP_NO_RECORD, NONE);
    }
    v->stage_ops = tp_rd_u16(v->tile + TP_TILE_HDR_N_OPS);
    nt = tp_tile_tensors(v);
    rows = tp_tile_grid(v, 0u);
    cols = tp_tile_grid(v, 1u);
    flags = tp_tile_flags(v);
    if (v->stage_ops == 0u || v->stage_ops >= v->n_ops || nt != v->stage_ops + 1u || rows == 0u ||
        cols == 0u || (flags & ~TP_TILE_INPUT_ROWS) != 0u ||
        tp_rd_u32(v->tile + TP_TILE_HDR_RESERVED) != 0u ||
        v->tile_len != TP_TILE_HDR_BYTES + TP_TILE_TENSOR_BYTES * nt +
                           TP_TILE_SPAN_BYTES * nt * (rows + cols)) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TILE_HEADER, TILE, TP_NO_RECORD, NONE);
    }
    st = check_stage_tensors(v, flags, &tiled, f);
    if (st == TP_OK) {
        st = check_tiled_elsewhere(v, tiled, f);
    }
    if (st == TP_OK) {
        st = check_spans(v, 0u, rows, f);
    }
    if (st == TP_OK) {
        st = check_spans(v, 1u, cols, f);
    }
    if (st == TP_OK) {
        st = check_buffers(v, f);
    }
    return st == TP_OK ? check_band(v, flags, f) : st;
}
