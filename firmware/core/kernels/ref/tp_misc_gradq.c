/* tp_misc_gradq.c - reference input gradients of average and max pooling, MEAN, PAD and ADD with
 * integer gradient maps (reference/backward.py _backward_op_int). Each dX value is computed
 * exactly where it is needed, twice per row: once for the row's largest magnitude, once to
 * write it (the map writer, tp_gradmap.h; the caller ends it); a pixel whose values are those
 * of the pixel before (pooled by the same window alone; MEAN) is skipped, then copied. PAD and ADD
 * rows that dY's values fit as they are (no accumulating, no sums) are copied. */
#include "tinyprop.h"
#include <string.h>

#include "tp_ref.h"

typedef struct {
    const tp_gmap *dy;
    const tp_shape *in_shape, *out_shape;
    const tp_pool_params *pool;
    const tp_pad_params *pad;
    const int8_t *x; /* a max pool's input */
} misc_ctx;

/* Where a row's values go: mode MAX takes their largest magnitude, PUT writes them (a plain
 * map: no accumulating, no sums, the row's largest magnitude below 2^31); SLOW does either
 * through tp_gm_value and tp_gm_put (accumulating, a sink's sums, rows beyond 2^31). */
enum { MAX, PUT, SLOW_MAX, SLOW_PUT };

typedef struct {
    tp_gm_writer *w;
    uint64_t top;
    uint32_t mode;
} emitter;

static void emit_slow(emitter *e, uint32_t i, int64_t v)
{
    if (e->mode == SLOW_MAX) {
        int64_t x = tp_gm_value(e->w, i, v);
        uint64_t a = x < 0 ? 0u - (uint64_t)x : (uint64_t)x;
        e->top = a > e->top ? a : e->top;
    } else {
        tp_gm_put(e->w, i, tp_gm_value(e->w, i, v));
    }
}

/* A pixel's ch values the same as the one before's (index i - ch): nothing more for the
 * largest magnitude, a copy of its stored values for a plain map; 0 (emit them) otherwise. */
static uint32_t repeat_pixel(const emitter *e, uint32_t i, uint32_t ch)
{
    if (e->mode == MAX) {
        return 1u;
    }
    if (e->mode == PUT) {
        uint32_t b = e->w->map.bytes;
        uint8_t *q = (uint8_t *)e->w->map.q + (size_t)i * b;
        memcpy(q, q - (size_t)ch * b, (size_t)ch * b);
        return 1u;
    }
    return 0u;
}

static inline void emit(emitter *e, uint32_t i, int64_t v)
{
    if (e->mode == MAX) {
        uint64_t a = v < 0 ? 0u - (uint64_t)v : (uint64_t)v;
        e->top = a > e->top ? a : e->top;
    } else if (e->mode == PUT) {
        tp_gm_put_i32(e->w, i, (int32_t)v);
    } else {
        emit_slow(e, i, v);
    }
}

/* Hands row r's values (element indices r * row_elems + j) to e. */
typedef void (*row_fn)(const misc_ctx *c, uint32_t r, emitter *e);

/* Write row r of dx, its values made twice by row(). */
static void write_row(tp_gm_writer *dx, const misc_ctx *c, row_fn row, uint32_t r)
{
    emitter e;
    uint32_t plain = dx->sums == 0 && !dx->accumulate;
    e.w = dx;
    e.top = 0;
    e.mode = plain ? MAX : SLOW_MAX;
    row(c, r, &e);
    tp_gm_row_begin(dx, r, e.top);
    e.mode = plain && e.top < ((uint64_t)1 << 31) ? PUT : SLOW_PUT;
    row(c, r, &e);
}

static void write_rows(tp_gm_writer *dx, const misc_ctx *c, row_fn row)
{
    uint32_t r;
    for (r = 0; r < dx->rows; r++) {
        write_row(dx, c, row, r);
    }
}

/* a / n rounded half to even (tp_gm_rdiv) in 32 bits, 0 < n < 2^30: C's quotient truncates
 * toward zero; a negative remainder makes it the floor. */
static inline int32_t rdiv32(int32_t a, int32_t n)
{
    int32_t q = a / n, r = a - q * n;
    if (r < 0) {
        q--;
        r += n;
    }
    r *= 2;
    return q + ((r > n || (r == n && (q & 1))) ? 1 : 0);
}

/* dY / n in units of 2^-TP_GM_POOL_FRAC: q an int16 or int8, q 2^16 fits int32 */
static inline int32_t share(int32_t q, int32_t n)
{
    return rdiv32(q * ((int32_t)1 << TP_GM_POOL_FRAC), n);
}

/* The windows (o in [*lo, *hi]) of a pooling with stride st, window k and padding pad that
 * contain input i; each window's extent clipped to [0, n) is its share's divisor. */
static void windows_of(int32_t i, int32_t k, int32_t st, int32_t pad, int32_t n_out, int32_t *lo,
                       int32_t *hi)
{
    int32_t first = i + pad - k + 1;
    *lo = first <= 0 ? 0 : (first + st - 1) / st;
    *hi = (i + pad) / st;
    *hi = *hi < n_out - 1 ? *hi : n_out - 1;
}

static int32_t clipped(int32_t o, int32_t st, int32_t pad, int32_t k, int32_t n)
{
    int32_t a = o * st - pad, b = a + k;
    return (b > n ? n : b) - (a < 0 ? 0 : a);
}

/* Row y of dX: per pixel, its windows; a pixel in one window (strides at least the window)
 * takes one share a channel, others the sum of their windows' shares. */
static void pool_row(const misc_ctx *c, uint32_t y, emitter *e)
{
    const tp_pool_params *p = c->pool;
    int32_t ch = c->in_shape->c, w = c->in_shape->w, h = c->in_shape->h, ow = c->out_shape->w;
    int32_t y0, y1, x, cc, last = -1; /* the window of the pixel before, if only one */
    uint32_t i = y * (uint32_t)w * (uint32_t)ch;
    windows_of((int32_t)y, p->k[0], p->stride[0], p->pad[0], c->out_shape->h, &y0, &y1);
    for (x = 0; x < w; x++) {
        int32_t x0, x1, oy, ox;
        windows_of(x, p->k[1], p->stride[1], p->pad[1], ow, &x0, &x1);
        if (y0 == y1 && x0 == x1) {
            int32_t n = clipped(y0, p->stride[0], p->pad[0], p->k[0], h) *
                        clipped(x0, p->stride[1], p->pad[1], p->k[1], w);
            uint32_t at = (uint32_t)((y0 * ow + x0) * ch);
            if (x0 == last && repeat_pixel(e, i, (uint32_t)ch)) { /* the same window alone */
                i += (uint32_t)ch;
                continue;
            }
            last = x0;
            for (cc = 0; cc < ch; cc++, i++) {
                emit(e, i, share(tp_gm_get(c->dy, at + (uint32_t)cc), n));
            }
            continue;
        }
        last = -1;
        for (cc = 0; cc < ch; cc++, i++) {
            int64_t v = 0;
            for (oy = y0; oy <= y1; oy++) {
                int32_t ny = clipped(oy, p->stride[0], p->pad[0], p->k[0], h);
                for (ox = x0; ox <= x1; ox++) {
                    int32_t n = ny * clipped(ox, p->stride[1], p->pad[1], p->k[1], w);
                    v += share(tp_gm_get(c->dy, (uint32_t)((oy * ow + ox) * ch + cc)), n);
                }
            }
            emit(e, i, v);
        }
    }
}

void tp_avg_pool2d_input_grad_q(const tp_pool_params *p, const tp_shape *in_shape,
                                const tp_shape *out_shape, const tp_gmap *dy, tp_gm_writer *dx)
{
    misc_ctx c = {dy, in_shape, out_shape, p, 0, 0};
    write_rows(dx, &c, pool_row);
}

/* Row y of dX: per input value, the sum of dY over the windows whose largest value it is
 * (tp_pool_argmax). */
static void max_pool_row(const misc_ctx *c, uint32_t y, emitter *e)
{
    const tp_pool_params *p = c->pool;
    int32_t ch = c->in_shape->c, w = c->in_shape->w, ow = c->out_shape->w;
    int32_t y0, y1, x, cc;
    uint32_t i = y * (uint32_t)w * (uint32_t)ch;
    windows_of((int32_t)y, p->k[0], p->stride[0], p->pad[0], c->out_shape->h, &y0, &y1);
    for (x = 0; x < w; x++) {
        int32_t x0, x1, oy, ox;
        windows_of(x, p->k[1], p->stride[1], p->pad[1], ow, &x0, &x1);
        for (cc = 0; cc < ch; cc++, i++) {
            int64_t v = 0;
            for (oy = y0; oy <= y1; oy++) {
                for (ox = x0; ox <= x1; ox++) {
                    if (tp_pool_argmax(p, c->in_shape, c->x, oy, ox, cc) == (int32_t)i) {
                        v += tp_gm_get(c->dy, (uint32_t)((oy * ow + ox) * ch + cc));
                    }
                }
            }
            emit(e, i, v);
        }
    }
}

void tp_max_pool2d_input_grad_q(const tp_pool_params *p, const tp_shape *in_shape, const int8_t *x,
                                const tp_shape *out_shape, const tp_gmap *dy, tp_gm_writer *dx)
{
    misc_ctx c = {dy, in_shape, out_shape, p, 0, x};
    write_rows(dx, &c, max_pool_row);
}

static void mean_row(const misc_ctx *c, uint32_t y, emitter *e)
{
    uint32_t ch = (uint32_t)c->in_shape->c, w = (uint32_t)c->in_shape->w, x, cc, i = y * w * ch;
    int32_t n = c->in_shape->h * c->in_shape->w;
    for (x = 0; x < w; x++) {
        if (x > 0u && repeat_pixel(e, i, ch)) { /* every pixel's values are the same */
            i += ch;
            continue;
        }
        for (cc = 0; cc < ch; cc++, i++) {
            emit(e, i, share(tp_gm_get(c->dy, cc), n));
        }
    }
}

void tp_mean_hw_input_grad_q(const tp_shape *in_shape, const tp_gmap *dy, tp_gm_writer *dx)
{
    misc_ctx c = {dy, in_shape, 0, 0, 0, 0};
    write_rows(dx, &c, mean_row);
}

/* Row r of dX as dY's row_elems values from index `from`: copied when they fit the map as they
 * are (largest magnitude below 2^bits, a plain map: the row's shift 0); returns 0 otherwise. */
static uint32_t copy_row(tp_gm_writer *dx, uint32_t r, const tp_gmap *dy, uint32_t from)
{
    uint32_t j, n = dx->row_elems, top = 0;
    uint8_t *to = (uint8_t *)dx->map.q + (size_t)r * n * dx->map.bytes;
    const uint8_t *src;
    if (dx->sums != 0 || dx->accumulate || dy->bytes != dx->map.bytes) {
        return 0u;
    }
    if (dy->bytes == 2u) {
        const int16_t *q = (const int16_t *)dy->q + from;
        for (j = 0; j < n; j++) {
            top |= (uint32_t)(q[j] < 0 ? -q[j] : q[j]);
        }
    } else {
        const int8_t *q = (const int8_t *)dy->q + from;
        for (j = 0; j < n; j++) {
            top |= (uint32_t)(q[j] < 0 ? -q[j] : q[j]);
        }
    }
    if (top >> dx->bits) {
        return 0u;
    }
    tp_gm_row_begin(dx, r, top); /* shift 0: the OR's bit length is the maximum's */
    src = (const uint8_t *)dy->q + (size_t)from * dy->bytes;
    memcpy(to, src, (size_t)n * dy->bytes);
    return 1u;
}

static void pad_row(const misc_ctx *c, uint32_t y, emitter *e)
{
    uint32_t ch = (uint32_t)c->in_shape->c, w = (uint32_t)c->in_shape->w, j, i = y * w * ch;
    uint32_t from = ((y + c->pad->before[0]) * (uint32_t)c->out_shape->w + c->pad->before[1]) * ch;
    for (j = 0; j < w * ch; j++) {
        emit(e, i + j, tp_gm_get(c->dy, from + j));
    }
}

void tp_pad_input_grad_q(const tp_pad_params *p, const tp_shape *in_shape,
                         const tp_shape *out_shape, const tp_gmap *dy, tp_gm_writer *dx)
{
    misc_ctx c = {dy, in_shape, out_shape, 0, p, 0};
    uint32_t y, ch = (uint32_t)in_shape->c;
    for (y = 0; y < dx->rows; y++) {
        uint32_t from = ((y + p->before[0]) * (uint32_t)out_shape->w + p->before[1]) * ch;
        if (!copy_row(dx, y, dy, from)) {
            write_row(dx, &c, pad_row, y);
        }
    }
}

static void add_row(const misc_ctx *c, uint32_t r, emitter *e)
{
    uint32_t n = e->w->row_elems, j, i = r * n;
    for (j = 0; j < n; j++) {
        emit(e, i + j, tp_gm_get(c->dy, i + j));
    }
}

void tp_add_input_grad_q(const tp_gmap *dy, tp_gm_writer *dx)
{
    misc_ctx c = {dy, 0, 0, 0, 0, 0};
    uint32_t r;
    for (r = 0; r < dx->rows; r++) {
        if (!copy_row(dx, r, dy, r * dx->row_elems)) {
            write_row(dx, &c, add_row, r);
        }
    }
}
