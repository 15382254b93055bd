/* tp_conv3x3_rgb_arm.c - CONV_2D with a 3x3 window over three input channels (a model's first
 * convolution, on an RGB image: 27 taps a window) for Cortex-M with the DSP extension, any
 * stride, padding and output channels, bit for bit the reference kernel (kernels/ref/tp_conv.c).
 * tp_arm_conv2d_s8 hands it these ops.
 *
 * No im2col copy: a window's three rows of 9 bytes are read as seven words straight from the
 * input (a window crossing the border is first copied with the zero point around it), taps
 * t0..t26 in the order
 *
 *   t0-3, t4-7, t8-11, t12-15, t16-19, t20-23, (t23) t24-26
 *
 * (the last word one byte early: t23 is read again, and meets a zero weight), and each word
 * becomes two words of int16 lanes with SXTB16: its bytes 0 and 2, and 1 and 3. The weights of
 * every output channel are laid out the same way once a call, four channels' words interleaved
 * (a group short of four repeats its last channel), ended by TP_CONV_W_END. Two output pixels'
 * 14 words, interleaved, then meet each group's as the 1x1 kernel's 4 x 2 tile (tp_dsp.h: seven
 * quads of sixteen SMLADs); a group of four channels in the fast form is tiled, requantized and
 * stored by tp_arm_conv_block_4x2.
 *
 * Exactness: the words hold the inputs themselves and padding the zero point, so each sum is
 * sum(x * w) = sum((x - zp) * w) + zp * sum(w): the accumulator starts at bias - zp * sum(w)
 * (modulo 2^32, like the SMLADs: only the final sum must fit int32, and tp_dsp_prepare checks
 * that it does).
 */
#include "tinyprop.h"
#include "tp_dsp.h"

#define RGB_TAPS 27u
/* int16 words of a window (or of a channel's weights): two from each of seven words */
#define RGB_WORDS 14u
/* Bytes of a channel's requantization parameters (tp_dsp_rq) in the scratch table. */
#define RGB_RQ_BYTES 24u
/* Pixel pairs whose windows are converted at once (each channel group then runs over them all
 * in one call). */
#define RGB_PAIRS 8u
/* Bytes of a group of four channels' weight words, their end word and a spare. */
#define RGB_GROUP_BYTES (4u * (4u * RGB_WORDS + 2u))

int tp_arm_conv3x3_rgb_covers(const tp_conv_params *p, const tp_shape *in_shape)
{
    return p->k[0] == 3u && p->k[1] == 3u && in_shape->c == 3;
}

/* The scratch layout (all 4-aligned): the requantization table, the channel groups' weight
 * words (each group's 4 x 14 and two end words: the tile reads words in pairs), RGB_PAIRS pixel
 * pairs' window words, and one window copied with its padding (27 bytes and a spare). */
typedef struct {
    uint32_t rq, weights, cols, window, total;
} rgb_layout;

static void rgb_layout_of(const tp_shape *out_shape, rgb_layout *l)
{
    uint32_t cout = (uint32_t)out_shape->c;
    l->rq = 0u;
    l->weights = l->rq + RGB_RQ_BYTES * cout;
    l->cols = l->weights + RGB_GROUP_BYTES * ((cout + 3u) / 4u);
    l->window = l->cols + 2u * 4u * RGB_WORDS * RGB_PAIRS;
    l->total = l->window + 28u;
}

uint32_t tp_arm_conv3x3_rgb_scratch_bytes(const tp_conv_params *p, const tp_shape *in_shape,
                                          const tp_shape *out_shape)
{
    rgb_layout l;
    (void)p;
    (void)in_shape;
    rgb_layout_of(out_shape, &l);
    return l.total;
}

#if TP_KERNELS_DSP

typedef char tp_rgb_rq_bytes_check[sizeof(tp_dsp_rq) == RGB_RQ_BYTES ? 1 : -1];

/* Word i of a window's seven words of int8 as its two words of int16 lanes (bytes 0 and 2,
 * then 1 and 3), every other word of col (the other pixel's, or the other channel's, are
 * between). */
TP_DSP_INLINE void split_word(uint32_t v, uint32_t i, uint32_t *col)
{
    col[4u * i] = tp_sxtb16(v);
    col[4u * i + 2u] = tp_sxtb16_odd(v);
}

static inline uint32_t rd16(const int8_t *p)
{
    uint16_t v;
    __builtin_memcpy(&v, p, 2);
    return v;
}

/* A window's three rows (9 bytes each, `row` bytes apart) as its words. */
TP_DSP_INLINE void window_words(const int8_t *r0, int32_t row, uint32_t *col)
{
    const int8_t *r1 = r0 + row, *r2 = r1 + row;
    split_word(tp_dsp_rd32(r0), 0u, col);
    split_word(tp_dsp_rd32(r0 + 4), 1u, col);
    split_word((uint32_t)(uint8_t)r0[8] | tp_dsp_rd32(r1) << 8, 2u, col);
    split_word(tp_dsp_rd32(r1 + 3), 3u, col);
    split_word(rd16(r1 + 7) | rd16(r2) << 16, 4u, col);
    split_word(tp_dsp_rd32(r2 + 2), 5u, col);
    split_word(tp_dsp_rd32(r2 + 5), 6u, col);
}

/* The window of output pixel (oy, ox) when it crosses the border: copied with the zero point
 * around it (rows 9 bytes apart), then its words. */
static TP_DSP_NOINLINE void border_words(const tp_conv_params *p, const tp_shape *in_shape,
                                         const int8_t *in, int32_t oy, int32_t ox, int8_t *window,
                                         uint32_t *col)
{
    int32_t iy = oy * p->stride[0] - p->pad[0], ix = ox * p->stride[1] - p->pad[1];
    int32_t row = 3 * in_shape->w, ky0, ky1, kx0, kx1, ky, kx;
    uint32_t z4 = ((uint32_t)p->in_zp & 0xFFu) * 0x01010101u;
    tp_window(p, in_shape->h, in_shape->w, oy, ox, &ky0, &ky1, &kx0, &kx1);
    for (kx = 0; kx < 28; kx += 4) {
        __builtin_memcpy(window + kx, &z4, 4);
    }
    for (ky = ky0; ky < ky1; ky++) {
        for (kx = 3 * kx0; kx < 3 * kx1; kx++) {
            window[9 * ky + kx] = in[(iy + ky) * row + 3 * ix + kx];
        }
    }
    window_words(window, 9, col);
}

/* Where the output pixels are: the next one (oy, ox) and the offset in the input of its
 * window's first byte (read only inside), and the outputs whose windows lie inside the input:
 * rows [y0, y1), columns [x0, x1). */
typedef struct {
    int32_t oy, ox, y0, y1, x0, x1, at;
} pixel_cursor;

/* An output count's first whose window starts at or after input 0, and the first past the
 * last that ends within n inputs (stride st, padding pad). */
static void inside_range(int32_t n, int32_t st, int32_t pad, int32_t n_out, int32_t *lo,
                         int32_t *hi)
{
    *lo = (pad + st - 1) / st;
    *hi = n < 3 ? 0 : (n - 3 + pad) / st + 1;
    *hi = *hi < n_out ? *hi : n_out;
}

/* The cursor's pixel's words, then the cursor on the next pixel. */
static inline void next_words(const tp_conv_params *p, const tp_shape *in_shape, const int8_t *in,
                              int32_t ow, pixel_cursor *c, int8_t *window, uint32_t *col)
{
    int32_t row = 3 * in_shape->w;
    if (c->oy >= c->y0 && c->oy < c->y1 && c->ox >= c->x0 && c->ox < c->x1) {
        window_words(in + c->at, row, col);
    } else {
        border_words(p, in_shape, in, c->oy, c->ox, window, col);
    }
    c->at += 3 * p->stride[1];
    if (++c->ox == ow) {
        c->ox = 0;
        c->oy++;
        c->at = (c->oy * p->stride[0] - p->pad[0]) * row - 3 * p->pad[1];
    }
}

/* A channel's weights as window words, every fourth word of wq (the group's other channels'
 * are between), the taps `step` apart, doubled when `twice`; returns their sum. */
static uint32_t weight_words(const int8_t *t, uint32_t step, uint32_t *wq, int twice)
{
    uint32_t i, sum = 0u, words[4u * 7u];
    int8_t b[28]; /* the taps in the windows' byte order: the last word starts with a zero */
    for (i = 0; i < RGB_TAPS; i++) {
        b[i < 24u ? i : i + 1u] = t[i * step];
        sum += (uint32_t)(int32_t)t[i * step];
    }
    b[24] = 0;
    for (i = 0; i < 7u; i++) { /* word k of the 14 at words[2 k] */
        split_word(tp_dsp_rd32(b + 4u * i), i, words);
    }
    for (i = 0; i < RGB_WORDS; i++) { /* both lanes times 2: no carry across */
        wq[4u * i] = twice ? (words[2u * i] << 1) & 0xFFFEFFFFu : words[2u * i];
    }
    return sum;
}

/* An output: in the fast form the weights and bias are doubled, the sum is acc << 1. */
TP_DSP_INLINE int8_t rgb_output(int32_t acc, const tp_dsp_rq *rq, int fast, int32_t lo, int32_t hi)
{
    return fast ? tp_dsp_output2((uint32_t)acc, rq, 1, 1, lo, hi)
                : tp_dsp_output(acc, rq, 0, 0, lo, hi);
}

/* The outputs of `pairs` pixel pairs (their window words one pair after another from x) for
 * every channel group: pair j's pixel a's at o + j da, pixel b's db after (db = 0 repeats pixel
 * a). A group of four in the fast form goes to tp_arm_conv_block_4x2 for all pairs at once; a
 * short group of three, or any other op, takes the tile pair by pair and stores the outputs of
 * its channels; one or two channels are summed one by one. */
TP_DSP_INLINE void pixel_pairs(const uint32_t *x, uint32_t pairs, const uint32_t *wq,
                               const tp_dsp_rq *rq, uint32_t cout, int8_t *o, uint32_t db, int fast,
                               int32_t lo, int32_t hi)
{
    uint32_t c, i, j, da = 2u * cout;
    for (c = 0; c < cout; c += 4u, wq += RGB_GROUP_BYTES / 4u) {
        uint32_t n = cout - c < 4u ? cout - c : 4u;
        if (fast && n == 4u) {
            tp_conv_block b;
            b.cols = x;
            b.wq = wq;
            b.rq = &rq[c];
            b.o = o + c;
            b.db = db;
            b.da = da;
            b.pairs = pairs;
            b.k4 = 2u * RGB_WORDS;
            for (i = 0; i < 4u; i++) {
                b.bias[i] = rq[c + i].bias;
            }
            tp_arm_conv_block_4x2(&b);
            continue;
        }
        for (j = 0; j < pairs; j++) {
            const uint32_t *xj = x + j * 2u * RGB_WORDS;
            int8_t *oj = o + j * da + c;
            if (n <= 2u) { /* one or two channels: each alone, not repeated to four */
                for (i = 0; i < n; i++) {
                    int32_t a = rq[c + i].bias, bb = a;
                    uint32_t k;
                    int8_t va, vb;
                    for (k = 0; k < RGB_WORDS; k++) {
                        a = tp_smlad(xj[2u * k], wq[4u * k + i], a);
                        bb = tp_smlad(xj[2u * k + 1u], wq[4u * k + i], bb);
                    }
                    va = rgb_output(a, &rq[c + i], fast, lo, hi);
                    vb = rgb_output(bb, &rq[c + i], fast, lo, hi);
                    oj[i] = va;
                    oj[db + i] = vb;
                }
            } else {
                int32_t acc[8], bias[4];
                for (i = 0; i < 4u; i++) {
                    bias[i] = rq[c + (i < n ? i : n - 1u)].bias;
                }
                tp_arm_conv_tile_4x2(acc, xj, wq, bias);
                for (i = 0; i < n; i++) {
                    int8_t va = rgb_output(acc[i], &rq[c + i], fast, lo, hi);
                    int8_t vb = rgb_output(acc[i + 4u], &rq[c + i], fast, lo, hi);
                    oj[i] = va;
                    oj[db + i] = vb;
                }
            }
        }
    }
}

/* pixel_pairs for VWW-like ops (tp_dsp_fast channels, int8 clamp), and for all others. */
static TP_DSP_NOINLINE void pixel_pairs_fast(const uint32_t *x, uint32_t pairs, const uint32_t *wq,
                                             const tp_dsp_rq *rq, uint32_t cout, int8_t *o,
                                             uint32_t db)
{
    pixel_pairs(x, pairs, wq, rq, cout, o, db, 1, -128, 127);
}

static TP_DSP_NOINLINE void pixel_pairs_any(const uint32_t *x, uint32_t pairs, const uint32_t *wq,
                                            const tp_dsp_rq *rq, uint32_t cout, int8_t *o,
                                            uint32_t db, int32_t lo, int32_t hi)
{
    pixel_pairs(x, pairs, wq, rq, cout, o, db, 0, lo, hi);
}

void tp_arm_conv3x3_rgb_s8(const tp_conv_params *p, const tp_shape *in_shape, const int8_t *in,
                           const tp_weights *w, const tp_requant *q, const tp_shape *out_shape,
                           int8_t *out, void *scratch)
{
    rgb_layout l;
    uint8_t *s = (uint8_t *)scratch;
    tp_dsp_rq *rq = (tp_dsp_rq *)(void *)s;
    uint32_t *wq, *cols;
    uint32_t cout = (uint32_t)out_shape->c, n_pix = (uint32_t)(out_shape->h * out_shape->w);
    uint32_t c, pix, step;
    int fast = p->act_min == -128 && p->act_max == 127;
    int8_t *window;
    pixel_cursor cur;
    rgb_layout_of(out_shape, &l);
    window = (int8_t *)(s + l.window);
    wq = (uint32_t *)(void *)(s + l.weights);
    cols = (uint32_t *)(void *)(s + l.cols);
    for (c = 0; c < cout; c++) {
        const int8_t *row = tp_weights_row(w, c, &step);
        if (!tp_dsp_prepare(p, q, c, row, step, RGB_TAPS, &rq[c])) {
            tp_conv2d_s8(p, in_shape, in, w, q, out_shape, out, scratch);
            return;
        }
        fast = fast && tp_dsp_fast(&rq[c]);
    }
    for (c = 0; c < cout; c++) {
        const int8_t *row = tp_weights_row(w, c, &step);
        uint32_t *group = wq + (c / 4u) * (RGB_GROUP_BYTES / 4u), j;
        uint32_t sum = weight_words(row, step, group + (c & 3u), fast);
        for (j = (c & 3u) + 1u; c + 1u == cout && j < 4u; j++) {
            (void)weight_words(row, step, group + j, fast); /* a short group repeats its last */
        }
        if ((c & 3u) == 3u || c + 1u == cout) {
            group[4u * RGB_WORDS] = TP_CONV_W_END;
        }
        /* the words hold x, not x - zp: start at bias - zp * sum(w), mod 2^32 (doubled in the
         * fast form, like the weights) */
        rq[c].bias = tp_dsp_i32(((uint32_t)rq[c].bias - (uint32_t)p->in_zp * sum)
                                << (fast ? 1u : 0u));
    }
    inside_range(in_shape->h, p->stride[0], p->pad[0], out_shape->h, &cur.y0, &cur.y1);
    inside_range(in_shape->w, p->stride[1], p->pad[1], out_shape->w, &cur.x0, &cur.x1);
    cur.oy = 0;
    cur.ox = 0;
    cur.at = -(p->pad[0] * in_shape->w + p->pad[1]) * 3;
    for (pix = 0; pix < n_pix;) {
        /* a batch of whole pairs, or the odd last pixel paired with itself (db = 0) */
        uint32_t pairs = (n_pix - pix) / 2u, db = cout, j;
        int8_t *o = out + pix * cout;
        if (pairs > RGB_PAIRS) {
            pairs = RGB_PAIRS;
        }
        for (j = 0; j < pairs; j++) {
            next_words(p, in_shape, in, out_shape->w, &cur, window, cols + j * 2u * RGB_WORDS);
            next_words(p, in_shape, in, out_shape->w, &cur, window, cols + j * 2u * RGB_WORDS + 1);
        }
        if (pairs == 0u) {
            next_words(p, in_shape, in, out_shape->w, &cur, window, cols);
            for (j = 0; j < 2u * RGB_WORDS; j += 2u) {
                cols[j + 1u] = cols[j];
            }
            pairs = 1u;
            db = 0u;
        }
        if (fast) {
            pixel_pairs_fast(cols, pairs, wq, rq, cout, o, db);
        } else {
            pixel_pairs_any(cols, pairs, wq, rq, cout, o, db, p->act_min, p->act_max);
        }
        pix += db != 0u ? 2u * pairs : 1u;
    }
}

#endif /* TP_KERNELS_DSP */
