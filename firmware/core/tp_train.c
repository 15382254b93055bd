/* tp_train.c - the training interpreter: one sparse-update step, in place (docs/training.md).
 *
 * Mirrors host/tinyprop/reference/backward.py op for op: the forward pass under the training
 * plan (with 1-bit masks of the RELUs of trained ops), the loss, then each op of the backward
 * pass in reverse order down to the earliest one updated: its input gradients, then its
 * update, right there (no gradient outlives its layer; with integer maps on DSP targets its
 * biases as the fold's scan sums them, before the input gradients, which read no bias). Every
 * buffer is at the offset the host planned (TRAN section); nothing else is used. Gradient maps are
 * float32, or integer maps (tp_gradmap.h) when the blob says so: the same schedule, other kernels.
 */
#include "tinyprop.h"
#include <string.h>

#include "tp_forward.h"
#include "tp_le.h"
#include "tp_loss.h"
#include "tp_optim.h"

/* Tell a profiling hook, if any, that a part of the step begins (TP_PROFILE builds; in
 * others, nothing). */
static void part(const tp_session *s, uint32_t which, uint32_t op)
{
#ifdef TP_PROFILE
    if (s->profile != NULL) {
        s->profile(s->profile_ctx, which, op);
    }
#else
    (void)s;
    (void)which;
    (void)op;
#endif
}

static float *grad_of(tp_session *s, uint32_t tensor, uint32_t elems)
{
    return (float *)(void *)tp_arena_at(s, tp_tran_grad_offset(&s->b, tensor), 4u * elems);
}

/* One op of the backward pass, decoded once. */
typedef struct {
    tp_session *s;
    const tp_gradient_kernels *k;
    tp_train_op t;
    tp_op op;
    tp_tensor tin, tout;
    tp_shape in_shape, out_shape;
    tp_conv_params conv; /* CONV_2D, DEPTHWISE_CONV_2D */
    tp_weights w;        /* weighted ops */
    uint32_t format;     /* TP_GRAD_* */
    float *dy;           /* float32 maps */
    tp_gmap dyq;         /* integer maps */
    const uint8_t *sums; /* a sink's: its output's gradient as channel sums (REDUCED) */
    uint8_t *scratch;    /* the op's backward scratch (NULL: none) */
    const uint8_t *mask; /* the RELU mask the fold's scan applies (begin_weighted_q), or NULL */
    const tp_update *u;  /* the op's update (update_of), for the biases its fold's scan sums */
    uint32_t *biased;    /* set when the fold's scan updated the biases (begin_weighted_q) */
    uint32_t *dead;      /* the fold's dead channels (tp_gm_fold.dead, begin_weighted_q's copy;
                          * all clear before: a clear bit says nothing) */
} backward_ctx;

/* Begin writing input pos's integer map from exact values at exponent e_v, the row shifts at the
 * scratch's start; returns the scratch after them (a weighted op's kernel scratch). */
static uint8_t *begin_input(const backward_ctx *c, tp_gm_writer *w, uint32_t pos, int32_t e_v)
{
    tp_tensor t;
    uint32_t rows, row_elems, zero = pos == 0u ? TP_TRAN_ZERO_IN0 : TP_TRAN_ZERO_IN1;
    uint8_t *buf;
    tp_decode_tensor(c->s->b.tensors, c->op.inputs[pos], &t);
    tp_map_rows(&t, &rows, &row_elems);
    if (c->t.flags2 & (pos == 0u ? TP_TRAN_REDUCE_IN0 : TP_TRAN_REDUCE_IN1)) {
        /* the input is a sink's output: its rows go into the sink's channel sums, masked by
         * the sink's mask (the loader checked the sink's record) */
        tp_train_op sink;
        uint32_t channels = t.dims[t.rank - 1u];
        const uint8_t *mask = NULL;
        tp_decode_train_op(tp_tran_record_of(&c->s->b, tp_producer_of(&c->s->b, c->op.inputs[pos])),
                           &sink);
        if (sink.flags & TP_TRAN_MASK) {
            mask = tp_arena_at(c->s, sink.mask_offset, (tp_tensor_elems(&t) + 7u) / 8u);
        }
        buf = tp_arena_at(c->s, tp_tran_grad_offset(&c->s->b, c->op.inputs[pos]),
                          TP_GM_HEADER + 8u * channels);
        tp_gm_begin_sums(w, buf, rows, row_elems, channels, mask, e_v);
    } else {
        buf = tp_arena_at(c->s, tp_tran_grad_offset(&c->s->b, c->op.inputs[pos]),
                          (uint32_t)tp_gm_buffer_bytes(c->format, tp_tensor_elems(&t)));
        tp_gm_begin(w, buf, c->format, rows, row_elems, (c->t.flags & zero) == 0u, c->scratch, e_v);
    }
    return c->scratch + ((rows + 3u) & ~3u);
}

/* The op's input 0 as the training forward left it: the plan keeps it until this backward
 * when a gradient reads it (a weight gradient's, a max pool's input gradient). */
static const int8_t *saved_input(const backward_ctx *c)
{
    return (const int8_t *)tp_arena_at(c->s, tp_tran_act_offset(&c->s->b, c->op.inputs[0]),
                                       c->tin.size);
}

/* ---- each op kind's gradients (tp_ops.h's row names them; the table follows) ---- */

/* Bias o updated by u from its exact sum of the integer map dY; a zero sum without a velocity
 * not at all (its gradient 0, or NaN past float32's range: the update 0). */
TP_ALWAYS_INLINE void update_bias_of_sum(const backward_ctx *c, const tp_update *u, uint32_t o,
                                         int64_t sum)
{
    if (sum == 0 && u->velocity == NULL) {
        return;
    }
    tp_optim_update_bias(u, c->t.bias_params, o, tp_gm_to_f32(sum, c->dyq.e, 1.0f),
                         tp_weights_scale(&c->w, o));
}

/* The biases of channels o .. o + n - 1 updated from their dY sums, made by the fold's scan
 * (tp_gm_fold_sums_of). */
static void biases_of_sums(const void *ctx, uint32_t o, const int32_t *sums, uint32_t n)
{
    const backward_ctx *c = (const backward_ctx *)ctx;
    uint32_t j;
    for (j = 0; j < n; j++) {
        update_bias_of_sum(c, c->u, o + j, sums[j]);
    }
}

/* A weighted kind's integer input gradient begins: dY' folded for W^T dY' sums of at most
 * `terms` products (backward.fold_terms), then input pos's map at the fold's exponent; returns
 * the kernel's scratch. */
static uint8_t *begin_weighted_q(const backward_ctx *c, uint32_t pos, tp_gm_writer *w,
                                 uint32_t terms, tp_gm_fold *f)
{
    uint32_t positions = tp_tensor_elems(&c->tout) / c->w.n_out;
    if (c->u != NULL && (c->t.flags & TP_TRAN_BIAS) && !*c->biased) {
        *c->biased = (uint32_t)tp_gm_fold_sums_of(f, &c->dyq, positions, &c->w, terms, c->mask,
                                                  biases_of_sums, c);
    } else {
        tp_gm_fold_of(f, &c->dyq, positions, &c->w, terms, c->mask);
    }
    memcpy(c->dead, f->dead, sizeof f->dead);
    return begin_input(c, w, pos, f->e);
}

static uint32_t taps(const backward_ctx *c)
{
    return (uint32_t)c->conv.k[0] * c->conv.k[1];
}

static void grad_conv2d_input(const backward_ctx *c, float *dx)
{
    c->k->conv2d_input(&c->conv, &c->in_shape, &c->out_shape, &c->w, c->dy, dx);
}

static void grad_conv2d_input_q(const backward_ctx *c, uint32_t pos, tp_gm_writer *w)
{
    tp_gm_fold f;
    uint8_t *ks = begin_weighted_q(c, pos, w, taps(c) * c->w.n_out, &f);
    c->k->conv2d_input_q(&c->conv, &c->in_shape, &c->out_shape, &c->w, &f, &c->dyq, w, ks);
}

static void grad_conv2d_weight(const backward_ctx *c, const int8_t *x, uint32_t o, float *row)
{
    c->k->conv2d_weight(&c->conv, &c->in_shape, x, c->tin.zero_point, c->tin.scale, &c->out_shape,
                        c->dy, o, row);
}

static void grad_conv2d_weight_q(const backward_ctx *c, const int8_t *x, const uint32_t *x_live,
                                 uint32_t o, float *row)
{
    c->k->conv2d_weight_q(&c->conv, &c->in_shape, x, c->tin.zero_point, c->tin.scale, &c->out_shape,
                          &c->dyq, o, row, x_live);
}

static void grad_depthwise_conv2d_input(const backward_ctx *c, float *dx)
{
    c->k->depthwise_conv2d_input(&c->conv, &c->in_shape, &c->out_shape, &c->w, c->dy, dx);
}

static void grad_depthwise_conv2d_input_q(const backward_ctx *c, uint32_t pos, tp_gm_writer *w)
{
    tp_gm_fold f;
    uint8_t *ks = begin_weighted_q(c, pos, w, taps(c) * (uint32_t)c->conv.depth_multiplier, &f);
    c->k->depthwise_conv2d_input_q(&c->conv, &c->in_shape, &c->out_shape, &c->w, &f, &c->dyq, w,
                                   ks);
}

static void grad_depthwise_conv2d_weight(const backward_ctx *c, const int8_t *x, uint32_t o,
                                         float *row)
{
    c->k->depthwise_conv2d_weight(&c->conv, &c->in_shape, x, c->tin.zero_point, c->tin.scale,
                                  &c->out_shape, c->dy, o, row);
}

static void grad_depthwise_conv2d_weight_q(const backward_ctx *c, const int8_t *x,
                                           const uint32_t *x_live, uint32_t o, float *row)
{
    (void)x_live;
    c->k->depthwise_conv2d_weight_q(&c->conv, &c->in_shape, x, c->tin.zero_point, c->tin.scale,
                                    &c->out_shape, &c->dyq, o, row);
}

static void grad_fully_connected_input(const backward_ctx *c, float *dx)
{
    c->k->fully_connected_input(&c->w, c->dy, dx);
}

static void grad_fully_connected_input_q(const backward_ctx *c, uint32_t pos, tp_gm_writer *w)
{
    tp_gm_fold f;
    uint8_t *ks = begin_weighted_q(c, pos, w, c->w.n_out, &f);
    c->k->fully_connected_input_q(&c->w, &f, &c->dyq, w, ks);
}

static void grad_fully_connected_weight(const backward_ctx *c, const int8_t *x, uint32_t o,
                                        float *row)
{
    c->k->fully_connected_weight(c->w.row_len, x, c->tin.zero_point, c->tin.scale, c->dy, o, row);
}

static void grad_fully_connected_weight_q(const backward_ctx *c, const int8_t *x,
                                          const uint32_t *x_live, uint32_t o, float *row)
{
    (void)x_live;
    c->k->fully_connected_weight_q(c->w.row_len, x, c->tin.zero_point, c->tin.scale, &c->dyq, o,
                                   row);
}

/* Either input: the loader checked both have the output's size. */
static void grad_add_input(const backward_ctx *c, float *dx)
{
    c->k->add_input(tp_tensor_elems(&c->tout), c->dy, dx);
}

static void grad_add_input_q(const backward_ctx *c, uint32_t pos, tp_gm_writer *w)
{
    (void)begin_input(c, w, pos, c->dyq.e);
    tp_add_input_grad_q(&c->dyq, w);
}

static void grad_avg_pool2d_input(const backward_ctx *c, float *dx)
{
    tp_pool_params p;
    tp_pool_params_of(&c->op, &p);
    c->k->avg_pool2d_input(&p, &c->in_shape, &c->out_shape, c->dy, dx);
}

static void grad_avg_pool2d_input_q(const backward_ctx *c, uint32_t pos, tp_gm_writer *w)
{
    tp_pool_params p;
    tp_pool_params_of(&c->op, &p);
    (void)begin_input(c, w, pos, c->dyq.e - TP_GM_POOL_FRAC);
    tp_avg_pool2d_input_grad_q(&p, &c->in_shape, &c->out_shape, &c->dyq, w);
}

static void grad_max_pool2d_input(const backward_ctx *c, float *dx)
{
    tp_pool_params p;
    tp_pool_params_of(&c->op, &p);
    c->k->max_pool2d_input(&p, &c->in_shape, saved_input(c), &c->out_shape, c->dy, dx);
}

static void grad_max_pool2d_input_q(const backward_ctx *c, uint32_t pos, tp_gm_writer *w)
{
    tp_pool_params p;
    tp_pool_params_of(&c->op, &p);
    (void)begin_input(c, w, pos, c->dyq.e);
    tp_max_pool2d_input_grad_q(&p, &c->in_shape, saved_input(c), &c->out_shape, &c->dyq, w);
}

static void grad_mean_hw_input(const backward_ctx *c, float *dx)
{
    c->k->mean_hw_input(&c->in_shape, c->dy, dx);
}

static void grad_mean_hw_input_q(const backward_ctx *c, uint32_t pos, tp_gm_writer *w)
{
    (void)begin_input(c, w, pos, c->dyq.e - TP_GM_POOL_FRAC);
    tp_mean_hw_input_grad_q(&c->in_shape, &c->dyq, w);
}

static void grad_pad_input(const backward_ctx *c, float *dx)
{
    tp_pad_params p;
    tp_pad_params_of(&c->op, &p);
    c->k->pad_input(&p, &c->in_shape, &c->out_shape, c->dy, dx);
}

static void grad_pad_input_q(const backward_ctx *c, uint32_t pos, tp_gm_writer *w)
{
    tp_pad_params p;
    tp_pad_params_of(&c->op, &p);
    (void)begin_input(c, w, pos, c->dyq.e);
    tp_pad_input_grad_q(&p, &c->in_shape, &c->out_shape, &c->dyq, w);
}

/* An op kind's gradients: of an input (float32 dX, or input pos's integer map begun and
 * written), and of a weight row o from the op's input x (float32 dY, or integer). A kind
 * whose row has no grad (weights) has none (0). */
typedef struct {
    void (*input)(const backward_ctx *c, float *dx);
    void (*input_q)(const backward_ctx *c, uint32_t pos, tp_gm_writer *w);
    void (*weight)(const backward_ctx *c, const int8_t *x, uint32_t o, float *row);
    void (*weight_q)(const backward_ctx *c, const int8_t *x, const uint32_t *x_live, uint32_t o,
                     float *row);
} op_grads;

#define IF_0(entry) 0
#define IF_1(entry) entry
#define OP_GRADS(KIND, code, name, weights, inputs, grad, q_row, q_chan)                \
    [TP_OP_##KIND] = {IF_##grad(grad_##name##_input), IF_##grad(grad_##name##_input_q), \
                      IF_##weights(grad_##name##_weight), IF_##weights(grad_##name##_weight_q)},
static const op_grads grads[TP_OP_KIND_COUNT] = {TP_OPS(OP_GRADS)};
#undef OP_GRADS
#undef IF_0
#undef IF_1

/* The integer maps of the inputs the record asks for (ADD: both), each begun and written by
 * the kind's gradient, then ended. */
static void input_grads_q(const backward_ctx *c)
{
    void (*grad)(const backward_ctx *, uint32_t, tp_gm_writer *) = grads[c->op.kind].input_q;
    tp_gm_writer w;
    uint32_t pos;
    if (grad == NULL) { /* RESHAPE shares its gradient buffer with its input */
        return;
    }
    for (pos = 0; pos < 2u; pos++) {
        if (c->t.flags & (pos == 0u ? TP_TRAN_GRAD_IN0 : TP_TRAN_GRAD_IN1)) {
            grad(c, pos, &w);
            tp_gm_end(&w);
        }
    }
}

/* dX of the inputs the record asks for (ADD: both), zeroed first by their first writer, then
 * accumulated from dY by the kind's gradient (none: RESHAPE shares its input's buffer). */
static void input_grads(const backward_ctx *c)
{
    void (*grad)(const backward_ctx *, float *) = grads[c->op.kind].input;
    uint32_t pos, i;
    for (pos = 0; pos < 2u; pos++) {
        tp_tensor t;
        uint32_t n;
        float *dx;
        if (!(c->t.flags & (pos == 0u ? TP_TRAN_GRAD_IN0 : TP_TRAN_GRAD_IN1))) {
            continue;
        }
        tp_decode_tensor(c->s->b.tensors, c->op.inputs[pos], &t);
        n = tp_tensor_elems(&t);
        dx = grad_of(c->s, c->op.inputs[pos], n);
        if (c->t.flags & (pos == 0u ? TP_TRAN_ZERO_IN0 : TP_TRAN_ZERO_IN1)) {
            for (i = 0; i < n; i++) {
                dx[i] = 0.0f;
            }
        }
        if (grad != NULL) {
            grad(c, dx);
        }
    }
}

/* Bias sums of integer maps a block of channels at a time (the DSP kernel reads four channels a
 * word). */
#define TP_BIAS_BLOCK 16u

/* The op's biases updated from the exact sums of dY: a sink's (those its writer made), or the
 * map's. Out of line: the sums' block stays off the backward pass's deepest frames. */
static TP_NOINLINE void update_biases(const backward_ctx *c, const tp_update *u, uint32_t positions)
{
    uint32_t n_out = c->w.n_out, o, j, nc;
    int64_t sums[TP_BIAS_BLOCK];
    for (o = 0; o < n_out; o += nc) {
        nc = n_out - o < TP_BIAS_BLOCK ? n_out - o : TP_BIAS_BLOCK;
        part(c->s, TP_PART_GRAD, c->op.index);
        if (c->sums != NULL) {
            memcpy(sums, c->sums + TP_GM_HEADER + 8u * o, 8u * nc);
        } else {
            c->k->bias_sums_q(&c->dyq, positions, n_out, o, nc, sums);
        }
        part(c->s, TP_PART_UPDATE, c->op.index);
        for (j = 0; j < nc; j++) {
            update_bias_of_sum(c, u, o + j, sums[j]);
        }
    }
}

/* Input channels whose bits a weight gradient may take (past them: no bitmap). */
#define TP_LIVE_INPUTS 1024u

/* For a CONV_2D weight gradient (tp_kernels.h): bit i of live set for each input channel i of x
 * (the op's saved input) off zp at some position; NULL past TP_LIVE_INPUTS channels. Four
 * channels a word when the channels are a multiple of four, two positions a turn. */
static const uint32_t *channels_off_zp(uint32_t *live, const int8_t *x, const tp_shape *in,
                                       int32_t zp)
{
    uint32_t ic = (uint32_t)in->c, n = (uint32_t)in->h * (uint32_t)in->w, at, i;
    uint8_t bytes[4];
    uint32_t zp4 = ((uint32_t)zp & 0xFFu) * 0x01010101u;
    if (ic > TP_LIVE_INPUTS) {
        return NULL;
    }
    memset(live, 0, (ic + 31u) / 32u * 4u);
    for (i = 0; ic % 4u == 0u && i < ic; i += 4u) {
        const int8_t *q = x + i;
        uint32_t o = 0u, v, w;
        for (at = 0; at + 2u <= n; at += 2u, q += 2u * ic) { /* both loaded first */
            memcpy(&v, q, 4u);
            memcpy(&w, q + ic, 4u);
            o |= (v ^ zp4) | (w ^ zp4);
        }
        if (at < n) {
            memcpy(&v, q, 4u);
            o |= v ^ zp4;
        }
        memcpy(bytes, &o, 4u); /* memory order: channel i + b is byte b */
        live[i >> 5] |= ((bytes[0] != 0u ? 1u : 0u) | (bytes[1] != 0u ? 2u : 0u) |
                         (bytes[2] != 0u ? 4u : 0u) | (bytes[3] != 0u ? 8u : 0u))
                        << (i & 31u);
    }
    for (i = ic % 4u == 0u ? ic : 0u; i < ic; i++) {
        for (at = 0; at < n && x[at * ic + i] == (int8_t)zp; at++) {
        }
        live[i >> 5] |= (at < n ? 1u : 0u) << (i & 31u);
    }
    return live;
}

/* The op's update (u): its learning rate, key and velocities. *v_end: velocities not yet handed
 * out, counted from the region's end (ops run descending, velocities are laid out ascending). */
static void update_of(const backward_ctx *c, uint32_t key, uint32_t *v_end, tp_update *u)
{
    tp_session *s = c->s;
    u->params = s->params;
    u->velocity = NULL;
    u->lr = s->hp.lr;
    u->momentum = s->hp.momentum;
    u->scale_floor = c->t.scale_floor;
    u->s_x = c->tin.scale;
    u->key = key;
    u->qas = (s->hp.flags & TP_HP_NO_QAS) == 0u;
    if (s->b.req.optimizer != 0u) { /* counts checked by the loader */
        *v_end -= ((c->t.flags & TP_TRAN_BIAS) ? c->w.n_out : 0u) +
                  ((c->t.flags & TP_TRAN_WEIGHT) ? c->t.n_sel * c->w.row_len : 0u);
        u->velocity = s->params + tp_param_bytes(&s->b) + 4u * *v_end;
    }
}

/* The op's bias (unless its fold's scan updated it: *c->biased) and held weight rows, updated
 * from dY by u (update_of). */
static void update(const backward_ctx *c, const tp_update *u)
{
    tp_session *s = c->s;
    const op_grads *g = &grads[c->op.kind]; /* a weighted kind: the loader checked */
    uint32_t n_out = c->w.n_out, row_len = c->w.row_len, o;
    uint32_t positions = tp_tensor_elems(&c->tout) / n_out;
    if ((c->t.flags & TP_TRAN_BIAS) && !*c->biased) {
        if (c->format == TP_GRAD_FLOAT32 && c->sums == NULL) {
            for (o = 0; o < n_out; o++) {
                float db;
                part(s, TP_PART_GRAD, c->op.index);
                db = c->k->bias(c->dy, positions, n_out, o);
                part(s, TP_PART_UPDATE, c->op.index);
                tp_optim_update_bias(u, c->t.bias_params, o, db, tp_weights_scale(&c->w, o));
            }
        } else {
            update_biases(c, u, positions);
        }
    }
    if (c->t.flags & TP_TRAN_WEIGHT) {
        float *row = (float *)(void *)tp_arena_at(s, c->t.scratch_offset, 4u * row_len);
        uint32_t v0 = (c->t.flags & TP_TRAN_BIAS) ? n_out : 0u; /* first weight velocity */
        const int8_t *x = saved_input(c);
        uint32_t live[TP_LIVE_INPUTS / 32u];
        const uint32_t *x_live = NULL, *zeros;
        float k = c->tin.scale * tp_gm_pow2(c->dyq.e);
        /* a dead channel's row (its dY zero everywhere after the mask) has the gradient +-0
         * when x_scale 2^e is finite (every kernel's 0 times it), which changes no weight
         * without a velocity (tp_optim_update_row): neither is made */
        int zero_rows_stay = c->format != TP_GRAD_FLOAT32 && u->velocity == NULL &&
                             k >= -3.4028235e38f && k <= 3.4028235e38f;
        if (c->format != TP_GRAD_FLOAT32 && c->op.kind == TP_OP_CONV_2D &&
            c->k->conv2d_weight_q != tp_conv2d_weight_grad_q) { /* the reference sums every input */
            part(s, TP_PART_GRAD, c->op.index);
            x_live = channels_off_zp(live, x, &c->in_shape, c->tin.zero_point);
        }
        /* a 1x1 conv's input at zp everywhere has the weight gradient +-0 (every kernel's exact
         * 0 times a finite x_scale 2^e) */
        zeros = zero_rows_stay && x_live != NULL && row_len == (uint32_t)c->in_shape.c ? x_live
                                                                                       : NULL;
        for (o = 0; o < n_out; o++) { /* held rows, in channel order */
            uint32_t r = tp_held_row(&s->b, &c->op, o);
            if (r == TP_NONE16 ||
                (o < TP_GM_DEAD_C && (c->dead[o >> 5] >> (o & 31u) & 1u) != 0u && zero_rows_stay)) {
                continue;
            }
            part(s, TP_PART_GRAD, c->op.index);
            if (c->format == TP_GRAD_FLOAT32) {
                g->weight(c, x, o, row);
            } else {
                g->weight_q(c, x, x_live, o, row);
            }
            part(s, TP_PART_UPDATE, c->op.index);
            tp_optim_update_row(u, c->op.held_params + r * row_len, v0 + r * row_len, row, row_len,
                                tp_weights_scale(&c->w, o), zeros);
        }
    }
}

/* dY's values whose mask bit is 0 set to 0, a mask byte (8 values) at a time: 0xFF bytes (all
 * kept) are skipped; int8 maps mask their two words (tp_gm_mask8). */
static void apply_mask(const backward_ctx *c, const uint8_t *mask, uint32_t n)
{
    uint32_t b, j, nb = n / 8u;
    if (c->format != TP_GRAD_FLOAT32 && c->dyq.bytes == 1u) {
        uint8_t *q = (uint8_t *)c->dyq.q;
        for (b = 0; b < nb; b++, q += 8) {
            uint32_t m = mask[b], w0, w1;
            if (m == 0xFFu) {
                continue;
            }
            memcpy(&w0, q, 4u);
            memcpy(&w1, q + 4, 4u);
            tp_gm_mask8(&w0, &w1, m);
            memcpy(q, &w0, 4u);
            memcpy(q + 4, &w1, 4u);
        }
        if (8u * nb == n) {
            return;
        }
        b = nb; /* the last byte's values */
    } else {
        b = 0;
    }
    for (; b < (n + 7u) / 8u; b++) { /* other formats, int8's last 1-7 values: bit by bit */
        uint32_t m = mask[b], cnt = n - 8u * b < 8u ? n - 8u * b : 8u;
        if (m == 0xFFu) {
            continue;
        }
        for (j = 0; j < cnt; j++) {
            if (!(m & (1u << j))) {
                if (c->format == TP_GRAD_FLOAT32) {
                    c->dy[8u * b + j] = 0.0f;
                } else {
                    tp_gm_set(&c->dyq, 8u * b + j, 0);
                }
            }
        }
    }
}

static void backward_op(tp_session *s, const uint8_t *rec, uint32_t key, uint32_t *v_end)
{
    backward_ctx c;
    tp_update u;
    uint32_t n, biased = 0u, dead[TP_GM_DEAD_C / 32u];
    memset(&c, 0, sizeof c);
    memset(dead, 0, sizeof dead);
    c.biased = &biased;
    c.dead = dead;
    part(s, TP_PART_BACKWARD, tp_rd_u16(rec + TP_TRAN_OP_OP));
    c.s = s;
    c.k = (s->flags & TP_SESSION_REFERENCE_KERNELS) ? &tp_ref_gradient : &tp_target_gradient;
    tp_decode_train_op(rec, &c.t);
    tp_decode_op(s->b.ops, c.t.op, &c.op);
    tp_decode_tensor(s->b.tensors, c.op.inputs[0], &c.tin);
    tp_decode_tensor(s->b.tensors, c.op.output, &c.tout);
    tp_shape_of(&c.tin, &c.in_shape);
    tp_shape_of(&c.tout, &c.out_shape);
    tp_conv_params_of(&c.op, &c.conv);
    n = tp_tensor_elems(&c.tout);
    c.format = tp_tran_grad_format(&s->b);
    if (c.t.flags2 & TP_TRAN_REDUCED) { /* a sink: only its bias trains, from the sums */
        tp_tensor tw;
        c.sums = tp_arena_at(s, tp_tran_grad_offset(&s->b, c.op.output),
                             TP_GM_HEADER + 8u * c.tout.dims[c.tout.rank - 1u]);
        memcpy(&c.dyq.e, c.sums, 4u);
        tp_decode_tensor(s->b.tensors, c.op.inputs[1], &tw);
        tp_weights_of(s, &c.op, &tw, &c.w);
        update_of(&c, key, v_end, &u);
        update(&c, &u);
        return;
    }
    if (c.format == TP_GRAD_FLOAT32) {
        c.dy = grad_of(s, c.op.output, n);
    } else {
        c.dyq = tp_gm_at(tp_arena_at(s, tp_tran_grad_offset(&s->b, c.op.output),
                                     (uint32_t)tp_gm_buffer_bytes(c.format, n)),
                         c.format);
    }
    if (c.t.scratch_offset != TP_NONE32) {
        c.scratch = tp_arena_at(s, c.t.scratch_offset,
                                tp_backward_scratch_bytes(&s->b, &c.op, c.t.flags));
    }
    if (tp_op_defs[c.op.kind].weighted) {
        tp_tensor tw;
        tp_decode_tensor(s->b.tensors, c.op.inputs[1], &tw);
        tp_weights_of(s, &c.op, &tw, &c.w);
        c.w.pairs = tp_pairs_of(&s->b, c.t.op, &c.w.live, &c.w.n_live);
    }
    if (c.t.flags & TP_TRAN_MASK) { /* what the RELU clamped passes no gradient */
        const uint8_t *mask = tp_arena_at(s, c.t.mask_offset, (n + 7u) / 8u);
        if (c.format != TP_GRAD_FLOAT32 && c.dyq.bytes == 1u && tp_op_defs[c.op.kind].weighted &&
            (c.t.flags & TP_TRAN_GRAD_IN0) && c.w.n_out % 8u == 0u) {
            c.mask = mask; /* the fold's scan reads every value first: it applies the mask */
        } else {
            apply_mask(&c, mask, n);
        }
    }
    if (c.t.flags & (TP_TRAN_BIAS | TP_TRAN_WEIGHT)) {
        update_of(&c, key, v_end, &u);
        c.u = &u; /* the fold's scan may update the biases (begin_weighted_q) */
    }
    if (c.format == TP_GRAD_FLOAT32) {
        input_grads(&c);
    } else {
        input_grads_q(&c);
    }
    if (c.t.flags & (TP_TRAN_BIAS | TP_TRAN_WEIGHT)) {
        update(&c, &u);
    }
}

/* 1-bit mask of the outputs a RELU/RELU6 passed through (1) or clamped (0): kept when
 * act_min < y (and, RELU6, y < act_max), i.e. y - (act_min + 1) in [0, span) unsigned. */
static void save_mask(tp_session *s, const uint8_t *rec, const int8_t *y)
{
    tp_train_op t;
    tp_op op;
    tp_tensor to;
    uint32_t n;
    int32_t lo, hi;
    uint8_t *mask;
    tp_decode_train_op(rec, &t);
    tp_decode_op(s->b.ops, t.op, &op);
    tp_decode_tensor(s->b.tensors, op.output, &to);
    n = to.size;
    mask = tp_arena_at(s, t.mask_offset, (n + 7u) / 8u);
    lo = (int32_t)op.act_min + 1;
    lo = lo < -128 ? -128 : lo;
    hi = op.activation == 2u ? (int32_t)op.act_max : 128; /* int8 y: always below 128 */
    tp_gm_relu_mask(y, mask, n, lo, hi > 128 ? 128 : hi);
}

/* The step's loss (TRAN's) of the logits; their gradient goes to the logits' gradient buffer.
 * mse's target is the input, still whole in the training arena (the planner keeps it). */
static float step_loss(tp_session *s, const int8_t *logits, const tp_tensor *tz, uint32_t n,
                       int32_t label)
{
    uint32_t format = tp_tran_grad_format(&s->b);
    const int8_t *target = NULL;
    tp_tensor tx;
    float loss;
    uint8_t shift;
    tp_gm_writer w;
    if (tp_tran_loss(&s->b) == TP_LOSS_MSE) {
        tp_decode_tensor(s->b.tensors, s->b.input, &tx);
        target = (const int8_t *)tp_arena_at(s, tp_tran_act_offset(&s->b, s->b.input), n);
    }
    if (format == TP_GRAD_FLOAT32) {
        float *grad = grad_of(s, s->b.logits, n);
        return target != NULL
                   ? tp_mse_f32(logits, tz->zero_point, tz->scale, target, tx.zero_point, tx.scale,
                                n, grad)
                   : tp_softmax_xent_f32(logits, tz->zero_point, tz->scale, n, label, grad);
    }
    tp_gm_begin(&w,
                tp_arena_at(s, tp_tran_grad_offset(&s->b, s->b.logits),
                            (uint32_t)tp_gm_buffer_bytes(format, n)),
                format, 1u, n, 0u, &shift, -TP_GM_LOSS_FRAC);
    loss = target != NULL
               ? tp_mse_q(logits, tz->zero_point, tz->scale, target, tx.zero_point, tx.scale, n, &w)
               : tp_softmax_xent_q(logits, tz->zero_point, tz->scale, n, label, &w);
    if (loss - loss == 0.0f) {
        tp_gm_end(&w);
    }
    return loss;
}

/* Where a step under way stands (tp_step_run.phase). */
enum { RUN_NONE = 0, RUN_STAGE, RUN_FORWARD, RUN_LOSS, RUN_BACKWARD };

tp_status tp_train_begin(tp_session *s, int32_t label)
{
    if (s == NULL) {
        return TP_ERR_ARG;
    }
    s->run.phase = RUN_NONE;
    if (s->b.ops == NULL) {
        return TP_ERR_NOT_LOADED;
    }
    if (s->b.train == NULL || s->params == NULL) {
        return TP_ERR_NO_TRAIN;
    }
    if (s->arena_len < s->b.req.arena_train) {
        return TP_ERR_ARENA_TOO_SMALL;
    }
    if (label < 0 || (uint32_t)label >= s->b.req.n_classes) {
        return TP_ERR_BAD_LABEL;
    }
    s->arena_high = 0;
    s->run.label = label;
    s->run.phase = RUN_STAGE;
    return TP_OK;
}

/* The step's end: its result in *r, the step counted. */
static tp_status end_step(tp_session *s, tp_status st, tp_result *r)
{
    part(s, TP_PART_END, tp_tran_last(&s->b));
    s->step++;
    s->run.phase = RUN_NONE;
    if (r != NULL) {
        memset(r, 0, sizeof *r);
        r->loss = s->run.loss;
        r->prediction = s->run.prediction;
        r->label = s->run.label;
        r->skipped = st == TP_ERR_NONFINITE ? 1u : 0u;
        r->arena_peak = s->arena_high;
    }
    return st;
}

/* One unit of the step's work (tp_train_continue), after any that take none. */
static tp_status step_unit(tp_session *s)
{
    tp_step_run *run = &s->run;
    uint32_t last = tp_tran_last(&s->b), n_cls = s->b.req.n_classes;
    if (run->phase == RUN_STAGE) {
        tp_status st = tp_run_stage(s, TP_PLAN_TRAIN, &run->k); /* frozen: nothing to keep */
        run->j = 0u;
        run->phase = RUN_FORWARD;
        return st;
    }
    if (run->phase == RUN_FORWARD) {
        /* the TRAN records ascend by op inside [first, last] (the loader checks): walked beside
         * the ops, op k's record is the next one or none */
        const uint8_t *rec = NULL;
        const int8_t *y;
        if (run->j < tp_tran_ops(&s->b) && tp_tran_record_op(&s->b, run->j) == run->k) {
            rec = tp_tran_record(&s->b, run->j++);
        }
        part(s, TP_PART_FORWARD, run->k);
        y = tp_run_op(s, run->k, TP_PLAN_TRAIN);
        if (rec != NULL && (rec[TP_TRAN_OP_FLAGS] & TP_TRAN_MASK)) {
            save_mask(s, rec, y);
        }
        if (run->k == last) {
            run->logits = y;
            run->phase = RUN_LOSS;
        }
        run->k++;
        return TP_OK;
    }
    if (run->phase == RUN_LOSS) {
        tp_tensor tz;
        tp_decode_tensor(s->b.tensors, s->b.logits, &tz);
        run->prediction = tp_argmax_s8(run->logits, n_cls);
        /* loss and logits gradient in the logits' gradient buffer */
        part(s, TP_PART_LOSS, last);
        run->loss = step_loss(s, run->logits, &tz, n_cls, run->label);
        if (!(run->loss - run->loss == 0.0f)) { /* NaN or +-inf: the reference's !isfinite */
            return TP_ERR_NONFINITE;
        }
        run->key = tp_optim_step_key(s->hp.seed, s->step);
        run->v_end = s->b.req.optimizer / 4u;
        run->j = tp_tran_ops(&s->b);
        run->phase = RUN_BACKWARD;
        return TP_OK;
    }
    /* ops last down to first: the records, descending */
    backward_op(s, tp_tran_record(&s->b, --run->j), run->key, &run->v_end);
    return TP_OK;
}

tp_status tp_train_continue(tp_session *s, uint32_t units, tp_result *r)
{
    if (s == NULL) {
        return TP_ERR_ARG;
    }
    if (s->run.phase == RUN_NONE) {
        return TP_ERR_NO_STEP;
    }
    for (;;) {
        tp_status st;
        if (s->run.phase == RUN_BACKWARD && s->run.j == 0u) {
            return end_step(s, TP_OK, r);
        }
        if (units == 0u) {
            return TP_STEP_PENDING;
        }
        units--;
        st = step_unit(s);
        if (st == TP_ERR_NONFINITE) {
            return end_step(s, st, r);
        }
        if (st != TP_OK) { /* the tiled first ops' row source failed: nothing was trained */
            s->run.phase = RUN_NONE;
            return st;
        }
    }
}

tp_status tp_train_step(tp_session *s, int32_t label, tp_result *r)
{
    tp_status st = tp_train_begin(s, label);
    return st == TP_OK ? tp_train_continue(s, 0xFFFFFFFFu, r) : st;
}
