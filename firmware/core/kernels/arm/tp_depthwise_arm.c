/* tp_depthwise_arm.c - DEPTHWISE_CONV_2D 3x3 (strides 1 and 2, any padding and depth
 * multiplier) for Cortex-M with the DSP extension, bit for bit the reference kernel
 * (kernels/ref/tp_conv.c); other windows and strides run the reference kernel.
 *
 * Channel-major: NHWC interleaves the channels, so one channel's taps are C bytes apart. Four
 * input channels at a time are gathered into scratch as planes of int16 rows (band by band of
 * output rows, strip by strip of output columns), padding holding the zero point: a word of
 * four channels of two pixels becomes one word of each channel with SXTB16 and PKHBT/PKHTB,
 * and the four planes' rows interleave so that those stores are immediate offsets. Then each
 * output channel slides its 3x3 window along its plane's rows, four outputs a pass, the
 * weights of a window row read as a pair (GCC pairs them into one LDRD):
 *
 *   stride 1, inputs c0..c5 of a row, weights w0 w1 w2 as pairs W01 = (w0, w1) and
 *   W12 = (w1, w2):   out[x]     += SMLAD(c0 c1, W01) + SMLABT(c2 c3, W12)   (c2 w2)
 *                     out[x + 1] += SMLAD(c2 c3, W12) + SMLATB(c0 c1, W01)   (c1 w0)
 *                     out[x + 2], out[x + 3]: the same from c2 c3 and c4 c5
 *   stride 2, inputs c0..c9:       out[x + i] += SMLAD(c2i c2i+1, W01) + SMLABT(c2i+2 c2i+3, W12)
 *
 * i.e. eight multiply-accumulate instructions and three (or five) word loads per row for 36
 * multiply-accumulates; each sum is requantized and stored at once (a row's last one to three
 * outputs take a pass of two).
 *
 * Exactness: the plane holds the inputs themselves (int8 in int16 lanes) and the padding the
 * zero point, so each sum is sum(x * w) = sum((x - zp) * w) + zp * sum(w): the accumulator
 * starts at bias - zp * sum(w) (modulo 2^32, like the SMLADs, so only the final sum must fit
 * int32, and it does: |bias| + 9 * 128 * 255 is checked against 2^30 by tp_dsp_prepare). Every
 * product of int16 lanes is exact. Where every output of a channel takes tp_dsp_output's fast
 * form, the weights and the bias are doubled: the sum is then acc << 1, as that form wants.
 */
#include "tinyprop.h"
#include "tp_dsp.h"

/* A plane row (halfwords: 128 bytes), the planes gathered at once (their rows interleave: a
 * window's three rows are immediate offsets from one pointer, 512 bytes apart), the output rows
 * of a band (6 at stride 2, whose band reads twice the rows: VWW's planes then stay within what
 * its 101 KB budget leaves) and the columns of a strip: a multiple of 4, whose passes' inputs,
 * the spare output's of an odd strip included, lie within a row. */
#define TP_DW_ROW 64
#define TP_DW_PLANES 4
#define TP_DW_BAND(stride) ((stride) == 1 ? 16 : 6)
#define TP_DW_STRIP(stride) ((stride) == 1 ? 60 : 28)

static int dw_covered(const tp_conv_params *p)
{
    return p->k[0] == 3u && p->k[1] == 3u && (p->stride[0] == 1u || p->stride[0] == 2u) &&
           (p->stride[1] == 1u || p->stride[1] == 2u);
}

/* Output rows of a band. */
static uint32_t band_of(const tp_conv_params *p, const tp_shape *out_shape)
{
    uint32_t band = TP_DW_BAND(p->stride[0]);
    return (uint32_t)out_shape->h < band ? (uint32_t)out_shape->h : band;
}

uint32_t tp_arm_depthwise_conv2d_s8_scratch_bytes(const tp_conv_params *p, const tp_shape *in_shape,
                                                  const tp_shape *out_shape)
{
    (void)in_shape;
    if (!dw_covered(p)) {
        return 0u;
    }
    /* the planes: a band's rows of each */
    return ((band_of(p, out_shape) - 1u) * p->stride[0] + 3u) * TP_DW_PLANES * TP_DW_ROW * 2u;
}

#if TP_KERNELS_DSP

/* A window's weights, row by row: (w0, w1) and (w1, w2), doubled in the fast form. */
typedef struct {
    uint32_t w[6];
} dw_weights;

/* One window row for four outputs (x even): the plane row's words from x on, eight
 * multiply-accumulates; s2 (a constant: the callers specialize) says the window moves two
 * columns an output instead of one. */
TP_DSP_INLINE void window_row4(const uint32_t *c, uint32_t w01, uint32_t w12, int s2, int32_t *a)
{
    if (s2) {
        uint32_t c0 = c[0], c1 = c[1], c2 = c[2], c3 = c[3], c4 = c[4];
        a[0] = tp_smlabt(c1, w12, tp_smlad(c0, w01, a[0])); /* c2 w2 */
        a[1] = tp_smlabt(c2, w12, tp_smlad(c1, w01, a[1]));
        a[2] = tp_smlabt(c3, w12, tp_smlad(c2, w01, a[2]));
        a[3] = tp_smlabt(c4, w12, tp_smlad(c3, w01, a[3]));
    } else {
        uint32_t c0 = c[0], c1 = c[1], c2 = c[2];
        a[0] = tp_smlabt(c1, w12, tp_smlad(c0, w01, a[0])); /* c2 w2 */
        a[1] = tp_smlatb(c0, w01, tp_smlad(c1, w12, a[1])); /* c1 w0 */
        a[2] = tp_smlabt(c2, w12, tp_smlad(c1, w01, a[2]));
        a[3] = tp_smlatb(c1, w01, tp_smlad(c2, w12, a[3]));
    }
}

/* The same for two outputs. */
TP_DSP_INLINE void window_row2(const uint32_t *c, uint32_t w01, uint32_t w12, int s2, int32_t *a)
{
    uint32_t c0 = c[0], c1 = c[1];
    a[0] = tp_smlabt(c1, w12, tp_smlad(c0, w01, a[0]));
    if (s2) {
        a[1] = tp_smlabt(c[2], w12, tp_smlad(c1, w01, a[1]));
    } else {
        a[1] = tp_smlatb(c0, w01, tp_smlad(c1, w12, a[1]));
    }
}

/* One window row of n (4 or 2: a constant) outputs with weights W01, W12. */
TP_DSP_INLINE void window_row(const uint32_t *r, uint32_t w01, uint32_t w12, int n, int s2,
                              int32_t *a)
{
    if (n == 4) {
        window_row4(r, w01, w12, s2, a);
    } else {
        window_row2(r, w01, w12, s2, a);
    }
}

/* The sums of n outputs from plane word r on (rows TP_DW_PLANES TP_DW_ROW / 2 words apart). */
TP_DSP_INLINE void window(const uint32_t *r, const dw_weights *wt, int32_t bias, int n, int s2,
                          int32_t *a)
{
    a[0] = a[1] = a[2] = a[3] = bias;
    window_row(r, wt->w[0], wt->w[1], n, s2, a);
    window_row(r + TP_DW_PLANES * TP_DW_ROW / 2, wt->w[2], wt->w[3], n, s2, a);
    window_row(r + TP_DW_PLANES * TP_DW_ROW, wt->w[4], wt->w[5], n, s2, a);
}

/* An output: in the fast form the weights and bias are doubled, the sum is acc << 1. */
TP_DSP_INLINE int8_t dw_output(int32_t acc, const tp_dsp_rq *rq, int fast, int32_t lo, int32_t hi)
{
    return fast ? tp_dsp_output2((uint32_t)acc, rq, 1, 1, lo, hi)
                : tp_dsp_output(acc, rq, 0, 0, lo, hi);
}

/* One output channel over a band and strip of its plane: rows of n outputs, four a pass, then
 * a pair, then a single one (its pair's spare not stored), each requantized at once. */
typedef struct {
    const int16_t *plane;
    uint32_t n, rows, row_step; /* row_step: plane halfwords between output rows */
    int8_t *out;                /* the band and strip's first output of the channel */
    uint32_t out_row, cout;     /* bytes between output rows, and between outputs */
} dw_band;

TP_DSP_INLINE void band(const dw_band *b, const dw_weights *wt, const tp_dsp_rq *rq, int s2,
                        int fast, int32_t lo, int32_t hi)
{
    /* the fields in locals: the int8 output stores could alias them */
    const uint32_t *plane = (const uint32_t *)(const void *)b->plane;
    int8_t *o_row = b->out;
    uint32_t y, n = b->n, rows = b->rows, row_step = b->row_step / 2u;
    uint32_t out_row = b->out_row, cout = b->cout, pass = s2 ? 4u : 2u; /* words a quad */
    tp_dsp_rq q = *rq;
    for (y = 0; y < rows; y++, plane += row_step, o_row += out_row) {
        const uint32_t *r = plane;
        int8_t *o = o_row;
        int32_t a[4];
        uint32_t quads = n / 4u;
        for (; quads != 0u; quads--, r += pass, o += 4u * cout) {
            window(r, wt, q.bias, 4, s2, a);
            o[0] = dw_output(a[0], &q, fast, lo, hi);
            o[cout] = dw_output(a[1], &q, fast, lo, hi);
            o[2u * cout] = dw_output(a[2], &q, fast, lo, hi);
            o[3u * cout] = dw_output(a[3], &q, fast, lo, hi);
        }
        if (n & 2u) {
            window(r, wt, q.bias, 2, s2, a);
            o[0] = dw_output(a[0], &q, fast, lo, hi);
            o[cout] = dw_output(a[1], &q, fast, lo, hi);
            r += pass / 2u;
            o += 2u * cout;
        }
        if (n & 1u) {
            window(r, wt, q.bias, 2, s2, a);
            o[0] = dw_output(a[0], &q, fast, lo, hi);
        }
    }
}

#if defined(__ARM_FEATURE_DSP) && !defined(TP_KERNELS_DSP_EMULATION)
/* band in the fast form (tp_dsp_fast channels, int8 clamp) as Thumb-2 routines, one a stride
 * along rows: tp_arm_dw_band_s1(b, wt, rq), tp_arm_dw_band_s2. Their frame holds the band's
 * row loop and copies of the weights and the requantization, so that a pass reaches them at
 * sp offsets:
 *   [sp, #0] the plane row, #4 the output row, #8 rows left, #12 plane bytes between output
 *   rows, #16 output bytes between rows, #20 n, #24..#44 w[0..5], #48 bias, #52 mult, #56 hz,
 *   #60 e, #64 a row's passes of four, #68 how the row ends (below).
 * A pass: r0 its plane words, r1 its first output, r2 the passes left, r3 cout; r4..r7 the
 * four sums, r8..r10 plane words, r11 and r12 a window row's weights (W01, W12). The first
 * window row of a pass accumulates onto the bias (in r7 for four outputs, r5 for two), the
 * others onto the sums. Then each sum is requantized as tp_dsp_output2's fast form
 * (mult r8, hz r9, e r10) and stored. */
typedef char dw_band_offsets_check
    [offsetof(dw_band, plane) == 0u && offsetof(dw_band, n) == 4u &&
             offsetof(dw_band, rows) == 8u && offsetof(dw_band, row_step) == 12u &&
             offsetof(dw_band, out) == 16u && offsetof(dw_band, out_row) == 20u &&
             offsetof(dw_band, cout) == 24u && offsetof(tp_dsp_rq, mult) == 4u &&
             offsetof(tp_dsp_rq, hz) == 8u && offsetof(tp_dsp_rq, e) == 20u
         ? 1
         : -1];

void tp_arm_dw_band_s1(const dw_band *b, const dw_weights *wt, const tp_dsp_rq *rq);
void tp_arm_dw_band_s2(const dw_band *b, const dw_weights *wt, const tp_dsp_rq *rq);

/* the instruction set the compiler's own code continues in (.thumb stays set otherwise) */
#ifdef __thumb__
#define TP_DW_ISA ".thumb\n"
#else
#define TP_DW_ISA ".arm\n"
#endif
/* GNU as macros (clang's assembler takes them too). tp_dw_row4 st, o, w, s0..s3: one window
 * row (plane bytes o from r0, weights at sp + w) of four outputs at stride st, sums r4..r7 from
 * s0..s3 (the sums themselves, or the bias). At stride 1 the row's inputs c0..c5 are in r8..r10
 * as pairs and output x reads c(x) w0 + c(x+1) w1 + c(x+2) w2:
 *   r4: SMLAD(c0 c1, W01) + SMLABT(c2 c3, W12)   r5: SMLAD(c2 c3, W12) + SMLATB(c0 c1, W01)
 *   r6, r7: the same from c2 c3 and c4 c5;
 * at stride 2 output i reads words i and i + 1: SMLAD(word i, W01) + SMLABT(word i + 1, W12).
 * tp_dw_row2 the same for two outputs (r4, r5), tp_dw_out a sum requantized in place by
 * tp_dsp_output2's fast form (mult r8, hz r9, e r10; r11 spent), and tp_dw_band the routine. */
__asm__(".pushsection .text.tp_arm_dw_band,\"ax\",%progbits\n"
        ".syntax unified\n"
        ".thumb\n"
        ".macro tp_dw_row4 st, o, w, s0, s1, s2, s3\n"
        "    ldrd r11, r12, [sp, #\\w]\n"
        "    ldr r8, [r0, #\\o]\n"
        "    ldr r9, [r0, #\\o + 4]\n"
        "    ldr r10, [r0, #\\o + 8]\n"
        ".if \\st == 1\n"
        "    smlad r4, r8, r11, \\s0\n"
        "    smlabt r4, r9, r12, r4\n"
        "    smlad r5, r9, r12, \\s1\n"
        "    smlatb r5, r8, r11, r5\n"
        "    smlad r6, r9, r11, \\s2\n"
        "    smlabt r6, r10, r12, r6\n"
        "    smlad r7, r10, r12, \\s3\n"
        "    smlatb r7, r9, r11, r7\n"
        ".else\n"
        "    smlad r4, r8, r11, \\s0\n"
        "    smlabt r4, r9, r12, r4\n"
        "    smlad r5, r9, r11, \\s1\n"
        "    smlabt r5, r10, r12, r5\n"
        "    ldr r8, [r0, #\\o + 12]\n"
        "    ldr r9, [r0, #\\o + 16]\n"
        "    smlad r6, r10, r11, \\s2\n"
        "    smlabt r6, r8, r12, r6\n"
        "    smlad r7, r8, r11, \\s3\n"
        "    smlabt r7, r9, r12, r7\n"
        ".endif\n"
        ".endm\n"
        ".macro tp_dw_row2 st, o, w, s0, s1\n"
        "    ldrd r11, r12, [sp, #\\w]\n"
        "    ldr r8, [r0, #\\o]\n"
        "    ldr r9, [r0, #\\o + 4]\n"
        ".if \\st == 1\n"
        "    smlad r4, r8, r11, \\s0\n"
        "    smlabt r4, r9, r12, r4\n"
        "    smlad r5, r9, r12, \\s1\n"
        "    smlatb r5, r8, r11, r5\n"
        ".else\n"
        "    ldr r10, [r0, #\\o + 8]\n"
        "    smlad r4, r8, r11, \\s0\n"
        "    smlabt r4, r9, r12, r4\n"
        "    smlad r5, r9, r11, \\s1\n"
        "    smlabt r5, r10, r12, r5\n"
        ".endif\n"
        ".endm\n"
        ".macro tp_dw_rq\n"
        "    ldr r8, [sp, #52]\n"
        "    ldr r9, [sp, #56]\n"
        "    ldr r10, [sp, #60]\n"
        ".endm\n"
        ".macro tp_dw_out a\n"
        "    add r11, r9, \\a, asr #31\n"
        "    smmlar \\a, \\a, r8, r11\n"
        "    asr \\a, \\a, r10\n"
        "    ssat \\a, #8, \\a\n"
        ".endm\n"
        /* six outputs at stride 1 (r4..r9 from s0..s5; weights r2, lr; plane words r10..r12,
         * then the fourth in r10), and their requantization (mult r2, hz lr, e r10) */
        ".macro tp_dw_row6 o, w, s0, s1, s2, s3, s4, s5\n"
        "    ldrd r2, lr, [sp, #\\w]\n"
        "    ldr r10, [r0, #\\o]\n"
        "    ldr r11, [r0, #\\o + 4]\n"
        "    ldr r12, [r0, #\\o + 8]\n"
        "    smlad r4, r10, r2, \\s0\n"
        "    smlabt r4, r11, lr, r4\n"
        "    smlad r5, r11, lr, \\s1\n"
        "    smlatb r5, r10, r2, r5\n"
        "    smlad r6, r11, r2, \\s2\n"
        "    smlabt r6, r12, lr, r6\n"
        "    smlad r7, r12, lr, \\s3\n"
        "    smlatb r7, r11, r2, r7\n"
        "    ldr r10, [r0, #\\o + 12]\n"
        "    smlad r8, r12, r2, \\s4\n"
        "    smlabt r8, r10, lr, r8\n"
        "    smlad r9, r10, lr, \\s5\n"
        "    smlatb r9, r12, r2, r9\n"
        ".endm\n"
        ".macro tp_dw_out6 a\n"
        "    add r11, lr, \\a, asr #31\n"
        "    smmlar \\a, \\a, r2, r11\n"
        "    asr \\a, \\a, r10\n"
        "    ssat \\a, #8, \\a\n"
        ".endm\n"
        /* r4..r7 stored at r1, r1 + cout, ... (r3 = cout), r1 moved past them */
        ".macro tp_dw_store4\n"
        "    strb r4, [r1]\n"
        "    strb r5, [r1, r3]\n"
        "    add r1, r1, r3, lsl #1\n"
        "    strb r6, [r1]\n"
        "    strb r7, [r1, r3]\n"
        "    add r1, r1, r3, lsl #1\n"
        ".endm\n"
        /* a pass of four at stride st: the sums from the bias, the first three requantized (the
         * fourth is requantized by the caller that stores it) */
        ".macro tp_dw_sums4 st\n"
        "    ldr r7, [sp, #48]\n"
        "    tp_dw_row4 \\st, 0, 24, r7, r7, r7, r7\n"
        "    tp_dw_row4 \\st, 512, 32, r4, r5, r6, r7\n"
        "    tp_dw_row4 \\st, 1024, 40, r4, r5, r6, r7\n"
        "    tp_dw_rq\n"
        "    tp_dw_out r4\n"
        "    tp_dw_out r5\n"
        "    tp_dw_out r6\n"
        ".endm\n"
        /* the routine at stride st: a pass of four moves 8 st plane bytes, a pass of two 4 st */
        ".macro tp_dw_band name, st\n"
        ".p2align 2\n"
        ".global \\name\n"
        ".hidden \\name\n"
        ".type \\name, %function\n"
        ".thumb_func\n"
        "\\name:\n"
        "    push {r4-r11, lr}\n"
        "    sub sp, sp, #72\n"
        "    ldm r1, {r4-r9}\n" /* the weights */
        "    add r10, sp, #24\n"
        "    stm r10, {r4-r9}\n"
        "    ldrd r4, r5, [r2]\n" /* bias, mult */
        "    ldr r6, [r2, #8]\n"  /* hz */
        "    ldr r7, [r2, #20]\n" /* e */
        "    add r10, sp, #48\n"
        "    stm r10, {r4-r7}\n"
        "    ldm r0, {r4-r10}\n" /* plane, n, rows, row_step, out, out_row, cout */
        "    lsl r7, r7, #1\n"   /* halfwords to bytes */
        "    str r4, [sp, #0]\n"
        "    str r8, [sp, #4]\n"
        "    str r6, [sp, #8]\n"
        "    str r7, [sp, #12]\n"
        "    str r9, [sp, #16]\n"
        "    str r5, [sp, #20]\n"
        "    mov r3, r10\n"
        /* a row's passes: #64 passes of four, then #68 what ends it (0: nothing; 1, 2: a pass
         * of two storing one or two; 3: a pass of four storing three; 6 at stride 1: a pass of
         * six instead of the last four and a two) */
        "    lsr r4, r5, #2\n"
        "    and r6, r5, #3\n"
        ".if \\st == 1\n"
        "    cmp r6, #2\n"
        "    bne 7f\n"
        "    cmp r4, #0\n"
        "    beq 7f\n"
        "    sub r4, r4, #1\n"
        "    mov r6, #6\n"
        "7:\n"
        ".endif\n"
        "    str r4, [sp, #64]\n"
        "    str r6, [sp, #68]\n"
        "1:  ldr r0, [sp, #0]\n" /* a row */
        "    ldr r1, [sp, #4]\n"
        "    ldr r2, [sp, #64]\n"
        "    cmp r2, #0\n"
        "    beq 3f\n"
        "2:\n" /* a pass of four */
        "    tp_dw_sums4 \\st\n"
        "    tp_dw_out r7\n"
        "    tp_dw_store4\n"
        "    add r0, r0, #8 * \\st\n"
        "    subs r2, r2, #1\n"
        "    bne 2b\n"
        /* the row's end: #68 */
        "3:  ldr r2, [sp, #68]\n"
        "    cmp r2, #3\n"
        "    beq 6f\n"
        ".if \\st == 1\n"
        "    cmp r2, #6\n"
        "    beq 8f\n"
        ".endif\n"
        "    cmp r2, #0\n"
        "    beq 5f\n"
        /* one or two outputs: a pass of two, its spare not stored */
        "4:  ldr r5, [sp, #48]\n"
        "    tp_dw_row2 \\st, 0, 24, r5, r5\n"
        "    tp_dw_row2 \\st, 512, 32, r4, r5\n"
        "    tp_dw_row2 \\st, 1024, 40, r4, r5\n"
        "    tp_dw_rq\n"
        "    tp_dw_out r4\n"
        "    tp_dw_out r5\n"
        "    strb r4, [r1]\n"
        "    cmp r2, #2\n"
        "    it ge\n"
        "    strbge r5, [r1, r3]\n"
        "    b 5f\n"
        /* three outputs: a pass of four, its spare not stored */
        "6:\n"
        "    tp_dw_sums4 \\st\n"
        "    strb r4, [r1]\n"
        "    strb r5, [r1, r3]\n"
        "    add r1, r1, r3, lsl #1\n"
        "    strb r6, [r1]\n"
        ".if \\st == 1\n"
        "    b 5f\n"
        /* six outputs */
        "8:  ldr r9, [sp, #48]\n"
        "    tp_dw_row6 0, 24, r9, r9, r9, r9, r9, r9\n"
        "    tp_dw_row6 512, 32, r4, r5, r6, r7, r8, r9\n"
        "    tp_dw_row6 1024, 40, r4, r5, r6, r7, r8, r9\n"
        "    ldr r2, [sp, #52]\n"
        "    ldr lr, [sp, #56]\n"
        "    ldr r10, [sp, #60]\n"
        "    tp_dw_out6 r4\n"
        "    tp_dw_out6 r5\n"
        "    tp_dw_out6 r6\n"
        "    tp_dw_out6 r7\n"
        "    tp_dw_out6 r8\n"
        "    tp_dw_out6 r9\n"
        "    tp_dw_store4\n"
        "    strb r8, [r1]\n"
        "    strb r9, [r1, r3]\n"
        ".endif\n"
        "5:  ldrd r0, r1, [sp, #0]\n" /* the next row */
        "    ldrd r2, r12, [sp, #8]\n"
        "    ldr lr, [sp, #16]\n"
        "    add r0, r0, r12\n"
        "    add r1, r1, lr\n"
        "    strd r0, r1, [sp, #0]\n"
        "    subs r2, r2, #1\n"
        "    str r2, [sp, #8]\n"
        "    bne 1b\n"
        "    add sp, sp, #72\n"
        "    pop {r4-r11, pc}\n"
        ".size \\name, .-\\name\n"
        ".endm\n"
        "    tp_dw_band tp_arm_dw_band_s1, 1\n"
        "    tp_dw_band tp_arm_dw_band_s2, 2\n"
        ".popsection\n" TP_DW_ISA);

#define band_s1_fast tp_arm_dw_band_s1
#define band_s2_fast tp_arm_dw_band_s2
#else
/* band specialized: strides 1 and 2 along rows for VWW-like ops (tp_dsp_fast channels, int8
 * clamp), and any op; with the intrinsics emulated, the definitions of the assembly above. */
static TP_DSP_NOINLINE void band_s1_fast(const dw_band *b, const dw_weights *wt,
                                         const tp_dsp_rq *rq)
{
    band(b, wt, rq, 0, 1, -128, 127);
}

static TP_DSP_NOINLINE void band_s2_fast(const dw_band *b, const dw_weights *wt,
                                         const tp_dsp_rq *rq)
{
    band(b, wt, rq, 1, 1, -128, 127);
}
#endif

static TP_DSP_NOINLINE void band_any(const dw_band *b, const dw_weights *wt, const tp_dsp_rq *rq,
                                     int s2, int32_t lo, int32_t hi)
{
    if (s2) {
        band(b, wt, rq, 1, 0, lo, hi);
    } else {
        band(b, wt, rq, 0, 0, lo, hi);
    }
}

static inline void wr32(int16_t *p, uint32_t v)
{
    __builtin_memcpy(p, &v, 4);
}

/* The inside of the planes: rows x cols inputs of `planes` channels (4: the word of four
 * channels of a pixel at once; fewer: one by one), src_row bytes between input rows and cin
 * between columns, into planes TP_DW_ROW halfwords apart whose rows are TP_DW_PLANES
 * TP_DW_ROW apart. */
static TP_DSP_NOINLINE void gather(const int8_t *src, uint32_t src_row, uint32_t cin, uint32_t rows,
                                   uint32_t cols, uint32_t planes, int16_t *dst)
{
    uint32_t r, x, k;
    for (r = 0; r < rows; r++, src += src_row, dst += TP_DW_PLANES * TP_DW_ROW) {
        const int8_t *p = src;
        int16_t *q = dst;
        if (planes == TP_DW_PLANES) {
            for (x = 1u; x < cols; x += 2u, p += 2u * cin, q += 2) {
                /* pixels a and b: (a0, a2), (a1, a3), (b0, b2), (b1, b3), then by channel */
                uint32_t a = tp_dsp_rd32(p), b = tp_dsp_rd32(p + cin);
                uint32_t ae = tp_sxtb16(a), ao = tp_sxtb16_odd(a);
                uint32_t be = tp_sxtb16(b), bo = tp_sxtb16_odd(b);
                wr32(q, tp_pkhbt16(ae, be));
                wr32(q + TP_DW_ROW, tp_pkhbt16(ao, bo));
                wr32(q + 2 * TP_DW_ROW, tp_pkhtb16(ae, be));
                wr32(q + 3 * TP_DW_ROW, tp_pkhtb16(ao, bo));
            }
            if (x == cols) {
                q[0] = p[0];
                q[TP_DW_ROW] = p[1];
                q[2 * TP_DW_ROW] = p[2];
                q[3 * TP_DW_ROW] = p[3];
            }
        } else {
            for (x = 0; x < cols; x++, p += cin, q++) {
                for (k = 0; k < planes; k++) {
                    q[k * TP_DW_ROW] = p[k];
                }
            }
        }
    }
}

/* Output channel co's window weights (its taps `step` apart from t; doubled when `twice`), and
 * its accumulator's start in rq corrected for the plane's zero point. */
static void channel_of(const tp_conv_params *p, const int8_t *t, uint32_t step, int twice,
                       dw_weights *wt, tp_dsp_rq *rq)
{
    uint32_t sum = 0u, r, m = twice ? 2u : 1u;
    for (r = 0; r < 3u; r++) {
        int32_t w0 = t[(3u * r) * step], w1 = t[(3u * r + 1u) * step];
        int32_t w2 = t[(3u * r + 2u) * step];
        wt->w[2u * r] = tp_dsp_pack16(w0 * (int32_t)m, w1 * (int32_t)m);
        wt->w[2u * r + 1u] = tp_dsp_pack16(w1 * (int32_t)m, w2 * (int32_t)m);
        sum += (uint32_t)(w0 + w1 + w2);
    }
    /* the plane holds x, not x - zp: start at bias - zp * sum(w), mod 2^32 */
    rq->bias = tp_dsp_i32(((uint32_t)rq->bias - (uint32_t)p->in_zp * sum) * m);
}

void tp_arm_depthwise_conv2d_s8(const tp_conv_params *p, const tp_shape *in_shape, const int8_t *in,
                                const tp_weights *w, const tp_requant *q, const tp_shape *out_shape,
                                int8_t *out, void *scratch)
{
    int32_t h = in_shape->h, wd = in_shape->w, oh = out_shape->h, ow = out_shape->w;
    uint32_t cin = (uint32_t)in_shape->c, cout = (uint32_t)out_shape->c;
    uint32_t mult = (uint32_t)p->depth_multiplier, sy = p->stride[0], sx = p->stride[1];
    uint32_t strip = TP_DW_STRIP(sx), band = band_of(p, out_shape), n_in = cout / mult;
    uint32_t c0, k, j, i;
    uint32_t *plane = (uint32_t *)scratch;
    uint32_t zp2 = ((uint32_t)p->in_zp & 0xFFFFu) * 0x10001u;
    int full = p->act_min == -128 && p->act_max == 127;
    int32_t oy0, ox0;
    if (scratch == 0 || !dw_covered(p)) {
        tp_depthwise_conv2d_s8(p, in_shape, in, w, q, out_shape, out, scratch);
        return;
    }
    for (oy0 = 0; oy0 < oh; oy0 += (int32_t)band) {
        dw_band b;
        int32_t iy0 = oy0 * (int32_t)sy - p->pad[0], y_lo, y_hi;
        uint32_t rows;
        b.rows = (uint32_t)(oh - oy0) < band ? (uint32_t)(oh - oy0) : band;
        rows = (b.rows - 1u) * sy + 3u;
        y_lo = iy0 < 0 ? -iy0 : 0; /* plane rows inside the input: [y_lo, y_hi) */
        y_hi = h - iy0 < (int32_t)rows ? h - iy0 : (int32_t)rows;
        for (ox0 = 0; ox0 < ow; ox0 += (int32_t)strip) {
            int32_t ix0 = ox0 * (int32_t)sx - p->pad[1], x_lo, x_hi;
            uint32_t cols, fill;
            b.n = (uint32_t)(ow - ox0) < strip ? (uint32_t)(ow - ox0) : strip;
            cols = (b.n - 1u) * sx + 3u;
            x_lo = ix0 < 0 ? -ix0 : 0;
            x_hi = wd - ix0 < (int32_t)cols ? wd - ix0 : (int32_t)cols;
            /* the zero point in every column the passes read (beyond the strip's inputs too:
             * the spare output of a pair reads there, at most sx n + 6 halfwords in all); the
             * channels then overwrite the inside */
            fill = (sx * b.n + 7u) / 2u < TP_DW_ROW / 2u ? (sx * b.n + 7u) / 2u : TP_DW_ROW / 2u;
            for (i = 0; i < rows * TP_DW_PLANES; i++) {
                for (j = 0; j < fill; j++) {
                    plane[i * (TP_DW_ROW / 2u) + j] = zp2;
                }
            }
            b.row_step = sy * TP_DW_PLANES * TP_DW_ROW;
            b.out_row = (uint32_t)ow * cout;
            b.cout = cout;
            for (c0 = 0; c0 < n_in; c0 += TP_DW_PLANES) { /* cin: the input's pixel stride */
                uint32_t planes = n_in - c0 < TP_DW_PLANES ? n_in - c0 : TP_DW_PLANES;
                int16_t *p0 = (int16_t *)(void *)plane;
                if (y_hi > y_lo && x_hi > x_lo) {
                    gather(in + ((iy0 + y_lo) * wd + ix0 + x_lo) * (int32_t)cin + (int32_t)c0,
                           (uint32_t)wd * cin, cin, (uint32_t)(y_hi - y_lo),
                           (uint32_t)(x_hi - x_lo), planes,
                           p0 + y_lo * TP_DW_PLANES * TP_DW_ROW + x_lo);
                }
                for (k = 0; k < planes; k++) {
                    b.plane = p0 + k * TP_DW_ROW;
                    for (j = 0; j < mult; j++) {
                        uint32_t co = (c0 + k) * mult + j, step;
                        const int8_t *t = tp_weights_row(w, co, &step);
                        dw_weights wt;
                        tp_dsp_rq rq;
                        int fast;
                        if (!tp_dsp_prepare(p, q, co, t, step, 9u, &rq)) {
                            /* the reference overwrites what this kernel has written */
                            tp_depthwise_conv2d_s8(p, in_shape, in, w, q, out_shape, out, scratch);
                            return;
                        }
                        fast = full && tp_dsp_fast(&rq);
                        channel_of(p, t, step, fast, &wt, &rq);
                        b.out = out + ((uint32_t)oy0 * (uint32_t)ow + (uint32_t)ox0) * cout + co;
                        if (fast) {
                            if (sx == 1u) {
                                band_s1_fast(&b, &wt, &rq);
                            } else {
                                band_s2_fast(&b, &wt, &rq);
                            }
                        } else {
                            band_any(&b, &wt, &rq, sx == 2u, p->act_min, p->act_max);
                        }
                    }
                }
            }
        }
    }
}

#endif /* TP_KERNELS_DSP */
