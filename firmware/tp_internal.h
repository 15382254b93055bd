/* tp_internal.h - what every core file shares: little-endian field accessors, the blob v1
 * layout (docs/blob-format.md, host/tinyprop/blob.py) and decoded views of tensors and ops.
 *
 * The blob is read field by field through the accessors below, never by casting pointers: the
 * caller's buffer may have any alignment, and the format is little-endian on every target.
 * Views are decoded on demand (a 40- or 64-byte record), so the session holds no copies.
 */
#ifndef TP_INTERNAL_H
#define TP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tinyprop.h"

/* CRC-32 (zlib's), defined once for frames and blobs in tp_proto.c. Declared here because
 * tp_proto.h's error enum collides with tinyprop.h's (TP_ERR_NOT_LOADED). */
uint32_t tp_crc32(uint32_t crc, const uint8_t *data, size_t n);

/* A hot loop nest kept out of its caller: inlined into a large function, its loop counters and
 * pointers are spilled to the stack and every multiply-accumulate reloads them. */
#if defined(__GNUC__)
#define TP_NOINLINE __attribute__((noinline))
#else
#define TP_NOINLINE
#endif

/* ---- little-endian fields ---- */
static inline uint16_t tp_rd_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t tp_rd_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}
static inline int32_t tp_rd_i32(const uint8_t *p)
{
    uint32_t u = tp_rd_u32(p);
    /* two's complement without implementation-defined conversion */
    return u <= 0x7FFFFFFFu ? (int32_t)u : -(int32_t)(~u) - 1;
}
static inline int16_t tp_rd_i16(const uint8_t *p)
{
    uint16_t u = tp_rd_u16(p);
    return u <= 0x7FFFu ? (int16_t)u : (int16_t)(-(int32_t)(uint16_t)~u - 1);
}
static inline float tp_rd_f32(const uint8_t *p)
{
    union {
        uint32_t u;
        float f;
    } v;
    v.u = tp_rd_u32(p);
    return v.f;
}
/* Element i of a little-endian int32 array (biases, multipliers, shifts). */
static inline int32_t tp_le_i32(const uint8_t *arr, uint32_t i)
{
    return tp_rd_i32(arr + 4u * i);
}

/* ---- blob v2 layout ---- */
#define TP_BLOB_VERSION 2u
#define TP_HEADER_SIZE 48u
#define TP_SECTION_SIZE 12u
#define TP_TENSOR_SIZE 40u
#define TP_OP_SIZE 64u
#define TP_CRC_SIZE 4u
#define TP_SECTION_ALIGN 8u
#define TP_NONE16 0xFFFFu
#define TP_NONE32 0xFFFFFFFFu

/* tensor dtypes */
#define TP_DT_NONE 0u /* a shape operand folded into its op: no data, never an op operand */
#define TP_DT_INT8 1u
#define TP_DT_INT32 2u
#define TP_DT_FLOAT32 3u

/* tensor flags */
#define TP_T_CONST 1u
#define TP_T_ARENA 2u
#define TP_T_TRAINABLE 4u

/* op kinds (graph.OP_CODES) */
typedef enum {
    TP_OP_CONV_2D = 1,
    TP_OP_DEPTHWISE_CONV_2D = 2,
    TP_OP_FULLY_CONNECTED = 3,
    TP_OP_ADD = 4,
    TP_OP_AVERAGE_POOL_2D = 5,
    TP_OP_MEAN = 6,
    TP_OP_PAD = 7,
    TP_OP_RESHAPE = 8,
    TP_OP_SOFTMAX = 9,
    TP_OP_KIND_COUNT = 10
} tp_op_kind;

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

static inline void tp_decode_tensor(const uint8_t *tens, uint32_t i, tp_tensor *t)
{
    const uint8_t *p = tens + (uint32_t)TP_TENSOR_SIZE * i;
    uint32_t d;
    t->dtype = p[0];
    t->rank = p[1];
    t->flags = p[2];
    for (d = 0; d < 4; d++) {
        t->dims[d] = tp_rd_u16(p + 4 + 2 * d);
    }
    t->scale = tp_rd_f32(p + 12);
    t->zero_point = tp_rd_i32(p + 16);
    t->offset = tp_rd_u32(p + 20);
    t->size = tp_rd_u32(p + 24);
    t->scales_offset = tp_rd_u32(p + 28);
    t->params_offset = tp_rd_u32(p + 32);
    t->n_scales = tp_rd_u16(p + 36);
}

static inline void tp_decode_op(const uint8_t *ops, uint32_t i, tp_op *op)
{
    const uint8_t *p = ops + (uint32_t)TP_OP_SIZE * i;
    uint32_t j;
    op->index = (uint16_t)i;
    op->kind = p[0];
    op->activation = p[1];
    op->mode = p[2];
    op->depth_multiplier = p[3];
    for (j = 0; j < 3; j++) {
        op->inputs[j] = tp_rd_u16(p + 4 + 2 * j);
    }
    op->output = tp_rd_u16(p + 10);
    op->in_zp = tp_rd_i32(p + 12);
    op->in2_zp = tp_rd_i32(p + 16);
    op->out_zp = tp_rd_i32(p + 20);
    op->act_min = tp_rd_i16(p + 24);
    op->act_max = tp_rd_i16(p + 26);
    for (j = 0; j < 2; j++) {
        op->stride[j] = p[28 + j];
        op->pad[j] = p[30 + j];
        op->k[j] = p[32 + j];
        op->pad_after[j] = p[34 + j];
    }
    op->mult_offset = tp_rd_u32(p + 36);
    op->n_mult = tp_rd_u16(p + 40);
    op->left_shift = tp_rd_i16(p + 42);
    op->diff_min = tp_rd_i32(p + 44);
    op->float_scale = tp_rd_f32(p + 48);
    op->held_map = tp_rd_u32(p + 52);
    op->held_params = tp_rd_u32(p + 56);
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

/* ---- session memory: the only ways core code reaches the arena and the parameters ---- */

/* size bytes of the arena at offset, recorded in the call's high-water mark (s->arena_high).
 * Offsets were checked against the arena by tp_session_init. */
uint8_t *tp_arena_at(tp_session *s, uint32_t offset, uint32_t size);

/* The bytes of a constant tensor as the forward pass sees it (biases): its RAM copy in the
 * params region when it is trainable and the session trains, else its DATA in the blob. */
const uint8_t *tp_const_data(const tp_session *s, const tp_tensor *t);

/* Run op i of the blob; train != 0 places activations at the training plan's offsets
 * (tp_train_act_offset) instead of the inference plan's. Returns the op's int8 output. */
const int8_t *tp_run_op(tp_session *s, uint32_t i, int train);

/* Bytes a tp_session occupies: lets FFI bindings (host/tinyprop/native.py) allocate one without
 * mirroring its fields. */
uint32_t tp_session_size(void);

/* ---- the training module's side (tp_train.c), which alone reads the TRAN section ---- */

/* Check the TRAN section against the blob, the arena and the params region; tp_session_init
 * calls it for a session given a params region (the loader has bounds-checked the section). */
tp_status tp_train_check(const tp_session *s);

/* Fill the params region from the blob's constants (session init and reset). */
tp_status tp_copy_params(tp_session *s);

/* Output channel o's weights as the forward pass sees them: its held row in the params region
 * when the op holds it and the session trains, else the blob's constant. *step is the distance
 * between consecutive elements: 1, except for a depthwise channel read from the blob, whose
 * taps are C apart in the (1, KH, KW, C) tensor. step may be NULL for CONV_2D and
 * FULLY_CONNECTED, whose rows are always contiguous. */
const int8_t *tp_weight_row(const tp_session *s, const tp_op *op, const tp_tensor *w, uint32_t o,
                            uint32_t *step);

/* Training-plan arena offset of a tensor's activation (TP_NONE32 if it has none). */
uint32_t tp_train_act_offset(const tp_session *s, uint32_t tensor);

#endif
