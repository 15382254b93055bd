/* tp_weighted_gradq.c - reference gradients of CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED
 * with integer gradient maps (reference/backward.py _backward_op_int, gradmap.py).
 *
 * Input gradient: dX = W^T dY', dY' the op's fold of dY (tp_gm_fold), summed exactly in int32
 * (the fold's bits keep every sum below 2^31), one dX row at a time, handed to the map writer.
 * Weight and bias gradients: exact int64 sums of dY (x - zp) and of dY, then float32. */
#include "tinyprop.h"
#include <string.h>

#include "tp_ref.h"

/* Output channel o's fold parameters: its weight scale's parts. */
static void channel_scale(const tp_weights *w, uint32_t o, uint32_t *m, int32_t *k)
{
    tp_gm_scale_parts(tp_weights_scale(w, o), m, k);
}

#if defined(__ARM_FEATURE_DSP) && !defined(TP_KERNELS_REF_ONLY)
#define FOLD_EXACT8 1 /* channel_or8 finds the largest magnitudes */

/* tp_fold_scan8(q, n, stride, mask, io): channel_or8's pass, with the sums, over n >= 1 positions
 * (n <= FOLD_SUM_RUN), Thumb-2 assembly (Cortex-M4, M7, M33; all 14 core registers, laid out by
 * hand): per position, both words of the 8 channels loaded, masked by the mask's byte (mask
 * NULL: none; else stride / 8 apart) with MSR APSR_g and SEL and stored back, SXTAB16 into the
 * halfword lanes (channels 0 and 2 of a word, then 1 and 3), then each word's bytewise
 * magnitude (SSUB8 from 0 sets GE where v <= 0, SEL takes -v there: -128's is 0x80, 128
 * unsigned) into its running maximum (USUB8, SEL). Masked: eight positions a turn, the first turn
 * entered by TBH so that it takes n mod 8 (8 when 0). io: the maxima m0, m1 (in and out), then
 * the lanes of w0 (0/2, 1/3) and w1 (out). */
void tp_fold_scan8(int8_t *q, uint32_t n, uint32_t stride, const uint8_t *mask, uint32_t *io);
#ifdef __thumb__
#define FOLD_ISA ".thumb\n"
#else
#define FOLD_ISA ".arm\n"
#endif
/* clang-format off */
__asm__(".pushsection .text.tp_fold_scan8,\"ax\",%progbits\n"
        ".syntax unified\n"
        ".thumb\n"
        ".macro tp_fold_acc\n"
        "    add r0, r0, r2\n"
        "    sxtab16 r6, r6, r10\n"
        "    sxtab16 r7, r7, r10, ror #8\n"
        "    sxtab16 r8, r8, r11\n"
        "    sxtab16 r9, r9, r11, ror #8\n"
        "    ssub8 lr, r12, r10\n"
        "    sel lr, lr, r10\n"
        "    usub8 r10, r4, lr\n"
        "    sel r4, r4, lr\n"
        "    ssub8 lr, r12, r11\n"
        "    sel lr, lr, r11\n"
        "    usub8 r11, r5, lr\n"
        "    sel r5, r5, lr\n"
        ".endm\n"
        ".macro tp_fold_masked\n"
        "    ldr r10, [r0]\n"
        "    ldr r11, [r0, #4]\n"
        "    ldrb lr, [r3]\n"
        "    lsl lr, lr, #12\n"
        "    msr APSR_g, lr\n"
        "    sel r11, r11, r12\n"
        "    lsl lr, lr, #4\n"
        "    msr APSR_g, lr\n"
        "    sel r10, r10, r12\n"
        "    str r10, [r0]\n"
        "    str r11, [r0, #4]\n"
        "    add r3, r3, r2, lsr #3\n"
        "    tp_fold_acc\n"
        ".endm\n"
        ".p2align 2\n"
        ".global tp_fold_scan8\n"
        ".hidden tp_fold_scan8\n"
        ".type tp_fold_scan8, %function\n"
        ".thumb_func\n"
        "tp_fold_scan8:\n"
        "    push {r4-r11, lr}\n"
        "    ldr r12, [sp, #36]\n"
        "    ldrd r4, r5, [r12]\n"
        "    movs r6, #0\n"
        "    movs r7, #0\n"
        "    movs r8, #0\n"
        "    movs r9, #0\n"
        "    movs r12, #0\n"
        "    cbnz r3, 4f\n"
        "2:\n"
        "    ldr r10, [r0]\n"
        "    ldr r11, [r0, #4]\n"
        "    tp_fold_acc\n"
        "    subs r1, r1, #1\n"
        "    bne 2b\n"
        "    b 3f\n"
        "4:\n"
        "    and lr, r1, #7\n"
        "    adds r1, r1, #7\n"
        "    lsrs r1, r1, #3\n"
        "    tbh [pc, lr, lsl #1]\n"
        "5:\n"
        "    .hword (1f - 5b) / 2, (17f - 5b) / 2, (16f - 5b) / 2, (15f - 5b) / 2\n"
        "    .hword (14f - 5b) / 2, (13f - 5b) / 2, (12f - 5b) / 2, (11f - 5b) / 2\n"
        "1:\n"
        "    tp_fold_masked\n"
        "11:\n"
        "    tp_fold_masked\n"
        "12:\n"
        "    tp_fold_masked\n"
        "13:\n"
        "    tp_fold_masked\n"
        "14:\n"
        "    tp_fold_masked\n"
        "15:\n"
        "    tp_fold_masked\n"
        "16:\n"
        "    tp_fold_masked\n"
        "17:\n"
        "    tp_fold_masked\n"
        "    subs r1, r1, #1\n"
        "    bne 1b\n"
        "3:\n"
        "    ldr r12, [sp, #36]\n"
        "    strd r4, r5, [r12]\n"
        "    strd r6, r7, [r12, #8]\n"
        "    strd r8, r9, [r12, #16]\n"
        "    pop {r4-r11, pc}\n"
        ".size tp_fold_scan8, .-tp_fold_scan8\n"
        ".purgem tp_fold_acc\n"
        ".purgem tp_fold_masked\n"
        ".popsection\n" FOLD_ISA);
/* clang-format on */
#else
#define FOLD_EXACT8 0 /* channel_or8 finds the ORs of the magnitudes */

/* SWAR on the 4 int8 values of a word: their magnitudes, bytewise (no carries: a byte's
 * magnitude is at most 128, the high bit set only for -128's). */
static inline uint32_t abs4(uint32_t v)
{
    uint32_t s = (v >> 7) & 0x01010101u; /* 1 in each negative byte */
    return (v ^ ((s << 8) - s)) + s;     /* ~v + 1 there */
}
#endif

/* Positions whose int8 sums a halfword lane holds (256 values of at most 128 in magnitude sum
 * within [-32768, 32512]). */
#define FOLD_SUM_RUN 256u

/* The largest magnitude |dY| of each of the 8 int8 channels at q (o .. o + 7) over the
 * positions (FOLD_EXACT8: tp_fold_scan8), or else the OR of them, which has its bit length, into
 * ors (at most 128). With a mask (its byte for these channels at each position, mstride apart),
 * dY's values whose bit is 0 are zeroed first, in place. With sums (FOLD_EXACT8 only; else
 * NULL), the channels' sums of dY as well, after the mask: the scan's halfword lanes, added to
 * the int32 sums every FOLD_SUM_RUN positions. */
static void channel_or8(int8_t *q, uint32_t positions, uint32_t stride, uint32_t *ors,
                        const uint8_t *mask, uint32_t mstride, int32_t *sums)
{
    uint32_t p, m0 = 0, m1 = 0, j;
    uint8_t b[8];
#if FOLD_EXACT8
    uint32_t run, io[6];
    io[0] = 0u;
    io[1] = 0u;
    for (j = 0; j < 8u && sums != NULL; j++) {
        sums[j] = 0;
    }
    for (p = 0; p < positions; p += run) {
        run = positions - p < FOLD_SUM_RUN ? positions - p : FOLD_SUM_RUN;
        tp_fold_scan8(q, run, stride, mask, io);
        q += run * stride;
        mask = mask != NULL ? mask + run * mstride : NULL;
        for (j = 0; j < 4u && sums != NULL; j++) { /* lanes: channels 0/2, 1/3, 4/6, 5/7 */
            uint32_t c = (j >> 1) * 4u + (j & 1u);
            sums[c] += (int16_t)(io[2u + j] & 0xFFFFu);
            sums[c + 2u] += (int16_t)(io[2u + j] >> 16);
        }
    }
    m0 = io[0];
    m1 = io[1];
#else
    (void)sums;
    for (p = 0; p < positions; p++, q += stride) {
        uint32_t w0, w1;
        memcpy(&w0, q, 4u);
        memcpy(&w1, q + 4, 4u);
        if (mask != NULL) {
            tp_gm_mask8(&w0, &w1, *mask);
            memcpy(q, &w0, 4u);
            memcpy(q + 4, &w1, 4u);
            mask += mstride;
        }
        m0 |= abs4(w0);
        m1 |= abs4(w1);
    }
#endif
    memcpy(b, &m0, 4u); /* back in memory order: channel o + j is byte j */
    memcpy(b + 4, &m1, 4u);
    for (j = 0; j < 8u; j++) {
        ors[j] = b[j];
    }
}

/* The largest |dY| of channel o over `positions` pixels of `stride` values. */
static uint32_t channel_max(const tp_gmap *dy, uint32_t o, uint32_t positions, uint32_t stride)
{
    uint32_t p;
    int32_t hi = 0, lo = 0; /* the largest and the smallest value */
    if (dy->bytes == 2u) {
        const int16_t *q = (const int16_t *)dy->q + o;
        for (p = 0; p < positions; p++, q += stride) {
            hi = *q > hi ? *q : hi;
            lo = *q < lo ? *q : lo;
        }
    } else {
        const int8_t *q = (const int8_t *)dy->q + o;
        for (p = 0; p < positions; p++, q += stride) {
            hi = *q > hi ? *q : hi;
            lo = *q < lo ? *q : lo;
        }
    }
    return (uint32_t)(-lo > hi ? -lo : hi);
}

#define FOLD_PENDING 8u

/* Whether b 2^kb > a 2^ka, a and b in [1, 2^40). */
static int bound_above(uint64_t b, int32_t kb, uint64_t a, int32_t ka)
{
    int32_t cb = (int32_t)tp_gm_bitlen(b) + kb, ca = (int32_t)tp_gm_bitlen(a) + ka;
    if (cb != ca) {
        return cb > ca;
    }
    return kb >= ka ? (b << (kb - ka)) > a : b > (a << (ka - kb)); /* as long as the other */
}

/* Whether the fold of b 2^k (b in [1, 2^40), bits <= 15) stays below 2^bits rounded half up
 * (and so half to even): b / 2^sh, sh = top - k, plus one half. */
static uint32_t below_clamp(uint64_t b, int32_t k, int32_t top, uint32_t bits)
{
    int32_t sh = top - k;
    if (sh <= 0) { /* b 2^-sh exactly */
        return tp_gm_bitlen(b) + (uint32_t)(-sh) <= bits;
    }
    if (sh > 40) { /* b < 2^(sh-1): b + 2^(sh-1) < 2^sh */
        return 1u;
    }
    return b + ((uint64_t)1 << (sh - 1)) < (uint64_t)1 << (bits + (uint32_t)sh);
}

/* The fold's c, the largest channel class bitlen(top_o m_o) + k_o over the live channels.
 * int8 maps take 8 channels a pass and only the OR of their magnitudes, of the bit length b of
 * top_o: top_o m_o lies in [2^(b-1) 2^(n-1), 2^b 2^n), n = bitlen(m_o), so the class is
 * b + n + k_o (hi) or one less. c is at least the largest lower bound or exact class seen (cur);
 * a channel whose hi exceeds cur waits (up to FOLD_PENDING of them, else its maximum is taken
 * at once); at the end the waiting ones with hi = cur + 1 take their exact maxima, until one
 * reaches it. Other maps, and channels past the last 8, take their maxima one by one. A channel
 * whose maximum or OR is 0 is marked in f->dead. A mask (int8 maps of 8k channels: every channel
 * in a pass of 8) is applied by those passes, before any maximum is read. With FOLD_EXACT8 the
 * passes give the maxima, and no channel waits. f->no_clamp from the largest top_o m_o 2^k_o
 * (top_o the maximum or OR) over the channels whose class may be c (hi at least cur): only
 * they can round to 2^bits. */
int tp_gm_fold_sums_of(tp_gm_fold *f, const tp_gmap *dy, uint32_t positions, const tp_weights *w,
                       uint32_t n_terms, const uint8_t *mask, tp_gm_sums_fn done, const void *ctx)
{
    int summing = FOLD_EXACT8 && done != NULL && dy->bytes == 1u && w->n_out % 8u == 0u;
    int32_t sums8[8];
    uint32_t o, m, live = 0, tops[8], eight = 0, n_wait = 0, i;
    uint16_t wait[FOLD_PENDING];
    int32_t k, cur = 0, hi_wait[FOLD_PENDING], bk = 0;
    uint64_t bm = 0u; /* the largest bound, bm 2^bk */
    for (i = 0; i < TP_GM_DEAD_C / 32u; i++) {
        f->dead[i] = 0u;
    }
    for (o = 0; o < w->n_out; o++) {
        uint32_t top;
        int32_t lo, hi;
        if ((o & 7u) == 0u) { /* int8 maps: 8 channels a pass, 4 in a word */
            eight = dy->bytes == 1u && o + 8u <= w->n_out;
            if (eight) {
                channel_or8((int8_t *)dy->q + o, positions, w->n_out, tops,
                            mask != NULL ? mask + o / 8u : NULL, w->n_out / 8u,
                            summing ? sums8 : NULL);
                if (summing) {
                    done(ctx, o, sums8, 8u);
                }
            }
        }
        top = eight ? tops[o & 7u] : channel_max(dy, o, positions, w->n_out);
        if (top == 0u) {
            if (o < TP_GM_DEAD_C) {
                f->dead[o >> 5] |= 1u << (o & 31u);
            }
            continue;
        }
        channel_scale(w, o, &m, &k);
        if (m == 0u) {
            continue;
        }
        if (eight && FOLD_EXACT8) {
            lo = hi = tp_gm_channel_class(top, m, k);
        } else if (eight) {
            hi = (int32_t)(tp_gm_bitlen32(top) + tp_gm_bitlen32(m)) + k;
            lo = hi - 1;
            if (n_wait == FOLD_PENDING) { /* no room: exactly now */
                lo = hi = tp_gm_channel_class(channel_max(dy, o, positions, w->n_out), m, k);
            }
        } else {
            lo = hi = tp_gm_channel_class(top, m, k);
        }
        if (!live || lo > cur) {
            cur = lo;
            for (i = 0; i < n_wait;) { /* those that can no longer raise it leave */
                if (hi_wait[i] <= cur) {
                    n_wait--;
                    wait[i] = wait[n_wait];
                    hi_wait[i] = hi_wait[n_wait];
                } else {
                    i++;
                }
            }
        }
        live = 1u;
        if (hi >= cur && (bm == 0u || bound_above((uint64_t)top * m, k, bm, bk))) {
            bm = (uint64_t)top * m;
            bk = k;
        }
        if (hi > cur) {
            wait[n_wait] = (uint16_t)o;
            hi_wait[n_wait++] = hi;
        }
    }
    for (i = 0; i < n_wait; i++) { /* hi = cur + 1: the exact class is cur or that */
        if (hi_wait[i] > cur) {
            int32_t cls;
            channel_scale(w, wait[i], &m, &k);
            cls = tp_gm_channel_class(channel_max(dy, wait[i], positions, w->n_out), m, k);
            cur = cls > cur ? cls : cur;
        }
    }
    tp_gm_fold_init(f, dy->e, n_terms, cur, live);
    f->no_clamp = live ? below_clamp(bm, bk, f->top, f->bits) : 0u;
    return summing;
}

void tp_gm_fold_of(tp_gm_fold *f, const tp_gmap *dy, uint32_t positions, const tp_weights *w,
                   uint32_t n_terms, const uint8_t *mask)
{
    (void)tp_gm_fold_sums_of(f, dy, positions, w, n_terms, mask, NULL, NULL);
}

/* Pixel (oy, ox)'s dY' values, n_out of them, into fy. */
static void fold_pixel(const tp_gm_fold *f, const tp_gmap *dy, const tp_weights *w, uint32_t at,
                       int16_t *fy)
{
    uint32_t o, m;
    int32_t k;
    for (o = 0; o < w->n_out; o++) {
        channel_scale(w, o, &m, &k);
        fy[o] = (int16_t)tp_gm_fold_one(f, tp_gm_get(dy, at + o), m, k);
    }
}

/* The output rows and columns a dX row / column meets through tap t: o = (i + pad - t) / stride
 * when that divides and lies in [0, n_out); -1 otherwise. */
static int32_t tap_source(int32_t i, uint32_t pad, uint32_t t, uint32_t stride, int32_t n_out)
{
    int32_t num = i + (int32_t)pad - (int32_t)t;
    if (num < 0 || num % (int32_t)stride != 0 || num / (int32_t)stride >= n_out) {
        return -1;
    }
    return num / (int32_t)stride;
}

void tp_conv2d_input_grad_q(const tp_conv_params *p, const tp_shape *in_shape,
                            const tp_shape *out_shape, const tp_weights *w, const tp_gm_fold *f,
                            const tp_gmap *dy, tp_gm_writer *dx, void *scratch)
{
    uint32_t iw = (uint32_t)in_shape->w, ic = (uint32_t)in_shape->c, oc = (uint32_t)out_shape->c;
    int32_t *acc = (int32_t *)scratch;
    int16_t *fy = (int16_t *)(void *)(acc + iw * ic);
    int32_t y;
    uint32_t kh, kw, o, ch, step;
    for (y = 0; y < in_shape->h; y++) {
        for (ch = 0; ch < iw * ic; ch++) {
            acc[ch] = 0;
        }
        for (kh = 0; kh < p->k[0] && f->live; kh++) {
            int32_t oy = tap_source(y, p->pad[0], kh, p->stride[0], out_shape->h), ox;
            if (oy < 0) {
                continue;
            }
            for (ox = 0; ox < out_shape->w; ox++) {
                fold_pixel(f, dy, w, ((uint32_t)oy * (uint32_t)out_shape->w + (uint32_t)ox) * oc,
                           fy);
                for (kw = 0; kw < p->k[1]; kw++) {
                    int32_t x = ox * p->stride[1] + (int32_t)kw - p->pad[1];
                    int32_t *a = acc + (uint32_t)x * ic;
                    if (x < 0 || x >= in_shape->w) {
                        continue;
                    }
                    for (o = 0; o < oc; o++) {
                        const int8_t *row = tp_weights_row(w, o, &step) + (kh * p->k[1] + kw) * ic;
                        int32_t g = fy[o];
                        for (ch = 0; ch < ic; ch++) {
                            a[ch] += row[ch] * g;
                        }
                    }
                }
            }
        }
        tp_gm_row_i32(dx, (uint32_t)y, acc);
    }
}

void tp_depthwise_conv2d_input_grad_q(const tp_conv_params *p, const tp_shape *in_shape,
                                      const tp_shape *out_shape, const tp_weights *w,
                                      const tp_gm_fold *f, const tp_gmap *dy, tp_gm_writer *dx,
                                      void *scratch)
{
    uint32_t iw = (uint32_t)in_shape->w, ic = (uint32_t)in_shape->c, oc = (uint32_t)out_shape->c;
    uint32_t mult = (uint32_t)p->depth_multiplier, kh, kw, o, i, step, m;
    int32_t *acc = (int32_t *)scratch, y, k;
    for (y = 0; y < in_shape->h; y++) {
        for (i = 0; i < iw * ic; i++) {
            acc[i] = 0;
        }
        for (kh = 0; kh < p->k[0] && f->live; kh++) {
            int32_t oy = tap_source(y, p->pad[0], kh, p->stride[0], out_shape->h), x;
            if (oy < 0) {
                continue;
            }
            for (x = 0; x < in_shape->w; x++) {
                for (kw = 0; kw < p->k[1]; kw++) {
                    int32_t ox = tap_source(x, p->pad[1], kw, p->stride[1], out_shape->w);
                    if (ox < 0) {
                        continue;
                    }
                    for (o = 0; o < oc; o++) {
                        uint32_t at = ((uint32_t)oy * (uint32_t)out_shape->w + (uint32_t)ox) * oc +
                                      o;
                        const int8_t *wo = tp_weights_row(w, o, &step);
                        channel_scale(w, o, &m, &k);
                        acc[(uint32_t)x * ic + o / mult] += wo[(kh * p->k[1] + kw) * step] *
                                                            tp_gm_fold_one(f, tp_gm_get(dy, at), m,
                                                                           k);
                    }
                }
            }
        }
        tp_gm_row_i32(dx, (uint32_t)y, acc);
    }
}

void tp_fully_connected_input_grad_q(const tp_weights *w, const tp_gm_fold *f, const tp_gmap *dy,
                                     tp_gm_writer *dx, void *scratch)
{
    int32_t *acc = (int32_t *)scratch;
    int16_t *fy = (int16_t *)(void *)(acc + w->row_len);
    uint32_t i, o, step;
    for (i = 0; i < w->row_len; i++) {
        acc[i] = 0;
    }
    if (f->live) {
        fold_pixel(f, dy, w, 0u, fy);
        for (o = 0; o < w->n_out; o++) {
            const int8_t *row = tp_weights_row(w, o, &step);
            for (i = 0; i < w->row_len; i++) {
                acc[i] += row[i] * fy[o];
            }
        }
    }
    tp_gm_row_i32(dx, 0u, acc);
}

/* sum over output positions of dY(o) (x - zp) through tap (kh, kw) of channel ch */
static int64_t tap_sum(const tp_conv_params *p, const tp_shape *in_shape, const int8_t *x,
                       int32_t zp, const tp_shape *out_shape, const tp_gmap *dy, uint32_t o,
                       uint32_t kh, uint32_t kw, uint32_t ch)
{
    uint32_t ow = (uint32_t)out_shape->w, oc = (uint32_t)out_shape->c;
    uint32_t iw = (uint32_t)in_shape->w, ic = (uint32_t)in_shape->c, oy, ox, y0, y1, x0, x1;
    int64_t s = 0;
    tp_tap_range(kh, p->stride[0], p->pad[0], (uint32_t)in_shape->h, (uint32_t)out_shape->h, &y0,
                 &y1);
    tp_tap_range(kw, p->stride[1], p->pad[1], iw, ow, &x0, &x1);
    for (oy = y0; oy < y1; oy++) {
        const int8_t *xp = x +
                           ((oy * p->stride[0] + kh - p->pad[0]) * iw + x0 * p->stride[1] + kw -
                            p->pad[1]) *
                               ic +
                           ch;
        for (ox = x0; ox < x1; ox++) {
            s += (int64_t)tp_gm_get(dy, (oy * ow + ox) * oc + o) * ((int32_t)*xp - zp);
            xp += p->stride[1] * ic;
        }
    }
    return s;
}

void tp_conv2d_weight_grad_q(const tp_conv_params *p, const tp_shape *in_shape, const int8_t *x,
                             int32_t x_zp, float x_scale, const tp_shape *out_shape,
                             const tp_gmap *dy, uint32_t o, float *row, const uint32_t *x_live)
{
    uint32_t ic = (uint32_t)in_shape->c, n = p->k[0] * p->k[1] * ic, k;
    (void)x_live;             /* the definition: every input summed */
    for (k = 0; k < n; k++) { /* (kh, kw, ch) raster, the row's layout */
        row[k] = tp_gm_to_f32(tap_sum(p, in_shape, x, x_zp, out_shape, dy, o, k / ic / p->k[1],
                                      (k / ic) % p->k[1], k % ic),
                              dy->e, x_scale);
    }
}

void tp_depthwise_conv2d_weight_grad_q(const tp_conv_params *p, const tp_shape *in_shape,
                                       const int8_t *x, int32_t x_zp, float x_scale,
                                       const tp_shape *out_shape, const tp_gmap *dy, uint32_t o,
                                       float *row)
{
    uint32_t n = p->k[0] * p->k[1], k, ch = o / (uint32_t)p->depth_multiplier;
    for (k = 0; k < n; k++) {
        row[k] = tp_gm_to_f32(tap_sum(p, in_shape, x, x_zp, out_shape, dy, o, k / p->k[1],
                                      k % p->k[1], ch),
                              dy->e, x_scale);
    }
}

void tp_fully_connected_weight_grad_q(uint32_t n_in, const int8_t *x, int32_t x_zp, float x_scale,
                                      const tp_gmap *dy, uint32_t o, float *row)
{
    uint32_t k;
    int64_t g = tp_gm_get(dy, o);
    for (k = 0; k < n_in; k++) {
        row[k] = tp_gm_to_f32(g * ((int32_t)x[k] - x_zp), dy->e, x_scale);
    }
}

/* Sums of n values `stride` apart, n <= 2^15: exact in int32 (|q| <= 2^15); 4 a step. */
static int32_t strided_sum16(const int16_t *q, uint32_t n, uint32_t stride)
{
    uint32_t k = 0, s2 = 2u * stride, s3 = 3u * stride;
    int32_t t = 0;
    for (; k + 4u <= n; k += 4u, q += 4u * stride) {
        t += q[0] + q[stride] + q[s2] + q[s3];
    }
    for (; k < n; k++, q += stride) {
        t += *q;
    }
    return t;
}

static int32_t strided_sum8(const int8_t *q, uint32_t n, uint32_t stride)
{
    uint32_t k = 0, s2 = 2u * stride, s3 = 3u * stride, s4 = 4u * stride;
    int32_t t = 0;
    for (; k + 8u <= n; k += 8u, q += 8u * stride) { /* 8 a step: two runs of 4 */
        const int8_t *r = q + s4;
        t += q[0] + q[stride] + q[s2] + q[s3] + r[0] + r[stride] + r[s2] + r[s3];
    }
    for (; k + 4u <= n; k += 4u, q += 4u * stride) {
        t += q[0] + q[stride] + q[s2] + q[s3];
    }
    for (; k < n; k++, q += stride) {
        t += *q;
    }
    return t;
}

void tp_bias_sums_q(const tp_gmap *dy, uint32_t positions, uint32_t n_out, uint32_t o0, uint32_t nc,
                    int64_t *sums)
{
    uint32_t i, j, n;
    for (j = 0; j < nc; j++) {
        int64_t s = 0; /* the int32 sums of 2^15 positions at a time */
        for (i = 0; i < positions; i += n) {
            size_t at;
            n = positions - i > 32768u ? 32768u : positions - i;
            at = (size_t)i * n_out + o0 + j;
            s += dy->bytes == 2u ? strided_sum16((const int16_t *)dy->q + at, n, n_out)
                                 : strided_sum8((const int8_t *)dy->q + at, n, n_out);
        }
        sums[j] = s;
    }
}
