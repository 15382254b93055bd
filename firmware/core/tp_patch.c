/* tp_patch.c - the tiled stage (docs/blob-format.md, TILE; host/tinyprop/compile/patch.py):
 * ops 0..n-1 run tile by tile over a grid of their output, each tile's windows in small tile
 * buffers every tile reuses, the stage's output held whole. A tile is the op's kernel on its
 * windows with the padding the window needs: the same integer arithmetic as the whole op,
 * so the same bits. The loader checked every window, span and buffer (check_tile). */
#include "tinyprop.h"
#include "tp_forward.h"

#include <string.h>

/* One stage tensor in the current tile: its window and where the window's bytes are (rows
 * win_w * c bytes apart: a tile buffer, or whole rows of the tensor itself). */
typedef struct {
    uint32_t y0, y1, x0, x1, c;
    int8_t *data;
    uint32_t stride; /* bytes between the window's rows */
} window;

typedef struct {
    tp_session *s;
    tp_plan plan;
    uint32_t nt, band_lo, band_hi; /* the input rows in the band (row-band input) */
    int8_t *band;
} stage_ctx;

/* Stage tensor i's whole-tensor bytes: the input (its band when it streams) or the output. */
static int8_t *whole(stage_ctx *x, uint32_t i, const tp_tensor *t, uint32_t y0, uint32_t rows)
{
    uint32_t row = (uint32_t)t->dims[2] * t->dims[3];
    if (i == 0u && x->band != NULL) {
        return x->band + (y0 - x->band_lo) * row;
    }
    return (
        int8_t *)tp_arena_at(x->s,
                             (x->plan == TP_PLAN_TRAIN
                                  ? tp_tran_act_offset(&x->s->b, tp_tile_tensor_index(&x->s->b, i))
                                  : t->offset) +
                                 y0 * row,
                             rows * row);
}

/* Where stage tensor i's window of tile (r, c) lives. */
static void window_of(stage_ctx *x, uint32_t i, uint32_t r, uint32_t c, window *w)
{
    const tp_blob_view *b = &x->s->b;
    uint32_t bytes = tp_tile_bytes(b, i);
    tp_tensor t;
    tp_decode_tensor(b->tensors, tp_tile_tensor_index(b, i), &t);
    tp_tile_span(b, 0u, r, i, &w->y0, &w->y1);
    tp_tile_span(b, 1u, c, i, &w->x0, &w->x1);
    w->c = t.dims[3];
    if (bytes != 0u) {
        w->data = (int8_t *)tp_arena_at(x->s, tp_tile_offset(b, i, (uint32_t)x->plan), bytes);
        w->stride = (w->x1 - w->x0) * w->c;
    } else { /* whole rows (the loader: every column span is the full width) */
        w->data = whole(x, i, &t, w->y0, w->y1 - w->y0);
        w->stride = (uint32_t)t.dims[2] * w->c;
    }
}

/* Copy a window between a tile buffer and whole rows of its tensor (to_tile: into the tile). */
static void copy_window(stage_ctx *x, uint32_t i, const window *w, int to_tile)
{
    tp_tensor t;
    uint32_t y, row, n = (w->x1 - w->x0) * w->c;
    int8_t *rows;
    tp_decode_tensor(x->s->b.tensors, tp_tile_tensor_index(&x->s->b, i), &t);
    row = (uint32_t)t.dims[2] * w->c;
    rows = whole(x, i, &t, w->y0, w->y1 - w->y0) + w->x0 * w->c;
    for (y = 0; y < w->y1 - w->y0; y++) {
        if (to_tile) {
            memcpy(w->data + y * n, rows + y * row, n);
        } else {
            memcpy(rows + y * row, w->data + y * n, n);
        }
    }
}

/* The band of tile row r: keep the rows it shares with the last band, read the rest. */
static tp_status fill_band(stage_ctx *x, uint32_t r)
{
    tp_session *s = x->s;
    tp_tensor t;
    uint32_t lo, hi, keep_from, row;
    tp_decode_tensor(s->b.tensors, s->b.input, &t);
    row = (uint32_t)t.dims[2] * t.dims[3];
    tp_tile_span(&s->b, 0u, r, 0u, &lo, &hi);
    keep_from = lo > x->band_lo ? lo : x->band_lo;
    if (r > 0u && keep_from < x->band_hi) {
        memmove(x->band, x->band + (keep_from - x->band_lo) * row, (x->band_hi - keep_from) * row);
        keep_from = x->band_hi;
    } else {
        keep_from = lo;
    }
    if (keep_from < hi &&
        s->rows(s->rows_ctx, keep_from, hi - keep_from, x->band + (keep_from - lo) * row,
                (hi - keep_from) * row) != TP_OK) {
        return TP_ERR_BAD_INPUT;
    }
    x->band_lo = lo;
    x->band_hi = hi;
    return TP_OK;
}

/* The window of tile (r, c) of the stage tensor holding tensor `ti` (among the first n). */
static void input_window(stage_ctx *x, uint32_t ti, uint32_t n, uint32_t r, uint32_t c, window *w)
{
    uint32_t j;
    for (j = 0; j < n; j++) {
        if (tp_tile_tensor_index(&x->s->b, j) == ti) {
            window_of(x, j, r, c, w);
            return;
        }
    }
}

/* Stage op k of tile (r, c): its kernel on its input windows, into its output window. */
static void tile_op(stage_ctx *x, uint32_t k, uint32_t r, uint32_t c)
{
    tp_session *s = x->s;
    tp_op op;
    tp_act in, in2, out;
    window o, a;
    tp_decode_op(s->b.ops, k, &op);
    window_of(x, k + 1u, r, c, &o);
    input_window(x, op.inputs[0], k + 1u, r, c, &a);
    out.data = o.data;
    out.shape.h = (int32_t)(o.y1 - o.y0);
    out.shape.w = (int32_t)(o.x1 - o.x0);
    out.shape.c = (int32_t)o.c;
    if (op.kind == TP_OP_ADD) { /* row by row: the inputs' windows may be wider */
        window b;
        uint32_t y;
        input_window(x, op.inputs[1], k + 1u, r, c, &b);
        out.shape.h = 1;
        in.shape = in2.shape = out.shape;
        for (y = o.y0; y < o.y1; y++) {
            in.data = a.data + (y - a.y0) * a.stride + (o.x0 - a.x0) * a.c;
            in2.data = b.data + (y - b.y0) * b.stride + (o.x0 - b.x0) * b.c;
            tp_exec_op(s, &op, x->plan, &in, &in2, &out);
            out.data += o.stride;
        }
        return;
    }
    {
        tp_tensor t;
        uint32_t pad[2], lo[2], hi[2], axis, chan;
        tp_decode_tensor(s->b.tensors, op.inputs[0], &t);
        tp_tile_need(&op, 0u, o.y0, o.y1, t.dims[1], &lo[0], &hi[0], &pad[0]);
        tp_tile_need(&op, 1u, o.x0, o.x1, t.dims[2], &lo[1], &hi[1], &pad[1]);
        /* from the first row the window reads; its columns are the buffer's (the loader: they
         * start at the window's first in-image column, and end at its last for a PAD) */
        in.data = a.data + (lo[0] - a.y0) * a.stride;
        in.shape.h = (int32_t)(hi[0] - lo[0]);
        in.shape.w = (int32_t)(a.x1 - a.x0);
        in.shape.c = (int32_t)a.c;
        for (axis = 0; axis < 2u; axis++) {
            op.pad[axis] = (uint8_t)pad[axis];
            if (op.kind == TP_OP_PAD) { /* what follows the input inside the window */
                uint32_t out_n = axis == 0u ? o.y1 - o.y0 : o.x1 - o.x0;
                op.pad_after[axis] = (uint8_t)(out_n - (hi[axis] - lo[axis]) - pad[axis]);
            }
        }
        chan = tp_inplace_of(&s->b, k, (uint32_t)x->plan);
        if (chan != TP_NONE32) {
            tp_exec_inplace(s, &op, x->plan, &in, &out,
                            (int8_t *)tp_arena_at(s, chan, (uint32_t)(out.shape.h * out.shape.w)));
        } else {
            tp_exec_op(s, &op, x->plan, &in, NULL, &out);
        }
    }
}

tp_status tp_run_stage(tp_session *s, tp_plan plan, uint32_t *n)
{
    const tp_blob_view *b = &s->b;
    stage_ctx x;
    window w;
    uint32_t r, c, k;
    *n = 0u;
    if (b->tile == NULL) {
        return TP_OK;
    }
    memset(&x, 0, sizeof x);
    x.s = s;
    x.plan = plan;
    x.nt = tp_tile_tensors(b);
    if (tp_tile_flags(b) & TP_TILE_INPUT_ROWS) {
        if (s->rows == NULL) {
            return TP_ERR_BAD_INPUT;
        }
        x.band = (int8_t *)tp_arena_at(s, tp_rd_u32(b->tile + TP_TILE_HDR_BAND_OFFSET(plan)),
                                       tp_rd_u32(b->tile + TP_TILE_HDR_BAND_BYTES));
    }
    for (r = 0; r < tp_tile_grid(b, 0u); r++) {
        if (x.band != NULL && fill_band(&x, r) != TP_OK) {
            return TP_ERR_BAD_INPUT;
        }
        for (c = 0; c < tp_tile_grid(b, 1u); c++) {
            if (tp_tile_bytes(b, 0u) != 0u) { /* the input's window, copied in */
                window_of(&x, 0u, r, c, &w);
                copy_window(&x, 0u, &w, 1);
            }
            for (k = 0; k + 1u < x.nt; k++) {
                tile_op(&x, k, r, c);
            }
            if (tp_tile_bytes(b, x.nt - 1u) != 0u) { /* the output's, out */
                window_of(&x, x.nt - 1u, r, c, &w);
                copy_window(&x, x.nt - 1u, &w, 0);
            }
        }
    }
    *n = b->stage_ops;
    return TP_OK;
}
