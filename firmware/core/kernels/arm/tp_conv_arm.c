/* tp_conv_arm.c - CONV_2D for Cortex-M with the DSP extension: a matrix product of int16
 * operands with SMLAD, bit for bit the reference kernel (kernels/ref/tp_conv.c).
 *
 * Every output pixel is a column of K = KH * KW * Cin inputs (the pixel itself for a 1x1
 * convolution, its window gathered for a larger one: im2col, padded taps holding the zero
 * point), every output channel a row of K weights. Loop order: a block of up to
 * TP_CONV_PIXEL_BLOCK output pixels has its columns converted once to int16, 2 (x - zp), in
 * pixel pairs; then, four output channels at a time, the four weight rows are converted to
 * int16 once and every pixel pair of the block is a 4 x 2 tile of outputs: per four K, four
 * words of x and eight of weights feed sixteen SMLADs (32 multiply-accumulates) in the tile's
 * Thumb-2 loop (tp_arm_conv_tile_4x2), then the eight sums are requantized. A channel whose
 * multiplier is 0 (all-zero weights: pruned) outputs one constant and takes no part in the
 * tiles, whose groups of four are the remaining channels, consecutive or not.
 *
 * Pairing: SMLAD multiplies the low and the high halfwords of its operands. A word of four
 * int8 is unpacked with SXTB16 into (v0, v2) and, rotated right by 8, (v1, v3); x and weights
 * are unpacked the same way, so lanes always meet their own partner. K is padded to a multiple
 * of 4: columns with the zero point, weights with zeros (they add 0).
 *
 * Exactness: |2 (x - zp)| <= 510 and |w| <= 128 fit int16 lanes; every product is exact and
 * the int32 sum, 2 acc, holds the exact value as long as the channel's bound |bias| +
 * K * 128 * 255 (or the row's own sum of |w|) stays below 2^30, which tp_dsp_prepare checks
 * before it lets the channel use the fast requantization (tp_dsp.h); otherwise the op runs
 * the reference. The doubled sum is what the requantization shifts first (tp_dsp_output2).
 */
#include "tinyprop.h"
#include "tp_dsp.h"

/* Output pixels per block (even): the columns of a block are converted once for every channel
 * group, each group's weight rows once per block. */
#define TP_CONV_PIXEL_BLOCK 32u
/* Bytes of a channel's requantization parameters (tp_dsp_rq) in the scratch table. */
#define TP_CONV_RQ_BYTES 24u

static uint32_t align4(uint32_t n)
{
    return (n + 3u) & ~3u;
}

/* The scratch layout (all 4-aligned): the per-channel requantization table, the block's
 * columns as int16 quads, one channel group's weight quads and their end word (two: the tile
 * reads words in pairs), and for a window larger than 1x1 the two int8 columns im2col
 * gathers. */
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
    l->im2col = l->weights + 8u * l->k4 + 8u;
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

/* The last k - full (1..3) values of v, then pad bytes, as one little-endian word. */
static uint32_t tail_word(const int8_t *v, uint32_t full, uint32_t k, int32_t pad)
{
    uint32_t word = 0u, j;
    for (j = 0; j < 4u; j++) {
        word |= (full + j < k ? (uint32_t)(uint8_t)v[full + j] : (uint32_t)pad & 0xFFu) << (8u * j);
    }
    return word;
}

/* One quad of a pixel pair's columns from a's and b's four values va, vb (see
 * columns_to_quads). */
TP_DSP_INLINE void column_quad(uint32_t va, uint32_t vb, uint32_t off, uint32_t *quad)
{
    quad[0] = tp_sxtab16(tp_sxtab16(off, va), va);
    quad[1] = tp_sxtab16(tp_sxtab16(off, vb), vb);
    quad[2] = tp_sxtab16_odd(tp_sxtab16_odd(off, va), va);
    quad[3] = tp_sxtab16_odd(tp_sxtab16_odd(off, vb), vb);
}

/* A pixel pair's columns a and b, k int8 each, as ceil(k / 4) quads of int16 lanes, (a0 a2,
 * b0 b2, a1 a3, b1 b3), each 2 (x - zp): off holds -2 zp in both halfwords and x is added
 * again (the tiles' sums are 2 acc, which tp_dsp_output2 takes without a shift); a last partial
 * quad is padded with zp, adding 2 (zp - zp) w = 0. */
static TP_DSP_NOINLINE void columns_to_quads(const int8_t *a, const int8_t *b, uint32_t k,
                                             uint32_t off, int32_t pad, uint32_t *quad)
{
    uint32_t i, full = k & ~3u;
    for (i = 0; i < full; i += 4u, quad += 4) {
        column_quad(tp_dsp_rd32(a + i), tp_dsp_rd32(b + i), off, quad);
    }
    if (full < k) {
        column_quad(tail_word(a, full, k, pad), tail_word(b, full, k, pad), off, quad);
    }
}

/* One quad of a channel group's weights from its rows' four values v0..v3 (see
 * rows_to_quads). */
TP_DSP_INLINE void weight_quad(uint32_t v0, uint32_t v1, uint32_t v2, uint32_t v3, uint32_t *quad)
{
    quad[0] = tp_sxtb16(v0);
    quad[1] = tp_sxtb16(v1);
    quad[2] = tp_sxtb16(v2);
    quad[3] = tp_sxtb16(v3);
    quad[4] = tp_sxtb16_odd(v0);
    quad[5] = tp_sxtb16_odd(v1);
    quad[6] = tp_sxtb16_odd(v2);
    quad[7] = tp_sxtb16_odd(v3);
}

/* A channel group's four weight rows r[0..3], k int8 each, as ceil(k / 4) quads of eight int16
 * pairs: the rows' lanes (w0 w2), then their (w1 w3), a last partial quad padded with zeros;
 * then TP_CONV_W_END. */
static TP_DSP_NOINLINE void rows_to_quads(const int8_t *const r[4], uint32_t k, uint32_t *quad)
{
    const int8_t *r0 = r[0], *r1 = r[1], *r2 = r[2], *r3 = r[3];
    uint32_t i, full = k & ~3u;
    for (i = 0; i < full; i += 4u, quad += 8) {
        weight_quad(tp_dsp_rd32(r0 + i), tp_dsp_rd32(r1 + i), tp_dsp_rd32(r2 + i),
                    tp_dsp_rd32(r3 + i), quad);
    }
    if (full < k) {
        weight_quad(tail_word(r0, full, k, 0), tail_word(r1, full, k, 0), tail_word(r2, full, k, 0),
                    tail_word(r3, full, k, 0), quad);
        quad += 8;
    }
    quad[0] = TP_CONV_W_END;
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

/* A channel group's part of a pixel block: its int16 weight quads (rows_to_quads), the
 * outputs' spacing (da between pixel pairs; d from the group's first channel to its others: a
 * group short of four channels repeats its last) and the channels' requantization (rq[0],
 * rq[d[0]]...). */
typedef struct {
    const uint32_t *wq;
    uint32_t k4, da, d[3];
    const tp_dsp_rq *rq;
    int32_t lo, hi;
} group_job;

#if defined(__ARM_FEATURE_DSP) && !defined(TP_KERNELS_DSP_EMULATION)
/* the assembly's offsets */
typedef char tp_conv_block_offsets_check[offsetof(tp_conv_block, bias) == 28u &&
                                                 offsetof(tp_dsp_rq, mult) == 4u &&
                                                 offsetof(tp_dsp_rq, hz) == 8u &&
                                                 offsetof(tp_dsp_rq, e) == 20u
                                             ? 1
                                             : -1];

/* One quad of K of the 4 x 2 tile (see tp_arm_conv_tile_4x2), its end test last: the next quad's
 * w0, w1 even are loaded, or the end word. */
#define TP_CONV_QUAD                                                             \
    "    ldrd r0, r3, [r1], #8\n" /* xa, xb even */                              \
    "    smlad r4, r0, r12, r4\n"                                                \
    "    smlad r8, r3, r12, r8\n"                                                \
    "    smlad r5, r0, lr, r5\n"                                                 \
    "    smlad r9, r3, lr, r9\n"                                                 \
    "    ldrd r12, lr, [r2], #8\n" /* w2, w3 even */                             \
    "    smlad r6, r0, r12, r6\n"                                                \
    "    smlad r10, r3, r12, r10\n"                                              \
    "    smlad r7, r0, lr, r7\n"                                                 \
    "    smlad r11, r3, lr, r11\n"                                               \
    "    ldr r0, [r1], #4\n" /* xa, xb, w0, w1 odd: single loads pipeline */     \
    "    ldr r3, [r1], #4\n"                                                     \
    "    ldr r12, [r2], #4\n"                                                    \
    "    ldr lr, [r2], #4\n"                                                     \
    "    smlad r4, r0, r12, r4\n"                                                \
    "    smlad r8, r3, r12, r8\n"                                                \
    "    smlad r5, r0, lr, r5\n"                                                 \
    "    smlad r9, r3, lr, r9\n"                                                 \
    "    ldrd r12, lr, [r2], #8\n" /* w2, w3 odd */                              \
    "    smlad r6, r0, r12, r6\n"                                                \
    "    smlad r10, r3, r12, r10\n"                                              \
    "    smlad r7, r0, lr, r7\n"                                                 \
    "    smlad r11, r3, lr, r11\n"                                               \
    "    ldrd r12, lr, [r2], #8\n" /* the next quad's w0, w1 even, or the end */ \
    "    cmp r12, #0x80008000\n"

/* Channel i's two outputs (sums a: pixel a, b: pixel b) requantized in the fast form from its
 * tp_dsp_rq at r1 + 24 i (mult, hz and e at 4, 8 and 20); a's output stored at o + i (r2), b's
 * left in its register. */
#define TP_CONV_CHANNEL(i, a, b)            \
    "    ldr r3, [r1, #24 * " #i " + 4]\n"  \
    "    ldr r12, [r1, #24 * " #i " + 8]\n" \
    "    ldr lr, [r1, #24 * " #i " + 20]\n" \
    "    add r0, r12, " #a ", asr #31\n"    \
    "    smmlar " #a ", " #a ", r3, r0\n"   \
    "    asr " #a ", " #a ", lr\n"          \
    "    ssat " #a ", #8, " #a "\n"         \
    "    strb " #a ", [r2, #" #i "]\n"      \
    "    add r0, r12, " #b ", asr #31\n"    \
    "    smmlar " #b ", " #b ", r3, r0\n"   \
    "    asr " #b ", " #b ", lr\n"          \
    "    ssat " #b ", #8, " #b "\n"

/* the instruction set the compiler's own code continues in (.thumb stays set otherwise) */
#ifdef __thumb__
#define TP_CONV_ISA ".thumb\n"
#else
#define TP_CONV_ISA ".arm\n"
#endif
__asm__(".pushsection .text.tp_arm_conv_tile_4x2,\"ax\",%progbits\n"
        ".syntax unified\n"
        ".thumb\n"
        ".p2align 2\n"
        ".global tp_arm_conv_tile_4x2\n"
        ".hidden tp_arm_conv_tile_4x2\n"
        ".type tp_arm_conv_tile_4x2, %function\n"
        ".thumb_func\n"
        "tp_arm_conv_tile_4x2:\n"
        "    push {r0, r4-r11, lr}\n"
        "    ldm r3, {r4-r7}\n" /* a0..a3 = bias */
        "    mov r8, r4\n"      /* b0..b3 = bias */
        "    mov r9, r5\n"
        "    mov r10, r6\n"
        "    mov r11, r7\n"
        "    ldrd r12, lr, [r2], #8\n" /* w0, w1 even */
        "1:\n" /* two quads a turn: the first half's end test falls through */
        TP_CONV_QUAD "    beq 4f\n" TP_CONV_QUAD "    bne 1b\n"
        "4:\n"
        "    pop {r0}\n"
        "    stm r0, {r4-r11}\n"
        "    pop {r4-r11, pc}\n"
        ".size tp_arm_conv_tile_4x2, .-tp_arm_conv_tile_4x2\n"
        "\n"
        ".p2align 2\n"
        ".global tp_arm_conv_block_4x2\n"
        ".hidden tp_arm_conv_block_4x2\n"
        ".type tp_arm_conv_block_4x2, %function\n"
        ".thumb_func\n"
        "tp_arm_conv_block_4x2:\n"
        "    push {r0, r4-r11, lr}\n" /* [sp]: the block */
        "    ldr r1, [r0]\n"          /* x = cols */
        "2:  ldr r0, [sp]\n"
        "    add r3, r0, #28\n"
        "    ldm r3, {r4-r7}\n"  /* a0..a3 = bias */
        "    ldr r2, [r0, #4]\n" /* w = wq */
        "    mov r8, r4\n"       /* b0..b3 = bias */
        "    mov r9, r5\n"
        "    mov r10, r6\n"
        "    mov r11, r7\n"
        "    ldrd r12, lr, [r2], #8\n" /* w0, w1 even */
        "3:\n" /* two quads a turn: the first half's end test falls through */
        TP_CONV_QUAD "    beq 5f\n" TP_CONV_QUAD "    bne 3b\n"
        "5:\n"
        "    ldr r0, [sp]\n"
        "    str r1, [r0]\n"        /* cols: the next pair's columns */
        "    ldr r1, [r0, #8]\n"    /* rq */
        "    ldr r2, [r0, #12]\n"   /* o */
        TP_CONV_CHANNEL(0, r4, r8)  /* channel 0: sums a0, b0 */
        TP_CONV_CHANNEL(1, r5, r9)  /* channel 1: a1, b1 */
        TP_CONV_CHANNEL(2, r6, r10) /* channel 2 */
        TP_CONV_CHANNEL(3, r7, r11) /* channel 3 */
        "    ldr r0, [sp]\n"
        "    ldr r3, [r0, #16]\n" /* pixel b's outputs at o + db */
        "    add r3, r2, r3\n"
        "    strb r8, [r3, #0]\n"
        "    strb r9, [r3, #1]\n"
        "    strb r10, [r3, #2]\n"
        "    strb r11, [r3, #3]\n"
        "    ldr r3, [r0, #20]\n" /* o += da */
        "    add r2, r2, r3\n"
        "    str r2, [r0, #12]\n"
        "    ldr r1, [r0]\n"
        "    ldr r3, [r0, #24]\n"
        "    subs r3, r3, #1\n"
        "    str r3, [r0, #24]\n"
        "    bne 2b\n"
        "    pop {r0, r4-r11, pc}\n"
        ".size tp_arm_conv_block_4x2, .-tp_arm_conv_block_4x2\n"
        ".popsection\n" TP_CONV_ISA);
#else
void tp_arm_conv_tile_4x2(int32_t out[8], const uint32_t *x, const uint32_t *w,
                          const int32_t bias[4])
{
    uint32_t i;
    for (i = 0; i < 4u; i++) {
        out[i] = out[i + 4u] = bias[i];
    }
    for (; w[0] != TP_CONV_W_END; x += 4, w += 8) {
        for (i = 0; i < 4u; i++) {
            out[i] = tp_smlad(x[2], w[4u + i], tp_smlad(x[0], w[i], out[i]));
            out[i + 4u] = tp_smlad(x[3], w[4u + i], tp_smlad(x[1], w[i], out[i + 4u]));
        }
    }
}
#endif

/* Two outputs of one channel (pixel a's, then b's), both computed before either is stored:
 * the int8 stores could alias rq. */
TP_DSP_INLINE void output_pair(int8_t *oa, int8_t *ob, int32_t a, int32_t b, const tp_dsp_rq *rq,
                               int fast, int full, int32_t lo, int32_t hi)
{
    int8_t va = tp_dsp_output2((uint32_t)a, rq, fast, full, lo, hi);
    int8_t vb = tp_dsp_output2((uint32_t)b, rq, fast, full, lo, hi);
    *oa = va;
    *ob = vb;
}

#if !defined(__ARM_FEATURE_DSP) || defined(TP_KERNELS_DSP_EMULATION)
/* With the intrinsics emulated, the definition of the assembly above. */
void tp_arm_conv_block_4x2(tp_conv_block *b)
{
    do {
        int32_t acc[8];
        uint32_t i;
        tp_arm_conv_tile_4x2(acc, b->cols, b->wq, b->bias);
        for (i = 0; i < 4u; i++) {
            output_pair(b->o + i, b->o + b->db + i, acc[i], acc[i + 4u], &b->rq[i], 1, 1, -128,
                        127);
        }
        b->cols += b->k4;
        b->o += b->da;
    } while (--b->pairs != 0u);
}
#endif

/* The job's outputs for `pairs` pixel pairs of the block: pixel pair j's columns at
 * cols + j k4 words, its outputs at o + j da (pixel a) and + db (pixel b: db = 0 repeats pixel
 * a when the block is odd). `fast` and `full` as for tp_dsp_output, `next`: the group's
 * channels are consecutive, d = 1, 2, 3 (constants: the compiler specializes all three). */
TP_DSP_INLINE void group_block(const group_job *job, const uint32_t *cols, uint32_t pairs,
                               int8_t *o, uint32_t db, int fast, int full, int next)
{
    /* the job in locals: the int8 output stores could alias it */
    const tp_dsp_rq *rq = job->rq;
    const uint32_t *wq = job->wq;
    uint32_t k4 = job->k4, da = job->da;
    uint32_t d1 = next ? 1u : job->d[0], d2 = next ? 2u : job->d[1], d3 = next ? 3u : job->d[2];
    int32_t lo = job->lo, hi = job->hi;
    int32_t bias[4];
    bias[0] = rq[0].bias;
    bias[1] = rq[d1].bias;
    bias[2] = rq[d2].bias;
    bias[3] = rq[d3].bias;
    do {
        int32_t acc[8];
        tp_arm_conv_tile_4x2(acc, cols, wq, bias);
        output_pair(o, o + db, acc[0], acc[4], rq, fast, full, lo, hi);
        output_pair(o + d1, o + db + d1, acc[1], acc[5], rq + d1, fast, full, lo, hi);
        output_pair(o + d2, o + db + d2, acc[2], acc[6], rq + d2, fast, full, lo, hi);
        output_pair(o + d3, o + db + d3, acc[3], acc[7], rq + d3, fast, full, lo, hi);
        cols += k4;
        o += da;
    } while (--pairs != 0u);
}

/* group_block for VWW-like ops (tp_dsp_fast channels, int8 clamp), consecutive channels or
 * not, and for all others. */
static TP_DSP_NOINLINE void group_block_fast_next(const group_job *job, const uint32_t *cols,
                                                  uint32_t pairs, int8_t *o, uint32_t db)
{
    const tp_dsp_rq *rq = job->rq;
    tp_conv_block b;
    b.cols = cols;
    b.wq = job->wq;
    b.rq = rq;
    b.o = o;
    b.db = db;
    b.da = job->da;
    b.pairs = pairs;
    b.k4 = job->k4;
    b.bias[0] = rq[0].bias;
    b.bias[1] = rq[1].bias;
    b.bias[2] = rq[2].bias;
    b.bias[3] = rq[3].bias;
    tp_arm_conv_block_4x2(&b);
}

static TP_DSP_NOINLINE void group_block_fast(const group_job *job, const uint32_t *cols,
                                             uint32_t pairs, int8_t *o, uint32_t db)
{
    group_block(job, cols, pairs, o, db, 1, 1, 0);
}

static TP_DSP_NOINLINE void group_block_any(const group_job *job, const uint32_t *cols,
                                            uint32_t pairs, int8_t *o, uint32_t db)
{
    group_block(job, cols, pairs, o, db, 0, 0, 0);
}

/* Whether channel c's outputs do not depend on its accumulator (multiplier 0: a channel whose
 * weights are all zero, as tp_dsp_prepare makes it, or one TFLite scales to 0): its outputs
 * are one constant, and it takes no multiply-accumulates. VWW's pointwise convolutions have
 * many (pruned channels). */
static inline int is_constant(const tp_dsp_rq *rq)
{
    return rq->mult == 0;
}

/* The first channel from c on that is not constant (cout: none). */
static uint32_t next_live(const tp_dsp_rq *rq, uint32_t c, uint32_t cout)
{
    while (c < cout && is_constant(&rq[c])) {
        c++;
    }
    return c;
}

/* v's values at idx[i..i+3] (pad past n), as one little-endian word. */
static uint32_t gather_word(const int8_t *v, const uint16_t *idx, uint32_t i, uint32_t n,
                            int32_t pad)
{
    uint32_t word = 0u, j;
    for (j = 0; j < 4u; j++) {
        word |= (i + j < n ? (uint32_t)(uint8_t)v[idx[i + j]] : (uint32_t)pad & 0xFFu) << (8u * j);
    }
    return word;
}

/* columns_to_quads of the n input channels idx[0..n) of pixels a and b. */
static TP_DSP_NOINLINE void columns_to_quads_at(const int8_t *a, const int8_t *b,
                                                const uint16_t *idx, uint32_t n, uint32_t off,
                                                int32_t pad, uint32_t *quad)
{
    uint32_t i;
    for (i = 0; i < n; i += 4u, quad += 4) {
        column_quad(gather_word(a, idx, i, n, pad), gather_word(b, idx, i, n, pad), off, quad);
    }
}

/* rows_to_quads of the rows' weights at idx[0..n). */
static TP_DSP_NOINLINE void rows_to_quads_at(const int8_t *const r[4], const uint16_t *idx,
                                             uint32_t n, uint32_t *quad)
{
    uint32_t i;
    for (i = 0; i < n; i += 4u, quad += 8) {
        weight_quad(gather_word(r[0], idx, i, n, 0), gather_word(r[1], idx, i, n, 0),
                    gather_word(r[2], idx, i, n, 0), gather_word(r[3], idx, i, n, 0), quad);
    }
    quad[0] = TP_CONV_W_END;
}

/* The nonzero bytes of words m[0..n). */
static uint32_t nonzero_bytes(const uint32_t *m, uint32_t n)
{
    uint32_t i, count = 0u;
    for (i = 0; i < n; i++) {
        /* 1 in each byte that is not zero (its top bit, or a carry out of its low seven) */
        uint32_t f = ((m[i] | ((m[i] & 0x7F7F7F7Fu) + 0x7F7F7F7Fu)) >> 7) & 0x01010101u;
        count += (f * 0x01010101u) >> 24;
    }
    return count;
}

/* The input channels a 1x1 convolution's live channels (not constant) use, when they are at
 * most half of its k: VWW's pruned channels leave zero columns in the next pointwise
 * convolution's weights (the input channels that were pruned), and a zero weight adds exactly
 * 0, so the tiles can run over the others alone. Their indices go to idx (which has room for
 * k4 / 2 of them); returns how many, or 0 when it would not pay. `mask` is scratch of k4 bytes:
 * the rows' union (bitwise OR), checked against half of k4 after the first row and every
 * eighth, so a dense model stops early. */
static uint32_t used_inputs(const tp_weights *w, const tp_dsp_rq *rq, uint32_t cout, uint32_t k,
                            uint32_t *mask, uint16_t *idx)
{
    uint32_t c, i, n = 0u, step, words = align4(k) / 4u, rows = 0u;
    uint8_t *m = (uint8_t *)mask;
    for (i = 0; i < words; i++) {
        mask[i] = 0u;
    }
    for (c = next_live(rq, 0u, cout); c < cout; c = next_live(rq, c + 1u, cout)) {
        const int8_t *row = tp_weights_row(w, c, &step);
        for (i = 0; i + 16u <= k; i += 16u) { /* four words a turn */
            uint32_t *q = mask + i / 4u;
            uint32_t w0 = tp_dsp_rd32(row + i), w1 = tp_dsp_rd32(row + i + 4u);
            uint32_t w2 = tp_dsp_rd32(row + i + 8u), w3 = tp_dsp_rd32(row + i + 12u);
            q[0] |= w0;
            q[1] |= w1;
            q[2] |= w2;
            q[3] |= w3;
        }
        for (; i + 4u <= k; i += 4u) {
            mask[i / 4u] |= tp_dsp_rd32(row + i);
        }
        for (; i < k; i++) {
            m[i] |= (uint8_t)row[i];
        }
        if ((rows++ & 7u) == 0u && 2u * align4(nonzero_bytes(mask, words)) > 4u * words) {
            return 0u;
        }
    }
    if (rows == 0u || 2u * align4(nonzero_bytes(mask, words)) > 4u * words) {
        return 0u;
    }
    for (i = 0; i < k; i++) {
        if (m[i] != 0u) {
            idx[n++] = (uint16_t)i;
        }
    }
    return n;
}

/* A constant channel's outputs for n pixels, `cout` bytes apart: with multiplier 0 the
 * requantization gives one value for every accumulator. */
static TP_DSP_NOINLINE void constant_outputs(const tp_dsp_rq *rq, int32_t lo, int32_t hi,
                                             uint32_t n, uint32_t cout, int8_t *o)
{
    int8_t v = tp_dsp_output2(0u, rq, 0, 0, lo, hi);
    int8_t *o2 = o + 2u * cout;
    for (; n >= 4u; n -= 4u, o += 4u * cout, o2 += 4u * cout) { /* four a turn */
        o[0] = v;
        o[cout] = v;
        o2[0] = v;
        o2[cout] = v;
    }
    for (; n != 0u; n--, o += cout) {
        *o = v;
    }
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
    uint32_t c, pix, step, off = ((uint32_t)(-2 * p->in_zp) & 0xFFFFu) * 0x10001u;
    int fast = p->act_min == -128 && p->act_max == 127, pointwise = is_pointwise(p);
    int consecutive = pointwise && p->stride[0] == 1u && p->stride[1] == 1u;
    uint32_t k4, used = 0u;
    uint16_t *idx = 0;
    int32_t oy = 0, ox = 0;
    group_job job;
    const int8_t *rows[4];
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
        fast = fast && (is_constant(&rq[c]) || tp_dsp_fast(&rq[c]));
        /* group_block accumulates 2 acc; a channel's bound keeps it within int32, and a
         * constant channel (mult 0) ignores its accumulator */
        rq[c].bias = tp_dsp_i32((uint32_t)rq[c].bias << 1);
    }
    if (consecutive) {
        /* the index list after the (at most half as long) compacted columns */
        idx = (uint16_t *)(void *)(s + l.cols + l.pixels * l.k4);
        used = used_inputs(w, rq, cout, l.k, wq, idx);
        if (used != 0u) {
            k4 = align4(used);
            job.k4 = k4;
        }
    }
    for (pix = 0; pix < n_pix; pix += l.pixels) {
        uint32_t n = n_pix - pix < l.pixels ? n_pix - pix : l.pixels, j;
        uint32_t even = n / 2u, odd = n & 1u;
        /* the block's columns, pixel pairs interleaved quad by quad; an odd block's last pixel
         * is paired with itself */
        for (j = 0; j < n && consecutive; j += 2u) { /* the block's inputs, one after another */
            const int8_t *a = in + (pix + j) * l.k, *b = j + 1u < n ? a + l.k : a;
            if (used != 0u) {
                columns_to_quads_at(a, b, idx, used, off, p->in_zp, cols + (j / 2u) * k4);
            } else {
                columns_to_quads(a, b, l.k, off, p->in_zp, cols + (j / 2u) * k4);
            }
        }
        for (j = 0; j < n && !consecutive; j += 2u) {
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
            columns_to_quads(a, b, pointwise ? l.k : k4, off, p->in_zp, cols + (j / 2u) * k4);
        }
        for (c = 0; c < cout; c++) {
            if (is_constant(&rq[c])) {
                constant_outputs(&rq[c], p->act_min, p->act_max, n, cout, out + pix * cout + c);
            }
        }
        /* the other channels by groups of four */
        for (c = next_live(rq, 0u, cout); c < cout; c = next_live(rq, c + 1u, cout)) {
            uint32_t c0 = c, g;
            void (*run)(const group_job *, const uint32_t *, uint32_t, int8_t *, uint32_t);
            int8_t *o = out + pix * cout + c0;
            rows[0] = tp_weights_row(w, c0, &step);
            for (g = 1u; g < 4u; g++) {
                uint32_t next = next_live(rq, c + 1u, cout);
                c = next < cout ? next : c; /* none left: repeat the last */
                job.d[g - 1u] = c - c0;
                rows[g] = tp_weights_row(w, c, &step);
            }
            job.rq = &rq[c0];
            if (!fast) {
                run = group_block_any;
            } else if (job.d[0] == 1u && job.d[1] == 2u && job.d[2] == 3u) {
                run = group_block_fast_next;
            } else {
                run = group_block_fast;
            }
            if (used != 0u) {
                rows_to_quads_at(rows, idx, used, wq);
            } else {
                rows_to_quads(rows, l.k, wq);
            }
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
