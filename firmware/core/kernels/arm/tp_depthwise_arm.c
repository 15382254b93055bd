/* tp_depthwise_arm.c - DEPTHWISE_CONV_2D 3x3 (strides 1 and 2, any padding and depth
 * multiplier) for Cortex-M with the DSP extension, bit for bit the reference kernel
 * (kernels/ref/tp_conv.c); other windows and strides run the reference kernel.
 *
 * Channel-major: NHWC interleaves the channels, so one channel's taps are C bytes apart. Each
 * input channel's plane is gathered once into scratch as int16 rows of a fixed stride (band by
 * band of output rows, strip by strip of output columns), padding holding the zero point; then
 * each of its depth-multiplier output channels slides its 3x3 window along the rows with the
 * nine weights in six registers, two outputs at a time:
 *
 *   stride 1, inputs c0 c1 c2 c3 of a row, weights w0 w1 w2 as pairs W01 = (w0, w1) and
 *   W12 = (w1, w2):   out[x]     += SMLAD(c0 c1, W01) + SMLABT(c2 c3, W12)   (c2 w2)
 *                     out[x + 1] += SMLAD(c2 c3, W12) + SMLATB(c0 c1, W01)   (c1 w0)
 *   stride 2, inputs c0..c5:       out[x] += SMLAD(c0 c1, W01) + SMLABT(c2 c3, W12)
 *                                  out[x + 1] += SMLAD(c2 c3, W01) + SMLABT(c4 c5, W12)
 *
 * i.e. four multiply-accumulate instructions and two (or three) word loads per row for 18
 * multiply-accumulates. A row of sums goes to scratch; a second pass requantizes it into the
 * NHWC output.
 *
 * Exactness: the plane holds the inputs themselves (int8 in int16 lanes) and the padding the
 * zero point, so each sum is sum(x * w) = sum((x - zp) * w) + zp * sum(w): the accumulator
 * starts at bias - zp * sum(w) (modulo 2^32, like the SMLADs, so only the final sum must fit
 * int32, and it does: |bias| + 9 * 128 * 255 is checked against 2^30 by tp_dsp_prepare). Every
 * product of int16 lanes is exact.
 */
#include "tinyprop.h"
#include "tp_dsp.h"

/* The plane's row stride (halfwords: 128 bytes, so the three rows of a window are immediate
 * offsets from one pointer), the output rows of a band and the columns of a strip: even, and
 * the strip's input columns, the last pair's included, within a row. */
#define TP_DW_ROW 64
#define TP_DW_BAND 16
#define TP_DW_STRIP(stride) ((stride) == 1 ? 62 : 30)

static int dw_covered(const tp_conv_params *p)
{
    return p->k[0] == 3u && p->k[1] == 3u && (p->stride[0] == 1u || p->stride[0] == 2u) &&
           (p->stride[1] == 1u || p->stride[1] == 2u);
}

/* Output rows of a band and the plane rows they read. */
static uint32_t band_rows(const tp_conv_params *p, const tp_shape *out_shape)
{
    uint32_t band = (uint32_t)out_shape->h < TP_DW_BAND ? (uint32_t)out_shape->h : TP_DW_BAND;
    return (band - 1u) * p->stride[0] + 3u;
}

uint32_t tp_arm_depthwise_conv2d_s8_scratch_bytes(const tp_conv_params *p, const tp_shape *in_shape,
                                                  const tp_shape *out_shape)
{
    (void)in_shape;
    if (!dw_covered(p)) {
        return 0u;
    }
    /* the plane, then one row of int32 sums */
    return band_rows(p, out_shape) * TP_DW_ROW * 2u + 4u * TP_DW_STRIP(p->stride[1]);
}

#if TP_KERNELS_DSP

/* A window's weights: (w0, w1) and (w1, w2) of each of its three rows. */
typedef struct {
    uint32_t w01[3], w12[3];
} dw_weights;

/* One row of the window for two outputs: the words c0 c1, c2 c3 (and c4 c5) of a plane row,
 * four multiply-accumulates; s2 (a constant: the callers specialize) says the window moves two
 * columns an output instead of one. */
TP_DSP_INLINE void window_row(const int16_t *row, uint32_t w01, uint32_t w12, int s2, int32_t *s0,
                              int32_t *s1)
{
    uint32_t x01, x23, x45;
    __builtin_memcpy(&x01, row, 4);
    __builtin_memcpy(&x23, row + 2, 4);
    *s0 = tp_smlad(x01, w01, *s0);
    *s0 = tp_smlabt(x23, w12, *s0); /* c2 w2 */
    if (s2) {
        __builtin_memcpy(&x45, row + 4, 4);
        *s1 = tp_smlad(x23, w01, *s1);
        *s1 = tp_smlabt(x45, w12, *s1); /* c4 w2 */
    } else {
        *s1 = tp_smlad(x23, w12, *s1);
        *s1 = tp_smlatb(x01, w01, *s1); /* c1 w0 */
    }
}

/* One output row's sums, n2 (even) outputs from plane rows r, r + TP_DW_ROW, r + 2 TP_DW_ROW;
 * the six weight pairs stay in registers. */
TP_DSP_INLINE void row_sums(const int16_t *r, const dw_weights *wt, int32_t bias, uint32_t n2,
                            int32_t *acc, int s2)
{
    uint32_t a01 = wt->w01[0], a12 = wt->w12[0], b01 = wt->w01[1], b12 = wt->w12[1];
    uint32_t c01 = wt->w01[2], c12 = wt->w12[2];
    int32_t *end = acc + n2;
    do {
        int32_t s0 = bias, s1 = bias;
        window_row(r, a01, a12, s2, &s0, &s1);
        window_row(r + TP_DW_ROW, b01, b12, s2, &s0, &s1);
        window_row(r + 2 * TP_DW_ROW, c01, c12, s2, &s0, &s1);
        acc[0] = s0;
        acc[1] = s1;
        acc += 2;
        r += s2 ? 4 : 2;
    } while (acc != end);
}

/* One output channel over a band and strip of its plane: output rows of n2 sums (n kept), each
 * requantized into the NHWC output right away. */
typedef struct {
    const int16_t *plane;
    int32_t *acc;
    uint32_t n, n2, rows, row_step; /* row_step: plane halfwords between output rows */
    int8_t *out;                    /* the band and strip's first output of the channel */
    uint32_t out_row, cout;         /* bytes between output rows, and between outputs */
} dw_band;

TP_DSP_INLINE void band(const dw_band *b, const dw_weights *wt, int32_t bias, const tp_dsp_rq *rq,
                        int s2, int fast, int full, int32_t lo, int32_t hi)
{
    /* the fields in locals: the int8 output stores could alias them */
    const int16_t *r = b->plane;
    int8_t *o = b->out;
    int32_t *sums = b->acc;
    uint32_t y, n = b->n, n2 = b->n2, rows = b->rows, row_step = b->row_step;
    uint32_t out_row = b->out_row, cout = b->cout;
    tp_dsp_rq q = *rq;
    for (y = 0; y < rows; y++) {
        const int32_t *acc = sums, *end = sums + n;
        int8_t *dst = o;
        row_sums(r, wt, bias, n2, sums, s2);
        do {
            *dst = tp_dsp_output(*acc++, &q, fast, full, lo, hi);
            dst += cout;
        } while (acc != end);
        r += row_step;
        o += out_row;
    }
}

/* band specialized: strides 1 and 2 along rows for VWW-like ops (tp_dsp_fast channels, int8
 * clamp), and any op. */
static TP_DSP_NOINLINE void band_s1_fast(const dw_band *b, const dw_weights *wt, int32_t bias,
                                         const tp_dsp_rq *rq)
{
    band(b, wt, bias, rq, 0, 1, 1, -128, 127);
}

static TP_DSP_NOINLINE void band_s2_fast(const dw_band *b, const dw_weights *wt, int32_t bias,
                                         const tp_dsp_rq *rq)
{
    band(b, wt, bias, rq, 1, 1, 1, -128, 127);
}

static TP_DSP_NOINLINE void band_any(const dw_band *b, const dw_weights *wt, int32_t bias,
                                     const tp_dsp_rq *rq, int s2, int32_t lo, int32_t hi)
{
    if (s2) {
        band(b, wt, bias, rq, 1, 0, 0, lo, hi);
    } else {
        band(b, wt, bias, rq, 0, 0, 0, lo, hi);
    }
}

/* The inside of a plane: rows x cols inputs of one channel, src_row bytes between input rows
 * and cin between columns, into plane rows TP_DW_ROW halfwords apart. */
static TP_DSP_NOINLINE void gather(const int8_t *src, uint32_t src_row, uint32_t cin, uint32_t rows,
                                   uint32_t cols, int16_t *dst)
{
    uint32_t r, x;
    for (r = 0; r < rows; r++, src += src_row, dst += TP_DW_ROW) {
        const int8_t *p = src;
        int16_t *q = dst;
        for (x = 1u; x < cols; x += 2u, p += 2u * cin, q += 2) {
            q[0] = p[0];
            q[1] = p[cin];
        }
        if (x == cols) {
            q[0] = p[0];
        }
    }
}

void tp_arm_depthwise_conv2d_s8(const tp_conv_params *p, const tp_shape *in_shape, const int8_t *in,
                                const tp_weights *w, const tp_requant *q, const tp_shape *out_shape,
                                int8_t *out, void *scratch)
{
    int32_t h = in_shape->h, wd = in_shape->w, oh = out_shape->h, ow = out_shape->w;
    uint32_t cin = (uint32_t)in_shape->c, cout = (uint32_t)out_shape->c;
    uint32_t mult = (uint32_t)p->depth_multiplier, sy = p->stride[0], sx = p->stride[1];
    uint32_t strip = TP_DW_STRIP(sx), step, c, j, i;
    int16_t *plane = (int16_t *)scratch;
    int32_t *acc = (int32_t *)(void *)((uint8_t *)scratch +
                                       band_rows(p, out_shape) * TP_DW_ROW * 2u);
    int fast = p->act_min == -128 && p->act_max == 127;
    int32_t oy0, ox0;
    tp_dsp_rq rq;
    if (scratch == 0 || !dw_covered(p)) {
        tp_depthwise_conv2d_s8(p, in_shape, in, w, q, out_shape, out, scratch);
        return;
    }
    for (c = 0; c < cout; c++) { /* every channel must take the fast requantization */
        const int8_t *row = tp_weights_row(w, c, &step);
        if (!tp_dsp_prepare(p, q, c, row, step, 9u, &rq)) {
            tp_depthwise_conv2d_s8(p, in_shape, in, w, q, out_shape, out, scratch);
            return;
        }
        fast = fast && tp_dsp_fast(&rq);
    }
    for (oy0 = 0; oy0 < oh; oy0 += TP_DW_BAND) {
        dw_band b;
        int32_t iy0 = oy0 * (int32_t)sy - p->pad[0], y_lo, y_hi;
        b.rows = (uint32_t)(oh - oy0 < TP_DW_BAND ? oh - oy0 : TP_DW_BAND);
        {
            uint32_t rows = (b.rows - 1u) * sy + 3u;
            y_lo = iy0 < 0 ? -iy0 : 0; /* plane rows inside the input: [y_lo, y_hi) */
            y_hi = h - iy0 < (int32_t)rows ? h - iy0 : (int32_t)rows;
        }
        for (ox0 = 0; ox0 < ow; ox0 += (int32_t)strip) {
            int32_t ix0 = ox0 * (int32_t)sx - p->pad[1], x_lo, x_hi;
            uint32_t cols;
            b.n = (uint32_t)(ow - ox0) < strip ? (uint32_t)(ow - ox0) : strip;
            b.n2 = (b.n + 1u) & ~1u; /* pairs: an odd strip computes one spare output */
            cols = (b.n2 - 1u) * sx + 3u + (sx == 2u ? 1u : 0u);
            x_lo = ix0 < 0 ? -ix0 : 0;
            x_hi = wd - ix0 < (int32_t)cols ? wd - ix0 : (int32_t)cols;
            /* the zero point everywhere; each channel then overwrites the inside */
            for (i = 0; i < ((b.rows - 1u) * sy + 3u) * TP_DW_ROW; i++) {
                plane[i] = (int16_t)p->in_zp;
            }
            b.plane = plane;
            b.acc = acc;
            b.row_step = sy * TP_DW_ROW;
            b.out_row = (uint32_t)ow * cout;
            b.cout = cout;
            for (c = 0; c < cout / mult; c++) { /* cin: the input's pixel stride */
                if (y_hi > y_lo && x_hi > x_lo) {
                    gather(in + ((iy0 + y_lo) * wd + ix0 + x_lo) * (int32_t)cin + (int32_t)c,
                           (uint32_t)wd * cin, cin, (uint32_t)(y_hi - y_lo),
                           (uint32_t)(x_hi - x_lo), plane + y_lo * TP_DW_ROW + x_lo);
                }
                for (j = 0; j < mult; j++) {
                    uint32_t co = c * mult + j, sum = 0u, r;
                    const int8_t *t = tp_weights_row(w, co, &step);
                    dw_weights wt;
                    int32_t bias;
                    (void)tp_dsp_prepare(p, q, co, t, step, 9u, &rq);
                    for (r = 0; r < 3u; r++) {
                        int32_t w0 = t[(3u * r) * step], w1 = t[(3u * r + 1u) * step];
                        int32_t w2 = t[(3u * r + 2u) * step];
                        wt.w01[r] = tp_dsp_pack16(w0, w1);
                        wt.w12[r] = tp_dsp_pack16(w1, w2);
                        sum += (uint32_t)(w0 + w1 + w2);
                    }
                    /* the plane holds x, not x - zp: start at bias - zp * sum(w), mod 2^32 */
                    bias = tp_dsp_i32((uint32_t)rq.bias - (uint32_t)p->in_zp * sum);
                    b.out = out + ((uint32_t)oy0 * (uint32_t)ow + (uint32_t)ox0) * cout + co;
                    if (fast) {
                        if (sx == 1u) {
                            band_s1_fast(&b, &wt, bias, &rq);
                        } else {
                            band_s2_fast(&b, &wt, bias, &rq);
                        }
                    } else {
                        band_any(&b, &wt, bias, &rq, sx == 2u, p->act_min, p->act_max);
                    }
                }
            }
        }
    }
}

#endif /* TP_KERNELS_DSP */
