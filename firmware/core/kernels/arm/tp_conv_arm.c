/* tp_conv_arm.c - CONV_2D for Cortex-M with the DSP extension: a matrix product of int16
 * operands with SMLAD, bit for bit the reference kernel (kernels/ref/tp_conv.c).
 *
 * Every output pixel is a column of K = KH * KW * Cin inputs (the pixel itself for a 1x1
 * convolution, its window gathered for a larger one: im2col, padded taps holding the zero
 * point), every output channel a row of K weights. Loop order: a block of up to
 * TP_CONV_PIXEL_BLOCK output pixels has its columns converted once to int16 (x - zp) in pixel
 * pairs;
 * then, output channel pair by pair, the two weight rows are converted to int16 once and every
 * pixel pair of the block is a 2 x 2 block of outputs: per four K, four words of x and four of
 * weights feed eight SMLADs (16 multiply-accumulates), the K loop unrolled by two quads.
 *
 * Pairing: SMLAD multiplies the low and the high halfwords of its operands. A word of four
 * int8 is unpacked with SXTB16 into (v0, v2) and, shifted right by 8, (v1, v3); x and weights
 * are unpacked the same way, so lanes always meet their own partner. K is padded to a multiple
 * of 4: columns with the zero point, weights with zeros (they add 0).
 *
 * Exactness: |x - zp| <= 255 and |w| <= 128 fit int16 lanes; every product is exact and the
 * int32 accumulator holds the exact sum as long as the channel's bound |bias| + K * 128 * 255
 * (or the row's own sum of |w|) stays below 2^30, which tp_dsp_prepare checks before it lets
 * the channel use the fast requantization (tp_dsp.h); otherwise the op runs the reference.
 */
#include "tinyprop.h"
#include "tp_dsp.h"

/* Output pixels per block (even): the columns of a block are converted once for every channel
 * pair, each pair of weight rows once per block. */
#define TP_CONV_PIXEL_BLOCK 32u
/* Bytes of a channel's requantization parameters (tp_dsp_rq) in the scratch table. */
#define TP_CONV_RQ_BYTES 24u

static uint32_t align4(uint32_t n)
{
    return (n + 3u) & ~3u;
}

/* The scratch layout (all 4-aligned): the per-channel requantization table, the block's
 * columns as int16 quads, one channel pair's weight quads, and for a window larger than 1x1
 * the two int8 columns im2col gathers. */
typedef struct {
    uint32_t k, k4, pixels, rq, cols, weights, im2col, total;
} conv_layout;

static int is_pointwise(const tp_conv_params *p)
{
    return p->k[0] == 1u && p->k[1] == 1u && p->pad[0] == 0u && p->pad[1] == 0u;
}

static void conv_layout_of(const tp_conv_params *p, const tp_shape *in_shape,
                           const tp_shape *out_shape, conv_layout *l)
{
    uint32_t n_pix = (uint32_t)(out_shape->h * out_shape->w);
    l->k = (uint32_t)p->k[0] * p->k[1] * (uint32_t)in_shape->c;
    l->k4 = align4(l->k);
    l->pixels = n_pix < TP_CONV_PIXEL_BLOCK ? n_pix + (n_pix & 1u) : TP_CONV_PIXEL_BLOCK;
    l->rq = 0u;
    l->cols = l->rq + TP_CONV_RQ_BYTES * (uint32_t)out_shape->c;
    l->weights = l->cols + 2u * l->pixels * l->k4;
    l->im2col = l->weights + 4u * l->k4;
    l->total = l->im2col + (is_pointwise(p) ? 0u : 2u * l->k4);
}

uint32_t tp_arm_conv2d_s8_scratch_bytes(const tp_conv_params *p, const tp_shape *in_shape,
                                        const tp_shape *out_shape)
{
    conv_layout l;
    if (tp_arm_conv3x3_rgb_covers(p, in_shape)) {
        return tp_arm_conv3x3_rgb_scratch_bytes(p, in_shape, out_shape);
    }
    conv_layout_of(p, in_shape, out_shape, &l);
    return l.total;
}

#if TP_KERNELS_DSP

typedef char tp_conv_rq_bytes_check[sizeof(tp_dsp_rq) == TP_CONV_RQ_BYTES ? 1 : -1];

/* Two int8 vectors a and b of k values (two columns, or two weight rows) as ceil(k / 4) quads
 * (a0 a2, a1 a3, b0 b2, b1 b3) of int16 lanes: x - zp for columns (off holds -zp in both
 * halfwords, pad is zp: a last partial quad adds (zp - zp) w = 0), w for weights (off and pad
 * 0). */
static void to_quads(const int8_t *a, const int8_t *b, uint32_t k, uint32_t off, int32_t pad,
                     uint32_t *quad)
{
    uint32_t i, full = k & ~3u;
    for (i = 0; i < full; i += 4u) {
        uint32_t va = tp_dsp_rd32(a + i), vb = tp_dsp_rd32(b + i);
        quad[0] = tp_sxtab16(off, va);
        quad[1] = tp_sxtab16(off, va >> 8);
        quad[2] = tp_sxtab16(off, vb);
        quad[3] = tp_sxtab16(off, vb >> 8);
        quad += 4;
    }
    if (full < k) { /* the last 1..3 values, then the pad */
        uint32_t va = 0u, vb = 0u, j, zb = (uint32_t)pad & 0xFFu;
        for (j = 0; j < 4u; j++) {
            va |= (full + j < k ? (uint32_t)(uint8_t)a[full + j] : zb) << (8u * j);
            vb |= (full + j < k ? (uint32_t)(uint8_t)b[full + j] : zb) << (8u * j);
        }
        quad[0] = tp_sxtab16(off, va);
        quad[1] = tp_sxtab16(off, va >> 8);
        quad[2] = tp_sxtab16(off, vb);
        quad[3] = tp_sxtab16(off, vb >> 8);
    }
}

/* n bytes from src to dst, by words where it can. */
static inline void copy_bytes(int8_t *dst, const int8_t *src, int32_t n)
{
    int32_t i;
    for (i = 0; i + 4 <= n; i += 4) {
        __builtin_memcpy(dst + i, src + i, 4);
    }
    for (; i < n; i++) {
        dst[i] = src[i];
    }
}

/* n bytes of the zero point (z4: it in every byte), by words where it can (a byte loop would
 * become a call to the C library's memset). */
static inline void fill_zp(int8_t *dst, uint32_t z4, int32_t n)
{
    int32_t i;
    for (i = 0; i + 4 <= n; i += 4) {
        __builtin_memcpy(dst + i, &z4, 4);
    }
    for (; i < n; i++) {
        dst[i] = (int8_t)z4;
    }
}

/* Pixel (oy, ox)'s window as k4 int8 (k, then the zero point up to a multiple of 4), taps
 * outside the input holding the zero point (they add (zp - zp) * w = 0). */
static TP_DSP_NOINLINE void im2col(const tp_conv_params *p, const tp_shape *in_shape,
                                   const int8_t *in, int32_t oy, int32_t ox, uint32_t k4,
                                   int8_t *col)
{
    int32_t cin = in_shape->c, kh = p->k[0], kw = p->k[1], row = kw * cin;
    int32_t iy = oy * p->stride[0] - p->pad[0], ix = ox * p->stride[1] - p->pad[1];
    int32_t ky, ky0, ky1, kx0, kx1;
    uint32_t z4 = ((uint32_t)p->in_zp & 0xFFu) * 0x01010101u;
    const int8_t *src = in + (iy * in_shape->w + ix) * cin;
    tp_window(p, in_shape->h, in_shape->w, oy, ox, &ky0, &ky1, &kx0, &kx1);
    for (ky = 0; ky < kh; ky++, col += row, src += in_shape->w * cin) {
        if (ky < ky0 || ky >= ky1) {
            fill_zp(col, z4, row);
        } else if (kx0 == 0 && kx1 == kw) { /* the whole window row is inside */
            copy_bytes(col, src, row);
        } else {
            fill_zp(col, z4, kx0 * cin);
            copy_bytes(col + kx0 * cin, src + kx0 * cin, (kx1 - kx0) * cin);
            fill_zp(col + kx1 * cin, z4, row - kx1 * cin);
        }
    }
    fill_zp(col, z4, (int32_t)k4 - kh * row);
}

/* im2col of a window wholly inside the input: kh rows of `row` bytes, src_row bytes apart,
 * then `tail` zero-point bytes. */
static TP_DSP_NOINLINE void im2col_inside(const int8_t *src, int32_t src_row, int32_t row,
                                          int32_t kh, int32_t tail, uint32_t z4, int8_t *col)
{
    int32_t ky;
    for (ky = 0; ky < kh; ky++, col += row, src += src_row) {
        copy_bytes(col, src, row);
    }
    fill_zp(col, z4, tail);
}

/* Output pixel (oy, ox)'s column of k4 int8. */
static inline void column(const tp_conv_params *p, const tp_shape *in_shape, const int8_t *in,
                          int32_t oy, int32_t ox, uint32_t k, uint32_t k4, int8_t *col)
{
    int32_t iy = oy * p->stride[0] - p->pad[0], ix = ox * p->stride[1] - p->pad[1];
    int32_t cin = in_shape->c;
    if (iy >= 0 && ix >= 0 && iy + p->k[0] <= in_shape->h && ix + p->k[1] <= in_shape->w) {
        im2col_inside(in + (iy * in_shape->w + ix) * cin, in_shape->w * cin, p->k[1] * cin, p->k[0],
                      (int32_t)(k4 - k), ((uint32_t)p->in_zp & 0xFFu) * 0x01010101u, col);
    } else {
        im2col(p, in_shape, in, oy, ox, k4, col);
    }
}

/* A channel pair's part of a pixel block: its int16 weight quads (k4 words), the outputs'
 * spacing (da between pixel pairs, d1 to the second channel: 0 repeats channel c when cout is
 * odd) and both channels' requantization. */
typedef struct {
    const uint32_t *wq;
    uint32_t k4, da, d1;
    const tp_dsp_rq *rq0, *rq1;
    int32_t lo, hi;
} pair_job;

/* acc += one quad (four K) of a pixel pair's columns times the channel pair's weights: eight
 * SMLADs, 16 multiply-accumulates. */
TP_DSP_INLINE void quad_2x2(const uint32_t *x, const uint32_t *w, int32_t *a00, int32_t *a01,
                            int32_t *a10, int32_t *a11)
{
    uint32_t x0e = x[0], x0o = x[1], x1e = x[2], x1o = x[3];
    uint32_t w0e = w[0], w0o = w[1], w1e = w[2], w1o = w[3];
    *a00 = tp_smlad(x0o, w0o, tp_smlad(x0e, w0e, *a00));
    *a01 = tp_smlad(x0o, w1o, tp_smlad(x0e, w1e, *a01));
    *a10 = tp_smlad(x1o, w0o, tp_smlad(x1e, w0e, *a10));
    *a11 = tp_smlad(x1o, w1o, tp_smlad(x1e, w1e, *a11));
}

/* The job's outputs for `pairs` pixel pairs of the block: pixel pair j's columns at
 * cols + j k4 words, its outputs at o + j da (pixel a) and + db (pixel b: db = 0 repeats pixel
 * a when the block is odd). The K loop takes two quads a turn, and a last one when k4 / 4 is
 * odd. `fast` and `full` as for tp_dsp_output (constants: the compiler specializes both). */
TP_DSP_INLINE void pair_block(const pair_job *job, const uint32_t *cols, uint32_t pairs, int8_t *o,
                              uint32_t db, int fast, int full)
{
    /* the job in locals: the int8 output stores could alias it */
    tp_dsp_rq q0 = *job->rq0, q1 = *job->rq1;
    const uint32_t *wq = job->wq;
    uint32_t k4 = job->k4, d1 = job->d1, da = job->da;
    int32_t lo = job->lo, hi = job->hi;
    do {
        int32_t a00 = q0.bias, a01 = q1.bias, a10 = a00, a11 = a01;
        const uint32_t *x = cols, *w = wq, *end = cols + (k4 & ~7u);
        while (x != end) {
            quad_2x2(x, w, &a00, &a01, &a10, &a11);
            quad_2x2(x + 4, w + 4, &a00, &a01, &a10, &a11);
            x += 8;
            w += 8;
        }
        if (k4 & 4u) {
            quad_2x2(x, w, &a00, &a01, &a10, &a11);
        }
        o[0] = tp_dsp_output(a00, &q0, fast, full, lo, hi);
        o[d1] = tp_dsp_output(a01, &q1, fast, full, lo, hi);
        o[db] = tp_dsp_output(a10, &q0, fast, full, lo, hi);
        o[db + d1] = tp_dsp_output(a11, &q1, fast, full, lo, hi);
        cols += k4;
        o += da;
    } while (--pairs != 0u);
}

/* pair_block for VWW-like ops (tp_dsp_fast channels, int8 clamp), and for all others. */
static TP_DSP_NOINLINE void pair_block_fast(const pair_job *job, const uint32_t *cols,
                                            uint32_t pairs, int8_t *o, uint32_t db)
{
    pair_block(job, cols, pairs, o, db, 1, 1);
}

static TP_DSP_NOINLINE void pair_block_any(const pair_job *job, const uint32_t *cols,
                                           uint32_t pairs, int8_t *o, uint32_t db)
{
    pair_block(job, cols, pairs, o, db, 0, 0);
}

void tp_arm_conv2d_s8(const tp_conv_params *p, const tp_shape *in_shape, const int8_t *in,
                      const tp_weights *w, const tp_requant *q, const tp_shape *out_shape,
                      int8_t *out, void *scratch)
{
    conv_layout l;
    uint8_t *s = (uint8_t *)scratch;
    tp_dsp_rq *rq = (tp_dsp_rq *)(void *)s;
    uint32_t *cols, *wq;
    int8_t *col;
    uint32_t cout = (uint32_t)out_shape->c, n_pix = (uint32_t)(out_shape->h * out_shape->w);
    uint32_t c, pix, step, off = ((uint32_t)-p->in_zp & 0xFFFFu) * 0x10001u;
    int fast = p->act_min == -128 && p->act_max == 127, pointwise = is_pointwise(p);
    uint32_t k4;
    int32_t oy = 0, ox = 0;
    pair_job job;
    if (tp_arm_conv3x3_rgb_covers(p, in_shape)) {
        tp_arm_conv3x3_rgb_s8(p, in_shape, in, w, q, out_shape, out, scratch);
        return;
    }
    conv_layout_of(p, in_shape, out_shape, &l);
    cols = (uint32_t *)(void *)(s + l.cols);
    wq = (uint32_t *)(void *)(s + l.weights);
    col = (int8_t *)(s + l.im2col);
    k4 = align4(l.k);
    job.wq = wq;
    job.k4 = k4;
    job.da = 2u * cout;
    job.lo = p->act_min;
    job.hi = p->act_max;
    for (c = 0; c < cout; c++) {
        const int8_t *row = tp_weights_row(w, c, &step);
        if (!tp_dsp_prepare(p, q, c, row, step, l.k, &rq[c])) {
            tp_conv2d_s8(p, in_shape, in, w, q, out_shape, out, scratch);
            return;
        }
        fast = fast && tp_dsp_fast(&rq[c]);
    }
    for (pix = 0; pix < n_pix; pix += l.pixels) {
        uint32_t n = n_pix - pix < l.pixels ? n_pix - pix : l.pixels, j;
        uint32_t even = n / 2u, odd = n & 1u;
        /* the block's columns, pixel pairs interleaved quad by quad; an odd block's last pixel
         * is paired with itself */
        for (j = 0; j < n; j += 2u) {
            const int8_t *a, *b;
            int32_t ay = oy, ax = ox;
            if (++ox == out_shape->w) {
                ox = 0;
                oy++;
            }
            if (pointwise) {
                a = in + (ay * p->stride[0] * in_shape->w + ax * p->stride[1]) * in_shape->c;
                b = j + 1u < n
                        ? in + (oy * p->stride[0] * in_shape->w + ox * p->stride[1]) * in_shape->c
                        : a;
            } else {
                column(p, in_shape, in, ay, ax, l.k, k4, col);
                a = b = col;
                if (j + 1u < n) {
                    column(p, in_shape, in, oy, ox, l.k, k4, col + k4);
                    b = col + k4;
                }
            }
            if (j + 1u < n && ++ox == out_shape->w) {
                ox = 0;
                oy++;
            }
            /* im2col's columns end in the zero point up to k4: no tail */
            to_quads(a, b, pointwise ? l.k : k4, off, p->in_zp, cols + (j / 2u) * k4);
        }
        for (c = 0; c < cout; c += 2u) {
            void (*run)(const pair_job *, const uint32_t *, uint32_t, int8_t *,
                        uint32_t) = fast ? pair_block_fast : pair_block_any;
            int8_t *o = out + pix * cout + c;
            job.d1 = c + 1u < cout ? 1u : 0u; /* an odd last channel is paired with itself */
            job.rq0 = &rq[c];
            job.rq1 = &rq[c + job.d1];
            to_quads(tp_weights_row(w, c, &step), tp_weights_row(w, c + job.d1, &step), l.k, 0u, 0,
                     wq);
            if (even != 0u) {
                run(&job, cols, even, o, cout);
            }
            if (odd != 0u) { /* the last pixel paired with itself */
                run(&job, cols + even * k4, 1u, o + 2u * even * cout, 0u);
            }
        }
    }
}

#endif /* TP_KERNELS_DSP */
