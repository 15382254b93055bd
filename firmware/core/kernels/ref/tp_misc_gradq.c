/* tp_misc_gradq.c - reference input gradients of average pooling, MEAN, PAD and ADD with
 * integer gradient maps (reference/backward.py _backward_op_int). Each dX value is computed
 * exactly where it is needed, twice per row: once for the row's largest magnitude, once to
 * write it (the map writer, tp_gradmap.h; the caller ends it). */
#include "tp_ref.h"

typedef struct {
    const tp_gmap *dy;
    const tp_shape *in_shape, *out_shape;
    const tp_pool_params *pool;
    const tp_pad_params *pad;
} misc_ctx;

typedef int64_t (*value_fn)(const misc_ctx *c, uint32_t i);

/* Write every row of dx from value(i), i the element's index in dX. */
static void write_rows(tp_gm_writer *dx, const misc_ctx *c, value_fn value)
{
    uint32_t r, j;
    for (r = 0; r < dx->rows; r++) {
        uint32_t base = r * dx->row_elems;
        uint64_t top = 0;
        for (j = 0; j < dx->row_elems; j++) {
            int64_t v = tp_gm_value(dx, base + j, value(c, base + j));
            uint64_t a = v < 0 ? 0u - (uint64_t)v : (uint64_t)v;
            top = a > top ? a : top;
        }
        tp_gm_row_begin(dx, r, top);
        for (j = 0; j < dx->row_elems; j++) {
            tp_gm_put(dx, base + j, tp_gm_value(dx, base + j, value(c, base + j)));
        }
    }
}

/* dY / n in units of 2^-TP_GM_POOL_FRAC */
static int64_t share(int32_t q, int64_t n)
{
    return tp_gm_rdiv((int64_t)q * ((int64_t)1 << TP_GM_POOL_FRAC), n);
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

static int64_t pool_value(const misc_ctx *c, uint32_t i)
{
    const tp_pool_params *p = c->pool;
    int32_t ch = c->in_shape->c, w = c->in_shape->w, h = c->in_shape->h;
    int32_t cc = (int32_t)(i % (uint32_t)ch), x = (int32_t)(i / (uint32_t)ch) % w;
    int32_t y = (int32_t)(i / (uint32_t)ch) / w, y0, y1, x0, x1, oy, ox;
    int64_t v = 0;
    windows_of(y, p->k[0], p->stride[0], p->pad[0], c->out_shape->h, &y0, &y1);
    windows_of(x, p->k[1], p->stride[1], p->pad[1], c->out_shape->w, &x0, &x1);
    for (oy = y0; oy <= y1; oy++) {
        int32_t ny = clipped(oy, p->stride[0], p->pad[0], p->k[0], h);
        for (ox = x0; ox <= x1; ox++) {
            int32_t n = ny * clipped(ox, p->stride[1], p->pad[1], p->k[1], w);
            v += share(tp_gm_get(c->dy, (uint32_t)((oy * c->out_shape->w + ox) * ch + cc)), n);
        }
    }
    return v;
}

void tp_avg_pool2d_input_grad_q(const tp_pool_params *p, const tp_shape *in_shape,
                                const tp_shape *out_shape, const tp_gmap *dy, tp_gm_writer *dx)
{
    misc_ctx c = {dy, in_shape, out_shape, p, 0};
    write_rows(dx, &c, pool_value);
}

static int64_t mean_value(const misc_ctx *c, uint32_t i)
{
    return share(tp_gm_get(c->dy, i % (uint32_t)c->in_shape->c),
                 (int64_t)c->in_shape->h * c->in_shape->w);
}

void tp_mean_hw_input_grad_q(const tp_shape *in_shape, const tp_gmap *dy, tp_gm_writer *dx)
{
    misc_ctx c = {dy, in_shape, 0, 0, 0};
    write_rows(dx, &c, mean_value);
}

static int64_t pad_value(const misc_ctx *c, uint32_t i)
{
    uint32_t ch = (uint32_t)c->in_shape->c, w = (uint32_t)c->in_shape->w;
    uint32_t cc = i % ch, x = (i / ch) % w, y = (i / ch) / w;
    return tp_gm_get(c->dy, ((y + c->pad->before[0]) * (uint32_t)c->out_shape->w + x +
                             c->pad->before[1]) * ch + cc);
}

void tp_pad_input_grad_q(const tp_pad_params *p, const tp_shape *in_shape,
                         const tp_shape *out_shape, const tp_gmap *dy, tp_gm_writer *dx)
{
    misc_ctx c = {dy, in_shape, out_shape, 0, p};
    write_rows(dx, &c, pad_value);
}

static int64_t add_value(const misc_ctx *c, uint32_t i)
{
    return tp_gm_get(c->dy, i);
}

void tp_add_input_grad_q(const tp_gmap *dy, tp_gm_writer *dx)
{
    misc_ctx c = {dy, 0, 0, 0, 0};
    write_rows(dx, &c, add_value);
}
