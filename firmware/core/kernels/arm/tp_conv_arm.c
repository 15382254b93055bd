/* tp_conv_arm.c - CONV_2D for Cortex-M with the DSP extension: a matrix product of int16
 * operands with SMLAD, bit for bit the reference kernel (kernels/ref/tp_conv.c).
 *
 * Every output pixel is a column of K = KH * KW * Cin inputs (the pixel itself for a 1x1
 * convolution, its window gathered for a larger one: im2col, padded taps holding the zero
 * point), every output channel a row of K weights. Loop order: a block of up to
 * TP_CONV_PIXELS output pixels has its columns converted once to int16 (x - zp) in pixel pairs;
 * then, output channel pair by pair, the two weight rows are converted to int16 once and every
 * pixel pair of the block is a 2 x 2 block of outputs: per four K, four words of x and four of
 * weights feed eight SMLADs (16 multiply-accumulates), the K loop unrolled by two.
 *
 * Pairing: SMLAD multiplies the low and the high halfwords of its operands. A word of four
 * int8 is unpacked with SXTB16 into (v0, v2) and, shifted right by 8, (v1, v3); x and weights
 * are unpacked the same way, so lanes always meet their own partner. K is padded to a multiple
 * of 8 with zeros on both sides (they add 0).
 *
 * Exactness: |x - zp| <= 255 and |w| <= 128 fit int16 lanes; every product is exact and the
 * int32 accumulator holds the exact sum as long as the channel's bound |bias| + K * 128 * 255
 * (or the row's own sum of |w|) stays below 2^30, which tp_dsp_prepare checks before it lets
 * the channel use the fast requantization (tp_dsp.h); otherwise the op runs the reference.
 */
#include "tp_dsp.h"

/* Output pixels per block (even): the columns of a block are converted once for every channel
 * pair, each pair of weight rows once per block. */
#define TP_CONV_PIXEL_BLOCK 16u
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
    uint32_t k, k8, pixels, rq, cols, weights, im2col, total;
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
    l->k8 = (l->k + 7u) & ~7u;
    l->pixels = n_pix < TP_CONV_PIXEL_BLOCK ? n_pix + (n_pix & 1u) : TP_CONV_PIXEL_BLOCK;
    l->rq = 0u;
    l->cols = l->rq + TP_CONV_RQ_BYTES * (uint32_t)out_shape->c;
    l->weights = l->cols + 2u * l->pixels * l->k8;
    l->im2col = l->weights + 4u * l->k8;
    l->total = l->im2col + (is_pointwise(p) ? 0u : 2u * align4(l->k));
}

uint32_t tp_arm_conv2d_s8_scratch_bytes(const tp_conv_params *p, const tp_shape *in_shape,
                                        const tp_shape *out_shape)
{
    conv_layout l;
    conv_layout_of(p, in_shape, out_shape, &l);
    return l.total;
}

#if TP_KERNELS_DSP

typedef char tp_conv_rq_bytes_check[sizeof(tp_dsp_rq) == TP_CONV_RQ_BYTES ? 1 : -1];

/* Two int8 columns a and b of k values as k8 / 4 quads
 * (a0 a2, a1 a3, b0 b2, b1 b3) of int16 lanes x - zp; off holds -zp in both halfwords. */
static void columns_to_quads(const int8_t *a, const int8_t *b, uint32_t k, uint32_t k8,
                             uint32_t off, int32_t zp, uint32_t *quad)
{
    uint32_t i, full = k & ~3u;
    for (i = 0; i < full; i += 4u) {
        uint32_t va = tp_dsp_rd32(a + i);
        quad[0] = tp_sxtab16(off, va);
        quad[1] = tp_sxtab16(off, va >> 8);
        {
            uint32_t vb = tp_dsp_rd32(b + i);
            quad[2] = tp_sxtab16(off, vb);
            quad[3] = tp_sxtab16(off, vb >> 8);
        }
        quad += 4;
    }
    if (full < k) { /* the last 1..3 values, the rest of the word the zero point (adds 0) */
        uint32_t va = 0u, vb = 0u, j;
        for (j = 0; j < 4u; j++) {
            uint32_t zb = (uint32_t)zp & 0xFFu;
            va |= (full + j < k ? (uint32_t)(uint8_t)a[full + j] : zb) << (8u * j);
            vb |= (full + j < k ? (uint32_t)(uint8_t)b[full + j] : zb) << (8u * j);
        }
        quad[0] = tp_sxtab16(off, va);
        quad[1] = tp_sxtab16(off, va >> 8);
        quad[2] = tp_sxtab16(off, vb);
        quad[3] = tp_sxtab16(off, vb >> 8);
        quad += 4;
        full += 4u;
    }
    for (; full < k8; full += 4u) {
        quad[0] = quad[1] = quad[2] = quad[3] = 0u;
        quad += 4;
    }
}

/* Two weight rows of k int8 as k8 / 4 quads (w0 w2, w1 w3 of row 0, then of row 1). */
static void rows_to_quads(const int8_t *r0, const int8_t *r1, uint32_t k, uint32_t k8,
                          uint32_t *quad)
{
    uint32_t i, full = k & ~3u;
    for (i = 0; i < full; i += 4u) {
        uint32_t v0 = tp_dsp_rd32(r0 + i);
        quad[0] = tp_sxtb16(v0);
        quad[1] = tp_sxtb16(v0 >> 8);
        {
            uint32_t v1 = tp_dsp_rd32(r1 + i);
            quad[2] = tp_sxtb16(v1);
            quad[3] = tp_sxtb16(v1 >> 8);
        }
        quad += 4;
    }
    if (full < k) {
        uint32_t v0 = 0u, v1 = 0u, j;
        for (j = 0; full + j < k; j++) {
            v0 |= (uint32_t)(uint8_t)r0[full + j] << (8u * j);
            v1 |= (uint32_t)(uint8_t)r1[full + j] << (8u * j);
        }
        quad[0] = tp_sxtb16(v0);
        quad[1] = tp_sxtb16(v0 >> 8);
        quad[2] = tp_sxtb16(v1);
        quad[3] = tp_sxtb16(v1 >> 8);
        quad += 4;
        full += 4u;
    }
    for (; full < k8; full += 4u) {
        quad[0] = quad[1] = quad[2] = quad[3] = 0u;
        quad += 4;
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
        im2col_inside(in + (iy * in_shape->w + ix) * cin, in_shape->w * cin, p->k[1] * cin,
                      p->k[0], (int32_t)(k4 - k), ((uint32_t)p->in_zp & 0xFFu) * 0x01010101u,
                      col);
    } else {
        im2col(p, in_shape, in, oy, ox, k4, col);
    }
}

/* The outputs of one channel pair (c, c + d1: d1 = 0 repeats channel c when cout is odd) for
 * `pairs` pixel pairs of the block: pixel pair j's columns at cols + j k8 words, its outputs at
 * o + j da (pixel a) and + db (pixel b: db = 0 repeats pixel a when the block is odd). The 2 x 2
 * products run over k8 / 8 double quads: per quad four words of x, four of weights, eight
 * SMLADs. `round` says every channel of the op rounds its right shift (tp_dsp.h: nm = -1), and
 * `full` that the activation clamp is int8's; the compiler specializes each combination. */
static inline void pair_block(const uint32_t *cols, const uint32_t *wq, uint32_t k8,
                              uint32_t pairs, int8_t *o, uint32_t da, uint32_t db, uint32_t d1,
                              const tp_dsp_rq *rq0, const tp_dsp_rq *rq1, int round, int full,
                              int32_t lo, int32_t hi)
{
    do {
        int32_t a00 = rq0->bias, a01 = rq1->bias, a10 = a00, a11 = a01;
        const uint32_t *x = cols, *w = wq, *end = cols + k8;
        do {
            uint32_t x0e = x[0], x0o = x[1], x1e = x[2], x1o = x[3];
            uint32_t w0e = w[0], w0o = w[1], w1e = w[2], w1o = w[3];
            a00 = tp_smlad(x0e, w0e, a00);
            a00 = tp_smlad(x0o, w0o, a00);
            a01 = tp_smlad(x0e, w1e, a01);
            a01 = tp_smlad(x0o, w1o, a01);
            a10 = tp_smlad(x1e, w0e, a10);
            a10 = tp_smlad(x1o, w0o, a10);
            a11 = tp_smlad(x1e, w1e, a11);
            a11 = tp_smlad(x1o, w1o, a11);
            x0e = x[4];
            x0o = x[5];
            x1e = x[6];
            x1o = x[7];
            w0e = w[4];
            w0o = w[5];
            w1e = w[6];
            w1o = w[7];
            a00 = tp_smlad(x0e, w0e, a00);
            a00 = tp_smlad(x0o, w0o, a00);
            a01 = tp_smlad(x0e, w1e, a01);
            a01 = tp_smlad(x0o, w1o, a01);
            a10 = tp_smlad(x1e, w0e, a10);
            a10 = tp_smlad(x1o, w0o, a10);
            a11 = tp_smlad(x1e, w1e, a11);
            a11 = tp_smlad(x1o, w1o, a11);
            x += 8;
            w += 8;
        } while (x != end);
        o[0] = tp_dsp_output(a00, rq0, round, full, lo, hi);
        o[d1] = tp_dsp_output(a01, rq1, round, full, lo, hi);
        o[db] = tp_dsp_output(a10, rq0, round, full, lo, hi);
        o[db + d1] = tp_dsp_output(a11, rq1, round, full, lo, hi);
        cols += k8;
        o += da;
    } while (--pairs != 0u);
}

/* pair_block for VWW-like ops (every channel rounds, int8 clamp), and for all others. */
static TP_DSP_NOINLINE void pair_block_fast(const uint32_t *cols, const uint32_t *wq,
                                            uint32_t k8, uint32_t pairs, int8_t *o, uint32_t da,
                                            uint32_t db, uint32_t d1, const tp_dsp_rq *rq0,
                                            const tp_dsp_rq *rq1)
{
    pair_block(cols, wq, k8, pairs, o, da, db, d1, rq0, rq1, 1, 1, -128, 127);
}

static TP_DSP_NOINLINE void pair_block_any(const uint32_t *cols, const uint32_t *wq, uint32_t k8,
                                           uint32_t pairs, int8_t *o, uint32_t da, uint32_t db,
                                           uint32_t d1, const tp_dsp_rq *rq0,
                                           const tp_dsp_rq *rq1, int32_t lo, int32_t hi)
{
    pair_block(cols, wq, k8, pairs, o, da, db, d1, rq0, rq1, 0, 0, lo, hi);
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
    conv_layout_of(p, in_shape, out_shape, &l);
    cols = (uint32_t *)(void *)(s + l.cols);
    wq = (uint32_t *)(void *)(s + l.weights);
    col = (int8_t *)(s + l.im2col);
    k4 = align4(l.k);
    for (c = 0; c < cout; c++) {
        const int8_t *row = tp_weights_row(w, c, &step);
        if (!tp_dsp_prepare(p, q, c, row, step, l.k, &rq[c])) {
            tp_conv2d_s8(p, in_shape, in, w, q, out_shape, out, scratch);
            return;
        }
        fast = fast && rq[c].nm != 0;
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
                b = j + 1u < n ? in + (oy * p->stride[0] * in_shape->w + ox * p->stride[1]) *
                                          in_shape->c
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
            columns_to_quads(a, b, pointwise ? l.k : k4, l.k8, off, p->in_zp,
                             cols + (j / 2u) * l.k8);
        }
        for (c = 0; c < cout; c += 2u) {
            uint32_t d1 = c + 1u < cout ? 1u : 0u; /* an odd last channel is paired with itself */
            const int8_t *r0 = tp_weights_row(w, c, &step);
            const int8_t *r1 = tp_weights_row(w, c + d1, &step);
            int8_t *o = out + pix * cout + c;
            rows_to_quads(r0, r1, l.k, l.k8, wq);
            if (fast) {
                if (even != 0u) {
                    pair_block_fast(cols, wq, l.k8, even, o, 2u * cout, cout, d1, &rq[c],
                                    &rq[c + d1]);
                }
                if (odd != 0u) {
                    pair_block_fast(cols + even * l.k8, wq, l.k8, 1u, o + 2u * even * cout,
                                    0u, 0u, d1, &rq[c], &rq[c + d1]);
                }
            } else {
                if (even != 0u) {
                    pair_block_any(cols, wq, l.k8, even, o, 2u * cout, cout, d1, &rq[c],
                                   &rq[c + d1], p->act_min, p->act_max);
                }
                if (odd != 0u) {
                    pair_block_any(cols + even * l.k8, wq, l.k8, 1u, o + 2u * even * cout, 0u,
                                   0u, d1, &rq[c], &rq[c + d1], p->act_min, p->act_max);
                }
            }
        }
    }
}

#endif /* TP_KERNELS_DSP */
