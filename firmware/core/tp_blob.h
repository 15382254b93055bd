/* tp_blob.h - the blob format (docs/blob-format.md, host/tinyprop/compile/blob.py): its
 * constants, decoded views of its records, the run-time lookups of a checked blob, and the
 * loader (core/blob/) that checks a blob once so that nothing after it has to.
 *
 * The blob is read field by field (tp_le.h) at the offsets tp_blob_layout.h names, never by
 * casting pointers: the caller's buffer may have any alignment. Views are decoded on demand (a
 * 40- or 64-byte record), so a session holds no copies. The checks live in core/blob/.
 */
#ifndef TP_BLOB_H
#define TP_BLOB_H

#include <stddef.h>
#include <stdint.h>

#include "tinyprop.h"
#include "tp_attr.h" /* TP_NOINLINE */
#include "tp_blob_layout.h"
#include "tp_gradmap.h"
#include "tp_le.h"
#include "tp_ops.h" /* the op kinds */

/* tensor dtypes */
#define TP_DT_NONE 0u /* a shape operand folded into its op: no data, never an op operand */
#define TP_DT_INT8 1u
#define TP_DT_INT32 2u
#define TP_DT_FLOAT32 3u

/* tensor flags */
#define TP_T_CONST 1u
#define TP_T_ARENA 2u
#define TP_T_TRAINABLE 4u
#define TP_T_TILED 8u /* an activation held only tile by tile (TILE): no whole arena buffer */

/* A decoded TENS record. */
typedef struct {
    uint8_t dtype, rank, flags;
    uint16_t dims[4]; /* dims beyond rank are 0 */
    float scale;
    int32_t zero_point;
    uint32_t offset; /* into DATA (const) or the arena (activation) */
    uint32_t size;   /* bytes */
    uint32_t scales_offset;
    uint32_t params_offset; /* into the params region (trainable) */
    uint16_t n_scales;
} tp_tensor;

/* A decoded OPS record. */
typedef struct {
    uint16_t index; /* position in OPS (execution order) */
    uint8_t kind, activation, mode, depth_multiplier;
    uint16_t inputs[3]; /* TP_NONE16: absent */
    uint16_t output;
    int32_t in_zp, in2_zp, out_zp;
    int16_t act_min, act_max;
    uint8_t stride[2], pad[2], k[2], pad_after[2]; /* (h, w) */
    uint32_t mult_offset;                          /* int32 mult[n_mult], int32 shift[n_mult] */
    uint16_t n_mult;
    int16_t left_shift;
    int32_t diff_min;
    float float_scale;
    uint32_t held_map;    /* weighted op with trained rows: u16[out channels] in DATA, each
                             channel's row in the params region (TP_NONE16: read from DATA) */
    uint32_t held_params; /* params offset of held row 0; row r at held_params + r * row */
} tp_op;

/* ---- TRAN: the training program (docs/training.md, compile/train_plan.py) ----
 * header | act offset u32[n_tensors] | grad offset u32[n_tensors] | op records, ascending ops.
 * The training plan places activations and float gradients in the arena; TP_NONE32: none. */
#define TP_TRAN_BIAS 1u     /* update the op's bias */
#define TP_TRAN_WEIGHT 2u   /* update the op's held weight rows */
#define TP_TRAN_MASK 4u     /* keep a 1-bit mask of what the RELU/RELU6 passed */
#define TP_TRAN_GRAD_IN0 8u /* propagate the gradient to input 0 */
#define TP_TRAN_GRAD_IN1 16u
#define TP_TRAN_ZERO_IN0 64u /* first writer of input 0's gradient: zero it first */
#define TP_TRAN_ZERO_IN1 128u
/* the second flags byte (integer maps): a sink's output gradient is per-channel sums, which
 * its one writer adds its rows into (train_plan.F2_*) */
#define TP_TRAN_REDUCED 1u
#define TP_TRAN_REDUCE_IN0 2u
#define TP_TRAN_REDUCE_IN1 4u

/* ---- SCRA: the kernels' scratch plan (docs/blob-format.md, compile/kernels.py) ----
 * header | per op: its scratch's offset and size under the inference plan, then the same under
 * the training plan (size 0, offset TP_NONE32: none). The header's target names the kernels the
 * host planned for (informational: an op runs its build's kernel when the planned size is at
 * least what that kernel asks, else the reference kernel, which needs none). */

/* ---- TILE: the tiled stage (docs/blob-format.md, compile/patch.py) ----
 * header (n_tensors = n_ops + 1; grid: rows, cols) | per stage tensor: its tile buffer |
 * row spans: rows x n_tensors | column spans: cols x n_tensors. Tensor i's window in tile
 * (r, c) is row span [r][i] x column span [c][i]. Offsets [0] inference, [1] training. */
#define TP_TILE_INPUT_ROWS 1u /* flags: the input is read in row bands, not held whole */

/* ---- LABL: the class names (docs/blob-format.md, compile/blob.py) ----
 * header (n_labels = n_classes) | n_labels names, UTF-8, each NUL-terminated, nothing after. */

/* ---- INPL: ops run in place (docs/blob-format.md, compile/memory.py) ----
 * header | per op, ascending: plans (1 inference, 2 training), its channel buffer's offset
 * under each plan. */

/* A decoded TRAN op record. Trained weight rows are not here: the op record's held_map says
 * which rows RAM holds (the forward pass needs them too), and TP_TRAN_WEIGHT updates them. */
typedef struct {
    uint16_t op;
    uint8_t flags, flags2;
    uint32_t mask_offset, scratch_offset, n_sel;
    float scale_floor;
    uint32_t bias_params;
} tp_train_op;

static inline void tp_decode_tensor(const uint8_t *tens, uint32_t i, tp_tensor *t)
{
    const uint8_t *p = tens + TP_TENS_BYTES * i;
    uint32_t d;
    t->dtype = p[TP_TENS_DTYPE];
    t->rank = p[TP_TENS_RANK];
    t->flags = p[TP_TENS_FLAGS];
    for (d = 0; d < 4; d++) {
        t->dims[d] = tp_rd_u16(p + TP_TENS_DIMS(d));
    }
    t->scale = tp_rd_f32(p + TP_TENS_SCALE);
    t->zero_point = tp_rd_i32(p + TP_TENS_ZERO_POINT);
    t->offset = tp_rd_u32(p + TP_TENS_OFFSET);
    t->size = tp_rd_u32(p + TP_TENS_SIZE);
    t->scales_offset = tp_rd_u32(p + TP_TENS_SCALES_OFFSET);
    t->params_offset = tp_rd_u32(p + TP_TENS_PARAMS_OFFSET);
    t->n_scales = tp_rd_u16(p + TP_TENS_N_SCALES);
}

static inline void tp_decode_op(const uint8_t *ops, uint32_t i, tp_op *op)
{
    const uint8_t *p = ops + TP_OPS_BYTES * i;
    uint32_t j;
    op->index = (uint16_t)i;
    op->kind = p[TP_OPS_KIND];
    op->activation = p[TP_OPS_ACTIVATION];
    op->mode = p[TP_OPS_MODE];
    op->depth_multiplier = p[TP_OPS_DEPTH_MULTIPLIER];
    for (j = 0; j < 3; j++) {
        op->inputs[j] = tp_rd_u16(p + TP_OPS_INPUTS(j));
    }
    op->output = tp_rd_u16(p + TP_OPS_OUTPUT);
    op->in_zp = tp_rd_i32(p + TP_OPS_IN_ZP);
    op->in2_zp = tp_rd_i32(p + TP_OPS_IN2_ZP);
    op->out_zp = tp_rd_i32(p + TP_OPS_OUT_ZP);
    op->act_min = tp_rd_i16(p + TP_OPS_ACT_MIN);
    op->act_max = tp_rd_i16(p + TP_OPS_ACT_MAX);
    for (j = 0; j < 2; j++) {
        op->stride[j] = p[TP_OPS_STRIDE(j)];
        op->pad[j] = p[TP_OPS_PAD(j)];
        op->k[j] = p[TP_OPS_K(j)];
        op->pad_after[j] = p[TP_OPS_PAD_AFTER(j)];
    }
    op->mult_offset = tp_rd_u32(p + TP_OPS_MULT_OFFSET);
    op->n_mult = tp_rd_u16(p + TP_OPS_N_MULT);
    op->left_shift = tp_rd_i16(p + TP_OPS_LEFT_SHIFT);
    op->diff_min = tp_rd_i32(p + TP_OPS_DIFF_MIN);
    op->float_scale = tp_rd_f32(p + TP_OPS_FLOAT_SCALE);
    op->held_map = tp_rd_u32(p + TP_OPS_HELD_MAP);
    op->held_params = tp_rd_u32(p + TP_OPS_HELD_PARAMS);
}

static inline void tp_decode_train_op(const uint8_t *p, tp_train_op *t)
{
    t->op = tp_rd_u16(p + TP_TRAN_OP_OP);
    t->flags = p[TP_TRAN_OP_FLAGS];
    t->flags2 = p[TP_TRAN_OP_FLAGS2];
    t->mask_offset = tp_rd_u32(p + TP_TRAN_OP_MASK_OFFSET);
    t->scratch_offset = tp_rd_u32(p + TP_TRAN_OP_SCRATCH_OFFSET);
    t->n_sel = tp_rd_u32(p + TP_TRAN_OP_N_SEL);
    t->scale_floor = tp_rd_f32(p + TP_TRAN_OP_SCALE_FLOOR);
    t->bias_params = tp_rd_u32(p + TP_TRAN_OP_BIAS_PARAMS);
}

/* Elements of a tensor (product of its dims; 1 for a scalar). */
static inline uint32_t tp_tensor_elems(const tp_tensor *t)
{
    uint32_t n = 1, d;
    for (d = 0; d < t->rank && d < 4; d++) {
        n *= t->dims[d];
    }
    return n;
}

/* Output channels of a weighted op's weights: (O, KH, KW, I) and (O, I) lead with them,
 * a depthwise (1, KH, KW, C) ends with them. The one place that rule is written. */
static inline uint32_t tp_weight_channels(const tp_op *op, const tp_tensor *w)
{
    return op->kind == TP_OP_DEPTHWISE_CONV_2D ? w->dims[3] : w->dims[0];
}

/* An op the loader checks, with the operands its kind has (tp_ops.h) decoded and checked for
 * their roles: the int8 activations in, in2 (2 inputs) and out; the weights and the bias
 * (rank 0 when absent) of a weighted kind, their channel counts checked against n_mult. */
typedef struct {
    const tp_blob_view *v;
    const tp_op *op;
    tp_tensor in, in2, out, weights, bias;
} tp_checked_op;

/* What the loader knows of an op kind, from its row in tp_ops.h (tp_op_checks.c). */
typedef struct {
    int (*check)(const tp_checked_op *c); /* its shapes and parameters: 1 when right */
    uint8_t weighted, inputs;             /* the row's weights and inputs */
    uint8_t q_row, q_chan;                /* its integer-map input gradient's scratch */
} tp_op_def;

/* Indexed by a checked op's kind (0 and kinds >= TP_OP_KIND_COUNT are refused before). */
extern const tp_op_def tp_op_defs[TP_OP_KIND_COUNT];

static inline int tp_is_nhwc(const tp_tensor *t)
{
    return t->rank == 4u && t->dims[0] == 1u;
}

/* ---- the training program of a checked blob (b->train != NULL) ---- */

static inline uint32_t tp_tran_first(const tp_blob_view *b) /* earliest op updated */
{
    return tp_rd_u16(b->train + TP_TRAN_HDR_FIRST);
}

static inline uint32_t tp_tran_last(const tp_blob_view *b) /* the op making the logits */
{
    return tp_rd_u16(b->train + TP_TRAN_HDR_LAST);
}

/* The gradient maps' format (TP_GRAD_*, tp_gradmap.h). */
static inline uint32_t tp_tran_grad_format(const tp_blob_view *b)
{
    return tp_rd_u16(b->train + TP_TRAN_HDR_GRAD_FORMAT);
}

/* The losses' ids in TRAN (program.LOSSES; tp_loss.h computes them). */
#define TP_LOSS_XENT 0u /* softmax cross-entropy of the logits and the label */
#define TP_LOSS_MSE 1u  /* mean squared error of the output against the input */
#define TP_LOSSES 2u

/* What the step minimises (TP_LOSS_*). */
static inline uint32_t tp_tran_loss(const tp_blob_view *b)
{
    return tp_rd_u16(b->train + TP_TRAN_HDR_LOSS);
}

/* Records in TRAN: one per op of the backward pass, ascending by op (the loader checks). */
static inline uint32_t tp_tran_ops(const tp_blob_view *b)
{
    return b->train != NULL ? tp_rd_u16(b->train + TP_TRAN_HDR_N_OPS) : 0u;
}

/* TRAN record j (j < tp_tran_ops). */
static inline const uint8_t *tp_tran_record(const tp_blob_view *b, uint32_t j)
{
    return b->train + TP_TRAN_HDR_BYTES + 2u * TP_TRAN_OFF_BYTES * b->n_tensors +
           TP_TRAN_OP_BYTES * j;
}

/* The op of TRAN record j. */
static inline uint32_t tp_tran_record_op(const tp_blob_view *b, uint32_t j)
{
    return tp_rd_u16(tp_tran_record(b, j) + TP_TRAN_OP_OP);
}

/* Training-plan arena offset of a tensor's activation / gradient buffer (TP_NONE32: none). */
static inline uint32_t tp_tran_act_offset(const tp_blob_view *b, uint32_t tensor)
{
    return tp_rd_u32(b->train + TP_TRAN_HDR_BYTES + TP_TRAN_OFF_BYTES * tensor);
}

static inline uint32_t tp_tran_grad_offset(const tp_blob_view *b, uint32_t tensor)
{
    return tp_rd_u32(b->train + TP_TRAN_HDR_BYTES + TP_TRAN_OFF_BYTES * (b->n_tensors + tensor));
}

/* The TRAN record of op k, or NULL when op k takes no part in the backward pass (a binary
 * search of the ascending records; the step's loops walk them in order instead). */
const uint8_t *tp_tran_record_of(const tp_blob_view *b, uint32_t k);

/* Section `id` (4 bytes) of a blob whose header the loader checked: its start, its size in
 * *len; NULL (and 0) when the blob has none. A walk of the section table, for sections read
 * rarely that keep no view in the session (LABL). */
const uint8_t *tp_blob_section(const tp_blob_view *b, const char *id, uint32_t *len);

/* ---- PWIG: the DSP 1x1 input gradient's weights in pairs (docs/blob-format.md,
 * compile/blob.py pairs_section) ----
 * header | per op, ascending: n_live, offset | at offset: the n_live channels with a nonzero
 * weight row (u16, padded to 4 bytes), then per pair of them a row of I / 2 words, word k
 * (W[o, 2k], W[o, 2k + 1], W[o', 2k], W[o', 2k + 1]). Op k's pairs, its channels in *live
 * (u16 LE, *n_live of them), or NULL (and 0) when PWIG has none for it. */
const uint8_t *tp_pairs_of(const tp_blob_view *b, uint32_t k, const uint8_t **live,
                           uint32_t *n_live);

/* The op writing tensor i (its output), or TP_NONE32. */
uint32_t tp_producer_of(const tp_blob_view *b, uint32_t tensor);

/* (rows, values a row) of a tensor's gradient map as a kernel writes it: an NHWC tensor's image
 * rows, anything else one row (train_plan.map_rows). */
void tp_map_rows(const tp_tensor *t, uint32_t *rows, uint32_t *row_elems);

/* Scratch bytes of op's backward step under the blob's gradient format (train_plan's
 * backward_scratch): the weight gradient's float32 row, an integer map's row shifts, a weighted
 * op's int32 row of dX sums and one pixel's dY'. */
uint32_t tp_backward_scratch_bytes(const tp_blob_view *b, const tp_op *op, uint32_t flags);

/* Held row of output channel o of a weighted op (TP_NONE16: read from the blob). */
static inline uint32_t tp_held_row(const tp_blob_view *b, const tp_op *op, uint32_t o)
{
    return op->held_map == TP_NONE32 ? TP_NONE16 : tp_le_u16(b->data + op->held_map, o);
}

/* Op k's planned scratch under the inference (train 0) or training (train 1) plan: its size
 * (0: none), its arena offset in *offset. */
static inline uint32_t tp_scratch_plan(const tp_blob_view *b, uint32_t k, uint32_t train,
                                       uint32_t *offset)
{
    const uint8_t *e;
    if (b->scratch == NULL) {
        *offset = TP_NONE32;
        return 0u;
    }
    e = b->scratch + TP_SCRA_HDR_BYTES + TP_SCRA_OP_BYTES * k;
    *offset = tp_rd_u32(e + (train ? TP_SCRA_OP_TRAIN_OFFSET : TP_SCRA_OP_INFER_OFFSET));
    return tp_rd_u32(e + (train ? TP_SCRA_OP_TRAIN_SIZE : TP_SCRA_OP_INFER_SIZE));
}

/* ---- the tiled stage of a checked blob (b->tile != NULL) ---- */

static inline uint32_t tp_tile_tensors(const tp_blob_view *b)
{
    return tp_rd_u16(b->tile + TP_TILE_HDR_N_TENSORS);
}

/* Tiles along axis 0 (rows) or 1 (columns). */
static inline uint32_t tp_tile_grid(const tp_blob_view *b, uint32_t axis)
{
    return b->tile[TP_TILE_HDR_GRID(axis)];
}

static inline uint32_t tp_tile_flags(const tp_blob_view *b) /* TP_TILE_INPUT_ROWS */
{
    return tp_rd_u16(b->tile + TP_TILE_HDR_FLAGS);
}

/* Stage tensor i's record (TP_TILE_TENSOR_*). */
static inline const uint8_t *tp_tile_tensor(const tp_blob_view *b, uint32_t i)
{
    return b->tile + TP_TILE_HDR_BYTES + TP_TILE_TENSOR_BYTES * i;
}

/* Stage tensor i's tensor index, and its tile buffer's bytes (0: none) and offset under a plan
 * (0 inference, 1 training). */
static inline uint32_t tp_tile_tensor_index(const tp_blob_view *b, uint32_t i)
{
    return tp_rd_u16(tp_tile_tensor(b, i) + TP_TILE_TENSOR_TENSOR);
}

static inline uint32_t tp_tile_bytes(const tp_blob_view *b, uint32_t i)
{
    return tp_rd_u32(tp_tile_tensor(b, i) + TP_TILE_TENSOR_BUFFER_BYTES);
}

static inline uint32_t tp_tile_offset(const tp_blob_view *b, uint32_t i, uint32_t plan)
{
    return tp_rd_u32(tp_tile_tensor(b, i) + TP_TILE_TENSOR_OFFSET(plan));
}

/* Stage tensor i's span along axis 0 (rows, band r) or 1 (columns, band r): [*lo, *hi). */
static inline void tp_tile_span(const tp_blob_view *b, uint32_t axis, uint32_t r, uint32_t i,
                                uint32_t *lo, uint32_t *hi)
{
    uint32_t nt = tp_tile_tensors(b);
    const uint8_t *p = tp_tile_tensor(b, nt) + /* the spans follow the last tensor record */
                       TP_TILE_SPAN_BYTES *
                           ((axis == 0u ? 0u : tp_tile_grid(b, 0u) * nt) + r * nt + i);
    *lo = tp_rd_u16(p + TP_TILE_SPAN_LO);
    *hi = tp_rd_u16(p + TP_TILE_SPAN_HI);
}

/* The channel buffer of op k when it runs in place under a plan (0 inference, 1 training), or
 * TP_NONE32. */
uint32_t tp_inplace_of(const tp_blob_view *b, uint32_t k, uint32_t plan);

/* The input span an op's output span [lo, hi) reads along an axis (clipped to [0, n)), and
 * the padding the kernel takes for it (PAD: the rows / columns before the input). */
void tp_tile_need(const tp_op *op, uint32_t axis, uint32_t lo, uint32_t hi, uint32_t n,
                  uint32_t *need_lo, uint32_t *need_hi, uint32_t *pad);

/* Bytes of the params region before the optimizer state: the parameters. */
static inline uint32_t tp_param_bytes(const tp_blob_view *b)
{
    return b->req.params - b->req.optimizer;
}

/* Check a whole blob (header, CRC, sections, every tensor, op and the training program) and
 * fill *b with its section views and requirements; a refusal says which check failed in
 * *fault (core/blob/). Never reads outside blob[0..len). */
tp_status tp_blob_parse(tp_blob_view *b, const uint8_t *blob, uint32_t len, tp_fault *fault);

#endif /* TP_BLOB_H */
