/* tp_train.c - one sparse-update training step, in place (docs/training.md).
 *
 * Mirrors host/tinyprop/backward.py operation for operation: float32 gradients, sums in the
 * documented order, exp/log from tp_fmath.c, updates in the quantized domain with QAS and
 * stochastic rounding keyed by (seed, step, parameter offset). Every buffer is at the offset
 * the host planned (TRAN section); nothing else is used.
 */
#include <string.h>

#include "tp_train.h"

/* TRAN layout (host/tinyprop/train_plan.py) */
#define TRAN_HEADER 16u
#define TRAN_OP 24u
#define F_BIAS 1u
#define F_WEIGHT 2u
#define F_MASK 4u
#define F_GRAD_IN0 8u
#define F_GRAD_IN1 16u
#define F_ZERO_IN0 64u
#define F_ZERO_IN1 128u

/* Trained weight rows are not here: the op record's held_map says which rows RAM holds (the
 * forward pass needs them too), and F_WEIGHT updates exactly those. */
typedef struct {
    uint16_t op;
    uint8_t flags;
    uint32_t mask_offset, scratch_offset, n_sel;
    float scale_floor;
    uint32_t bias_params;
} tp_train_op;

static void decode_train_op(const uint8_t *p, tp_train_op *t)
{
    t->op = tp_rd_u16(p);
    t->flags = p[2];
    t->mask_offset = tp_rd_u32(p + 4);
    t->scratch_offset = tp_rd_u32(p + 8);
    t->n_sel = tp_rd_u32(p + 12);
    t->scale_floor = tp_rd_f32(p + 16);
    t->bias_params = tp_rd_u32(p + 20);
}

/* Held row of output channel o (TP_NONE16: not held); op->held_map was checked by the loader. */
static uint32_t held_row(const tp_session *s, const tp_op *op, uint32_t o)
{
    return op->held_map == TP_NONE32 ? TP_NONE16 : tp_rd_u16(s->data + op->held_map + 2u * o);
}

static uint32_t tran_n_tensors(const tp_session *s)
{
    return tp_rd_u32(s->train + 8);
}

uint32_t tp_train_act_offset(const tp_session *s, uint32_t tensor)
{
    return tp_rd_u32(s->train + TRAN_HEADER + 4u * tensor);
}

static uint32_t grad_offset(const tp_session *s, uint32_t tensor)
{
    return tp_rd_u32(s->train + TRAN_HEADER + 4u * (tran_n_tensors(s) + tensor));
}

static const uint8_t *train_op_record(const tp_session *s, uint32_t j)
{
    return s->train + TRAN_HEADER + 8u * tran_n_tensors(s) + TRAN_OP * j;
}

/* The TRAN record of op k, or NULL when op k takes no part in the backward pass. */
const uint8_t *tp_train_op_of(const tp_session *s, uint32_t k)
{
    uint32_t j, n;
    if (s->train == NULL) {
        return NULL;
    }
    n = tp_rd_u16(s->train + 4);
    for (j = 0; j < n; j++) {
        const uint8_t *p = train_op_record(s, j);
        if (tp_rd_u16(p) == k) {
            return p;
        }
    }
    return NULL;
}

/* ---- checks of the TRAN section (called by tp_session_init through tp_train_check) ---- */

static int in_range(uint32_t off, uint32_t size, uint32_t limit)
{
    return off <= limit && size <= limit - off;
}

/* Bytes of the params region before the optimizer state: the parameters. */
static uint32_t param_bytes(const tp_session *s)
{
    return s->req.params - s->req.optimizer;
}

tp_status tp_train_check(const tp_session *s)
{
    uint32_t n_t, n_ops, j, i;
    uint64_t velocities = 0; /* trained parameters: one float32 velocity each under momentum */
    tp_op last;
    if (s->train == NULL) {
        return TP_OK;
    }
    if (s->train_len < TRAN_HEADER) {
        return TP_ERR_BLOB_BOUNDS;
    }
    n_t = tran_n_tensors(s);
    n_ops = tp_rd_u16(s->train + 4);
    if (n_t != s->n_tensors || tp_rd_u16(s->train + 2) >= s->n_ops ||
        tp_rd_u16(s->train) > tp_rd_u16(s->train + 2)) {
        return TP_ERR_BLOB_INVALID;
    }
    if ((uint64_t)TRAN_HEADER + 8ull * n_t + (uint64_t)TRAN_OP * n_ops > s->train_len) {
        return TP_ERR_BLOB_BOUNDS;
    }
    /* the step takes the loss on the header's last op: it must make the logits, and the logits
     * need a gradient buffer (tp_train_step writes it before any train op is checked) */
    tp_decode_op(s->ops, tp_rd_u16(s->train + 2), &last);
    if (last.output != s->logits || grad_offset(s, s->logits) == TP_NONE32) {
        return TP_ERR_BLOB_INVALID;
    }
    /* the training forward (ops 0..last) finds its activations under the training plan (the
     * loader checked these operands: input 0, ADD's input 1, the output) */
    for (j = 0; j <= tp_rd_u16(s->train + 2); j++) {
        tp_op op;
        tp_decode_op(s->ops, j, &op);
        if (tp_train_act_offset(s, op.inputs[0]) == TP_NONE32 ||
            tp_train_act_offset(s, op.output) == TP_NONE32 ||
            (op.kind == TP_OP_ADD && tp_train_act_offset(s, op.inputs[1]) == TP_NONE32)) {
            return TP_ERR_BLOB_INVALID;
        }
    }
    for (i = 0; i < n_t; i++) {
        tp_tensor t;
        uint32_t a = tp_train_act_offset(s, i), g = grad_offset(s, i);
        tp_decode_tensor(s->tensors, i, &t);
        if (a != TP_NONE32 && !in_range(a, t.size, s->req.arena_train)) {
            return TP_ERR_BLOB_BOUNDS;
        }
        if (g != TP_NONE32 && (t.size > 0x3FFFFFFFu ||
                               !in_range(g, 4u * t.size, s->req.arena_train))) {
            return TP_ERR_BLOB_BOUNDS;
        }
        if (g != TP_NONE32 && (g & 3u) != 0u) {
            return TP_ERR_BLOB_INVALID; /* float gradients: an unaligned one faults on the M4 */
        }
    }
    for (j = 0; j < n_ops; j++) {
        tp_train_op t;
        tp_op op;
        tp_tensor tw, to;
        uint32_t n_out = 0, row = 0;
        decode_train_op(train_op_record(s, j), &t);
        if (t.op >= s->n_ops) {
            return TP_ERR_BLOB_INVALID;
        }
        tp_decode_op(s->ops, t.op, &op);
        tp_decode_tensor(s->tensors, op.output, &to);
        if (grad_offset(s, op.output) == TP_NONE32) {
            return TP_ERR_BLOB_INVALID;
        }
        if ((t.flags & F_GRAD_IN0) && grad_offset(s, op.inputs[0]) == TP_NONE32) {
            return TP_ERR_BLOB_INVALID;
        }
        if ((t.flags & F_GRAD_IN1) &&
            (op.kind != TP_OP_ADD || grad_offset(s, op.inputs[1]) == TP_NONE32)) {
            return TP_ERR_BLOB_INVALID;
        }
        if ((t.flags & F_MASK) && !in_range(t.mask_offset, (to.size + 7u) / 8u,
                                            s->req.arena_train)) {
            return TP_ERR_BLOB_BOUNDS;
        }
        if (t.flags & (F_BIAS | F_WEIGHT)) {
            if (op.kind > TP_OP_FULLY_CONNECTED) {
                return TP_ERR_BLOB_INVALID;
            }
            tp_decode_tensor(s->tensors, op.inputs[1], &tw);
            n_out = op.kind == TP_OP_DEPTHWISE_CONV_2D ? tw.dims[3] : tw.dims[0];
            if (n_out == 0u) {
                return TP_ERR_BLOB_INVALID;
            }
            row = tw.size / n_out;
        }
        if ((t.flags & F_BIAS) && (op.inputs[2] == TP_NONE16 ||
                                   !in_range(t.bias_params, 4u * n_out, param_bytes(s)))) {
            return TP_ERR_BLOB_BOUNDS;
        }
        velocities += (t.flags & F_BIAS) ? n_out : 0u;
        velocities += (t.flags & F_WEIGHT) ? (uint64_t)t.n_sel * row : 0u;
        if (t.flags & F_WEIGHT) {
            uint32_t held = 0;
            for (i = 0; i < n_out; i++) {
                held += held_row(s, &op, i) != TP_NONE16 ? 1u : 0u;
            }
            if (t.n_sel == 0u || t.n_sel != held) {
                return TP_ERR_BLOB_INVALID; /* the loader checked the rows fit the params */
            }
            if (!in_range(t.scratch_offset, 4u * row, s->req.arena_train)) {
                return TP_ERR_BLOB_BOUNDS;
            }
            if ((t.scratch_offset & 3u) != 0u) {
                return TP_ERR_BLOB_INVALID;
            }
        }
    }
    /* optimizer state, when there is any, is exactly one velocity per trained parameter */
    if (s->req.optimizer != 0u && 4u * velocities != s->req.optimizer) {
        return TP_ERR_BLOB_INVALID;
    }
    return TP_OK;
}

/* ---- small float helpers shared with backward.py's definitions ---- */

static float floor_f32(float x)
{
    float t = (float)(int32_t)x;
    return x < t ? t - 1.0f : t;
}

static uint32_t fmix32(uint32_t h)
{
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    return h;
}

static float uniform01(uint32_t key, uint32_t index)
{
    uint32_t h = fmix32(index * 0x9E3779B1u + key);
    return (float)(h >> 8) * (1.0f / 16777216.0f);
}

/* floor(delta) + (r < frac), after NaN -> 0 and a clamp to +-limit. */
static int32_t stochastic_round(float d, float r, float limit)
{
    float fl, frac;
    if (d != d) {
        d = 0.0f;
    }
    d = d < -limit ? -limit : d;
    d = d > limit ? limit : d;
    fl = floor_f32(d);
    frac = d - fl;
    return (int32_t)fl + (r < frac ? 1 : 0);
}

static float channel_scale(const tp_session *s, const tp_tensor *w, uint32_t o)
{
    return w->n_scales > 1u ? tp_rd_f32(s->data + w->scales_offset + 4u * o) : w->scale;
}

/* ---- the step ---- */

typedef struct {
    tp_session *s;
    tp_train_op t;
    tp_op op;
    tp_tensor tin, tw, tout;
    uint32_t n_out, row_len;
    float *dy;
    uint32_t key; /* stochastic rounding key of this step */
    uint8_t *velocity; /* this op's float32 velocities (biases, then held rows), or NULL */
} bctx;

static float *grad_of(tp_session *s, uint32_t tensor, uint32_t elems)
{
    return (float *)(void *)tp_arena_at(s, grad_offset(s, tensor), 4u * elems);
}

/* Output channel o's weights as the forward pass sees them now (a held row or the blob's),
 * *step apart, and its real scale: looked up once per channel, not per multiply. */
static const int8_t *channel_weights(const bctx *c, uint32_t o, uint32_t *step, float *scale)
{
    *scale = channel_scale(c->s, &c->tw, o);
    return tp_weight_row(c->s, &c->op, &c->tw, o, step);
}

/* The outputs o in [*lo, *hi) of a window tap at offset t (stride st, padding pad) whose input
 * o * st + t - pad lies inside [0, n): the others read padding. */
static void tap_range(uint32_t t, uint32_t st, uint32_t pad, uint32_t n, uint32_t n_out,
                      uint32_t *lo, uint32_t *hi)
{
    uint32_t end = n + pad > t ? (n + pad - t + st - 1u) / st : 0u; /* first o past the input */
    *lo = t >= pad ? 0u : (pad - t + st - 1u) / st;
    *hi = end < n_out ? end : n_out;
    *lo = *lo < *hi ? *lo : *hi;
}

/* dX += W^T dY. Each dX element sums its products in backward.py's order: taps (kh, kw)
 * raster, then output channels ascending. A tap sends each input element at most one output
 * position, so the loops below (tap, channel, its weight, then the positions) keep that order
 * per element while a real weight w * s_w is made once instead of once per position. */
static TP_NOINLINE void input_grad_fc(const bctx *c, float *dx)
{
    uint32_t i, o, step;
    for (o = 0; o < c->n_out; o++) {
        float sw, g = c->dy[o];
        const int8_t *w = channel_weights(c, o, &step, &sw);
        for (i = 0; i < c->row_len; i++) {
            float wr = (float)w[i] * sw;
            dx[i] = dx[i] + g * wr;
        }
    }
}

static TP_NOINLINE void input_grad_conv(const bctx *c, float *dx)
{
    const tp_op *op = &c->op;
    uint32_t iw = c->tin.dims[2], ic = c->tin.dims[3];
    uint32_t ow = c->tout.dims[2], oc = c->tout.dims[3];
    uint32_t s0 = op->stride[0], s1 = op->stride[1];
    uint32_t mult = op->kind == TP_OP_DEPTHWISE_CONV_2D ? op->depth_multiplier : 1u;
    uint32_t kh, kw, oy, ox, ch, o, y0, y1, x0, x1, step;
    for (kh = 0; kh < op->k[0]; kh++) {
        tap_range(kh, s0, op->pad[0], c->tin.dims[1], c->tout.dims[1], &y0, &y1);
        for (kw = 0; kw < op->k[1]; kw++) {
            uint32_t tap = kh * op->k[1] + kw;
            /* dx index of output (oy, ox)'s input through this tap: base + oy*dy_ + ox*dx_ */
            int32_t base = ((int32_t)kh - op->pad[0]) * (int32_t)(iw * ic) +
                           ((int32_t)kw - op->pad[1]) * (int32_t)ic;
            uint32_t row_step = s0 * iw * ic, col_step = s1 * ic;
            tap_range(kw, s1, op->pad[1], iw, ow, &x0, &x1);
            for (o = 0; o < oc; o++) {
                float sw;
                const int8_t *w = channel_weights(c, o, &step, &sw);
                uint32_t n_ch = op->kind == TP_OP_CONV_2D ? ic : 1u;
                for (ch = 0; ch < n_ch; ch++) {
                    /* CONV_2D: input channel ch; depthwise: channel o's input o / mult */
                    uint32_t in_ch = op->kind == TP_OP_CONV_2D ? ch : o / mult;
                    float wr = (float)w[(op->kind == TP_OP_CONV_2D ? tap * ic + ch : tap) *
                                        step] * sw;
                    for (oy = y0; oy < y1; oy++) {
                        const float *g = c->dy + (oy * ow + x0) * oc + o;
                        float *d = dx + (int32_t)(oy * row_step + x0 * col_step + in_ch) + base;
                        for (ox = x0; ox < x1; ox++) {
                            *d = *d + *g * wr;
                            g += oc;
                            d += col_step;
                        }
                    }
                }
            }
        }
    }
}

/* acc plus dy * 0.0f for n positions oc apart: products with the padding, which backward.py
 * sums too (they matter only when a dy is not finite). */
static float pad_sum(float acc, const float *dy, uint32_t n, uint32_t oc)
{
    uint32_t i;
    for (i = 0; i < n; i++) {
        acc = acc + dy[i * oc] * 0.0f;
    }
    return acc;
}

/* dW row of output channel o into scratch (row_len floats): sum over output positions. */
static TP_NOINLINE void weight_grad_row(const bctx *c, const int8_t *xin, uint32_t o, float *row)
{
    const tp_op *op = &c->op;
    uint32_t k, oy, ox;
    uint32_t oh = c->tout.dims[1], ow = c->tout.dims[2], oc = c->n_out;
    uint32_t iw = c->tin.dims[2], ic = c->tin.dims[3];
    int32_t zp = c->tin.zero_point;
    float sx = c->tin.scale;
    if (op->kind == TP_OP_FULLY_CONNECTED) {
        for (k = 0; k < c->row_len; k++) {
            float xv = (float)((int32_t)xin[k] - zp) * sx;
            row[k] = 0.0f + c->dy[o] * xv;
        }
        return;
    }
    for (k = 0; k < c->row_len; k++) {
        uint32_t kh, kw, ch, y0, y1, x0, x1;
        float acc = 0.0f;
        if (op->kind == TP_OP_CONV_2D) {
            ch = k % ic;
            kw = (k / ic) % op->k[1];
            kh = k / ic / op->k[1];
        } else {
            ch = o / op->depth_multiplier;
            kw = k % op->k[1];
            kh = k / op->k[1];
        }
        tap_range(kh, op->stride[0], op->pad[0], c->tin.dims[1], oh, &y0, &y1);
        tap_range(kw, op->stride[1], op->pad[1], iw, ow, &x0, &x1);
        for (oy = 0; oy < oh; oy++) {
            const float *g = c->dy + oy * ow * oc + o;
            const int8_t *x;
            if (oy < y0 || oy >= y1) {
                acc = pad_sum(acc, g, ow, oc);
                continue;
            }
            acc = pad_sum(acc, g, x0, oc);
            x = xin + ((oy * op->stride[0] + kh - op->pad[0]) * iw +
                       x0 * op->stride[1] + kw - op->pad[1]) * ic + ch;
            for (ox = x0; ox < x1; ox++) {
                float xv = (float)((int32_t)*x - zp) * sx;
                acc = acc + g[ox * oc] * xv;
                x += op->stride[1] * ic;
            }
            acc = pad_sum(acc, g + x1 * oc, ow - x1, oc);
        }
        row[k] = acc;
    }
}

/* Classical momentum on velocity i and the real-valued gradient g: v = m * v + g (two
 * float32 roundings, no FMA), stored back; returns v, which the update then scales exactly
 * like a plain SGD gradient (QAS included). Without optimizer state (velocity NULL) the update
 * is plain SGD on g. memcpy: the caller's params region may have any alignment. */
static float momentum_step(const bctx *c, uint32_t i, float g)
{
    float v, mv;
    if (c->velocity == NULL) {
        return g;
    }
    memcpy(&v, c->velocity + 4u * i, 4u);
    mv = c->s->hp.momentum * v;
    v = mv + g;
    memcpy(c->velocity + 4u * i, &v, 4u);
    return v;
}

static void update_params(bctx *c, float lr, int qas)
{
    tp_session *s = c->s;
    uint32_t o, k, positions = tp_tensor_elems(&c->tout) / c->n_out;
    float floor_ = c->t.scale_floor;
    float s_x = c->tin.scale;
    if (c->t.flags & F_BIAS) {
        uint8_t *b = s->params + c->t.bias_params;
        for (o = 0; o < c->n_out; o++) {
            float db = 0.0f, step, delta, sw = channel_scale(s, &c->tw, o);
            float seff = sw > floor_ ? sw : floor_;
            uint32_t p;
            int64_t v;
            int32_t nv;
            for (p = 0; p < positions; p++) {
                db = db + c->dy[p * c->n_out + o];
            }
            step = lr * momentum_step(c, o, db);
            delta = qas ? -(step / (seff * s_x)) : -(step * (sw * s_x));
            v = (int64_t)tp_rd_i32(b + 4u * o) +
                stochastic_round(delta, uniform01(c->key, c->t.bias_params + 4u * o), 1e9f);
            nv = v > INT32_MAX ? INT32_MAX : (v < INT32_MIN ? INT32_MIN : (int32_t)v);
            b[4u * o] = (uint8_t)((uint32_t)nv & 0xFFu);
            b[4u * o + 1] = (uint8_t)(((uint32_t)nv >> 8) & 0xFFu);
            b[4u * o + 2] = (uint8_t)(((uint32_t)nv >> 16) & 0xFFu);
            b[4u * o + 3] = (uint8_t)(((uint32_t)nv >> 24) & 0xFFu);
        }
    }
    if (c->t.flags & F_WEIGHT) {
        float *row = (float *)(void *)tp_arena_at(s, c->t.scratch_offset, 4u * c->row_len);
        uint32_t v0 = (c->t.flags & F_BIAS) ? c->n_out : 0u; /* first weight velocity */
        const int8_t *xin = (const int8_t *)tp_arena_at(
            s, tp_train_act_offset(s, c->op.inputs[0]), c->tin.size);
        for (o = 0; o < c->n_out; o++) { /* held rows, in channel order */
            uint32_t r = held_row(s, &c->op, o);
            float sw = channel_scale(s, &c->tw, o);
            float seff = sw > floor_ ? sw : floor_;
            if (r == TP_NONE16) {
                continue;
            }
            weight_grad_row(c, xin, o, row);
            for (k = 0; k < c->row_len; k++) {
                uint32_t off = c->op.held_params + r * c->row_len + k;
                int8_t *w = (int8_t *)(s->params + off);
                float step = lr * momentum_step(c, v0 + r * c->row_len + k, row[k]);
                float delta = qas ? -(step / seff) : -(step * sw);
                int32_t nv = (int32_t)*w + stochastic_round(delta, uniform01(c->key, off), 256.0f);
                *w = (int8_t)(nv > 127 ? 127 : (nv < -127 ? -127 : nv));
            }
        }
    }
}

static void pool_grad(const bctx *c, float *dx)
{
    const tp_op *op = &c->op;
    uint32_t ih = c->tin.dims[1], iw = c->tin.dims[2], ch = c->tin.dims[3];
    uint32_t i, oy, ox, cc;
    if (op->kind == TP_OP_MEAN) {
        float n = (float)(ih * iw);
        for (i = 0; i < ih * iw; i++) {
            for (cc = 0; cc < ch; cc++) {
                dx[i * ch + cc] = dx[i * ch + cc] + c->dy[cc] / n;
            }
        }
        return;
    }
    for (oy = 0; oy < c->tout.dims[1]; oy++) {
        int32_t y0 = (int32_t)(oy * op->stride[0]) - op->pad[0];
        int32_t ys = y0 < 0 ? 0 : y0, ye = y0 + op->k[0] > (int32_t)ih ? (int32_t)ih : y0 + op->k[0];
        for (ox = 0; ox < c->tout.dims[2]; ox++) {
            int32_t x0 = (int32_t)(ox * op->stride[1]) - op->pad[1];
            int32_t xs = x0 < 0 ? 0 : x0;
            int32_t xe = x0 + op->k[1] > (int32_t)iw ? (int32_t)iw : x0 + op->k[1];
            float n = (float)((ye - ys) * (xe - xs));
            for (cc = 0; cc < ch; cc++) {
                float v = c->dy[(oy * c->tout.dims[2] + ox) * ch + cc] / n;
                int32_t y, x;
                for (y = ys; y < ye; y++) {
                    for (x = xs; x < xe; x++) {
                        float *d = dx + ((uint32_t)y * iw + (uint32_t)x) * ch + cc;
                        *d = *d + v;
                    }
                }
            }
        }
    }
}

/* *v_end: velocities not yet handed out, counted from the region's end (ops run descending,
 * velocities are laid out ascending). */
static void backward_op(tp_session *s, const uint8_t *rec, uint32_t key, uint32_t *v_end)
{
    bctx c;
    uint32_t i, n;
    memset(&c, 0, sizeof c);
    c.s = s;
    c.key = key;
    decode_train_op(rec, &c.t);
    tp_decode_op(s->ops, c.t.op, &c.op);
    tp_decode_tensor(s->tensors, c.op.inputs[0], &c.tin);
    tp_decode_tensor(s->tensors, c.op.output, &c.tout);
    n = tp_tensor_elems(&c.tout);
    c.dy = grad_of(s, c.op.output, n);
    if (c.t.flags & F_MASK) {
        const uint8_t *mask = tp_arena_at(s, c.t.mask_offset, (n + 7u) / 8u);
        for (i = 0; i < n; i++) {
            if (!(mask[i >> 3] & (1u << (i & 7u)))) {
                c.dy[i] = 0.0f;
            }
        }
    }
    if (c.op.kind <= TP_OP_FULLY_CONNECTED) {
        tp_decode_tensor(s->tensors, c.op.inputs[1], &c.tw);
        c.n_out = c.op.kind == TP_OP_DEPTHWISE_CONV_2D ? c.tw.dims[3] : c.tw.dims[0];
        c.row_len = tp_tensor_elems(&c.tw) / c.n_out;
    }
    if (c.t.flags & F_GRAD_IN0) {
        uint32_t nin = tp_tensor_elems(&c.tin);
        float *dx = grad_of(s, c.op.inputs[0], nin);
        if (c.t.flags & F_ZERO_IN0) {
            for (i = 0; i < nin; i++) {
                dx[i] = 0.0f;
            }
        }
        switch (c.op.kind) {
        case TP_OP_FULLY_CONNECTED:
            input_grad_fc(&c, dx);
            break;
        case TP_OP_CONV_2D:
        case TP_OP_DEPTHWISE_CONV_2D:
            input_grad_conv(&c, dx);
            break;
        case TP_OP_ADD:
            for (i = 0; i < nin; i++) {
                dx[i] = dx[i] + c.dy[i];
            }
            break;
        case TP_OP_AVERAGE_POOL_2D:
        case TP_OP_MEAN:
            pool_grad(&c, dx);
            break;
        case TP_OP_PAD: {
            uint32_t y, x, ch, ih = c.tin.dims[1], iw = c.tin.dims[2], cc = c.tin.dims[3];
            uint32_t ow = c.tout.dims[2];
            for (y = 0; y < ih; y++) {
                for (x = 0; x < iw; x++) {
                    for (ch = 0; ch < cc; ch++) {
                        float *d = dx + (y * iw + x) * cc + ch;
                        *d = *d + c.dy[((y + c.op.pad[0]) * ow + x + c.op.pad[1]) * cc + ch];
                    }
                }
            }
            break;
        }
        default: /* RESHAPE shares its gradient buffer with its input */
            break;
        }
    }
    if (c.t.flags & F_GRAD_IN1) {
        tp_tensor t2;
        float *dx;
        uint32_t n2;
        tp_decode_tensor(s->tensors, c.op.inputs[1], &t2);
        n2 = tp_tensor_elems(&t2);
        dx = grad_of(s, c.op.inputs[1], n2);
        for (i = 0; i < n2; i++) {
            dx[i] = ((c.t.flags & F_ZERO_IN1) ? 0.0f : dx[i]) + c.dy[i];
        }
    }
    if (c.t.flags & (F_BIAS | F_WEIGHT)) {
        if (s->req.optimizer != 0u) { /* counts checked by tp_train_check */
            *v_end -= ((c.t.flags & F_BIAS) ? c.n_out : 0u) +
                      ((c.t.flags & F_WEIGHT) ? c.t.n_sel * c.row_len : 0u);
            c.velocity = s->params + param_bytes(s) + 4u * *v_end;
        }
        update_params(&c, s->hp.lr, (s->hp.flags & TP_HP_NO_QAS) == 0u);
    }
}

/* 1-bit mask of the outputs a RELU/RELU6 passed through (1) or clamped (0). */
static void save_mask(tp_session *s, const uint8_t *rec, const int8_t *y)
{
    tp_train_op t;
    tp_op op;
    tp_tensor to;
    uint32_t i, n;
    uint8_t *mask;
    decode_train_op(rec, &t);
    tp_decode_op(s->ops, t.op, &op);
    tp_decode_tensor(s->tensors, op.output, &to);
    n = to.size;
    mask = tp_arena_at(s, t.mask_offset, (n + 7u) / 8u);
    memset(mask, 0, (n + 7u) / 8u);
    for (i = 0; i < n; i++) {
        int keep = y[i] > op.act_min && (op.activation != 2u || y[i] < op.act_max);
        if (keep) {
            mask[i >> 3] = (uint8_t)(mask[i >> 3] | (1u << (i & 7u)));
        }
    }
}

tp_status tp_train_step(tp_session *s, int32_t label, tp_result *r)
{
    uint32_t k, first, last, n_cls, j;
    const int8_t *logits = NULL;
    float *g, m, sum, loss;
    tp_tensor tz;
    int32_t pred = 0;
    if (s == NULL) {
        return TP_ERR_ARG;
    }
    if (s->ops == NULL) {
        return TP_ERR_NOT_LOADED;
    }
    if (s->train == NULL || s->params == NULL) {
        return TP_ERR_NO_TRAIN;
    }
    if (s->arena_len < s->req.arena_train) {
        return TP_ERR_ARENA_TOO_SMALL;
    }
    n_cls = s->req.n_classes;
    if (label < 0 || (uint32_t)label >= n_cls) {
        return TP_ERR_BAD_LABEL;
    }
    if (!(s->hp.lr >= 0.0f && s->hp.lr <= 1e30f) ||
        !(s->hp.momentum >= 0.0f && s->hp.momentum < 1.0f) ||
        (s->hp.momentum != 0.0f && s->req.optimizer == 0u)) {
        return TP_ERR_ARG; /* momentum needs the optimizer state (convert --momentum) */
    }
    first = tp_rd_u16(s->train);
    last = tp_rd_u16(s->train + 2);
    s->arena_high = 0;
    for (k = 0; k <= last; k++) {
        const uint8_t *rec = tp_train_op_of(s, k);
        const int8_t *y = tp_run_op(s, k, 1);
        if (rec != NULL && (rec[2] & F_MASK)) {
            save_mask(s, rec, y);
        }
        if (k == last) {
            logits = y;
        }
    }
    tp_decode_tensor(s->tensors, s->logits, &tz);
    for (j = 1; j < n_cls; j++) {
        pred = logits[j] > logits[pred] ? (int32_t)j : pred;
    }
    /* loss and logits gradient in the logits' gradient buffer */
    g = grad_of(s, s->logits, n_cls);
    for (j = 0; j < n_cls; j++) {
        g[j] = (float)((int32_t)logits[j] - tz.zero_point) * tz.scale;
    }
    m = g[0];
    for (j = 1; j < n_cls; j++) {
        m = g[j] > m ? g[j] : m;
    }
    loss = g[label] - m;
    sum = 0.0f;
    for (j = 0; j < n_cls; j++) {
        g[j] = tp_exp_neg(g[j] - m);
        sum = sum + g[j];
    }
    for (j = 0; j < n_cls; j++) {
        g[j] = g[j] / sum;
    }
    g[label] = g[label] - 1.0f;
    loss = tp_log_pos(sum) - loss;
    if (r != NULL) {
        memset(r, 0, sizeof *r);
        r->loss = loss;
        r->prediction = pred;
        r->label = label;
    }
    if (!(loss - loss == 0.0f)) { /* NaN or +-inf, exactly the reference's !isfinite */
        s->step++;
        if (r != NULL) {
            r->skipped = 1;
            r->arena_peak = s->arena_high;
        }
        return TP_ERR_NONFINITE;
    }
    {
        uint32_t key = fmix32(s->hp.seed + s->step * 0x85EBCA77u);
        uint32_t v_end = s->req.optimizer / 4u;
        for (k = last + 1; k-- > first;) {
            const uint8_t *rec = tp_train_op_of(s, k);
            if (rec != NULL) {
                backward_op(s, rec, key, &v_end);
            }
        }
    }
    s->step++;
    if (r != NULL) {
        r->arena_peak = s->arena_high;
    }
    return TP_OK;
}

tp_status tp_reset_params(tp_session *s)
{
    if (s == NULL) {
        return TP_ERR_ARG;
    }
    s->step = 0;
    return tp_copy_params(s);
}

void tp_set_hparams(tp_session *s, const tp_hparams *hp)
{
    if (s != NULL && hp != NULL) {
        s->hp = *hp;
    }
}

void tp_set_step(tp_session *s, uint32_t step)
{
    if (s != NULL) {
        s->step = step;
    }
}

/* Output channel o's weights in the blob: a row, or a depthwise channel's taps C apart. */
static const int8_t *blob_row(const tp_session *s, const tp_op *op, const tp_tensor *w,
                              uint32_t o, uint32_t *step)
{
    const int8_t *base = (const int8_t *)(s->data + w->offset);
    if (op->kind == TP_OP_DEPTHWISE_CONV_2D) {
        *step = w->dims[3];
        return base + o;
    }
    *step = 1u;
    return base + o * (w->size / w->dims[0]);
}

tp_status tp_copy_params(tp_session *s)
{
    uint32_t i, o, k;
    if (s->params == NULL) {
        return TP_OK;
    }
    memset(s->params + param_bytes(s), 0, s->req.optimizer); /* momentum starts at rest */
    for (i = 0; i < s->n_tensors; i++) { /* biases, held whole */
        tp_tensor t;
        tp_decode_tensor(s->tensors, i, &t);
        if ((t.flags & TP_T_TRAINABLE) != 0u) {
            memcpy(s->params + t.params_offset, s->data + t.offset, t.size);
        }
    }
    for (i = 0; i < s->n_ops; i++) { /* held weight rows */
        tp_op op;
        tp_tensor w;
        uint32_t n_out, row;
        tp_decode_op(s->ops, i, &op);
        if (op.held_map == TP_NONE32) {
            continue;
        }
        tp_decode_tensor(s->tensors, op.inputs[1], &w);
        n_out = op.kind == TP_OP_DEPTHWISE_CONV_2D ? w.dims[3] : w.dims[0];
        row = w.size / n_out;
        for (o = 0; o < n_out; o++) {
            uint32_t r = held_row(s, &op, o), step;
            const int8_t *src;
            if (r == TP_NONE16) {
                continue;
            }
            src = blob_row(s, &op, &w, o, &step);
            for (k = 0; k < row; k++) {
                s->params[op.held_params + r * row + k] = (uint8_t)src[k * step];
            }
        }
    }
    return TP_OK;
}

const int8_t *tp_weight_row(const tp_session *s, const tp_op *op, const tp_tensor *w, uint32_t o,
                            uint32_t *step)
{
    uint32_t r, unused;
    if (s->params != NULL && (r = held_row(s, op, o)) != TP_NONE16) { /* a training session */
        uint32_t n_out = op->kind == TP_OP_DEPTHWISE_CONV_2D ? w->dims[3] : w->dims[0];
        if (step != NULL) {
            *step = 1u;
        }
        return (const int8_t *)(s->params + op->held_params + r * (w->size / n_out));
    }
    return blob_row(s, op, w, o, step != NULL ? step : &unused);
}
