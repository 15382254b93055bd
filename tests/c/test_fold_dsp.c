/* test_fold_dsp.c - the fold dY' = round(q m / 2^sh) (half to even, clamped to +-(2^bits - 1))
 * of the Cortex-M DSP input-gradient kernels, value by value, for tests/test_kernels_dsp.py:
 * built with TP_KERNELS_DSP_EMULATION under ASan and UBSan, it runs the 1x1 and the 3x3
 * depthwise input gradients (kernels/arm/tp_*_input_grad_arm.c) and the reference ones on maps
 * whose dX is dY' itself: the 1x1 weights the identity, the depthwise ones only the centre tap,
 * 1. dX is written to an int16 map, whose 15 bits hold every dY' without a shift, so each value
 * of the fold is seen, not only what survives the rounding of a map.
 *
 *   test_fold_dsp     (this machine: the build_program driver, the intrinsics emulated)
 *   make -C boards/qemu-m4 APP=$PWD/tests/c/test_fold_dsp.c APP_ENTRY=fold_test_main
 *                     (the Cortex-M4's own instructions: SMMULR, SMLAD, SSAT, QSUB16)
 *
 * Writes one summary line (on a board, on its link; here on stdout), the first mismatches
 * before it, and exits 1 when there are any.
 *
 * The cases: dY int8 (every q of -128..127 at every channel, stride 1) and int16 (q = odd 2^s, s up
 * to 14, both signs: every count of trailing zeros, hence every kind of tie); fold bits 15 (the
 * only ones SMMULR's int8 fold takes) and 11; for each shift sh from -3 to 42 the weight scales
 * of 16 channels m 2^-sh, m of the mantissas with 0..15 or 8..23 trailing zeros, or one
 * channel's scale 0: every path of the folds (SMMULR where no q m can be halfway, the int32
 * re-fold of channels that may meet a tie, the int64 and the general one, saturation, all
 * zero). Each dX equals the reference kernel's and the value computed here from its definition;
 * a case whose every dY' lies within +-(2^bits - 1) by the definition is run again with the
 * fold's no_clamp set (the kernels' paths without the clamp). Then tp_gm_fold_of's no_clamp at
 * its edge: a channel whose largest |dY| 127 folds to 32767.74, which rounds to 2^15 (the clamp
 * needed: no_clamp 0), or 126 (32509.7: 1), either sign; the DSP kernels with that fold equal
 * the reference ones.
 */
#include <string.h>

#include "kernels/tp_kernels.h"
#include "tp_gradmap.h"
#include "tp_le.h"

#include "tp_test_out.h"

#define H 16
#define W 16
#define C 16
#define N (H * W * C)

static uint8_t dy_buf[TP_GM_HEADER + 2 * N], dx_ref[TP_GM_HEADER + 2 * N],
    dx_dsp[TP_GM_HEADER + 2 * N];
static int32_t scratch[H * W * C];
static uint8_t shifts[H];

/* round(q m / 2^sh) half to even, clamped to +-(2^bits - 1), from the definition. */
static int32_t fold_def(int32_t q, uint32_t m, int32_t sh, uint32_t bits)
{
    int64_t v = (int64_t)q * (int64_t)m, lim = ((int64_t)1 << bits) - 1, r;
    if (sh <= 0) {
        r = v * ((int64_t)1 << -sh);
    } else if (sh >= 62) {
        r = 0;
    } else {
        int64_t d = (int64_t)1 << sh, fl = v >= 0 ? v / d : -((-v + d - 1) / d), rem = v - fl * d;
        r = fl + ((2 * rem > d || (2 * rem == d && (fl & 1))) ? 1 : 0);
    }
    return (int32_t)(r > lim ? lim : r < -lim ? -lim : r);
}

static int32_t q_at(uint32_t bytes, uint32_t p, uint32_t c)
{
    uint32_t k = (p + 37u * c) % (H * W), s = k % 15u, odd = 2u * (k / 15u) + 1u;
    int32_t v;
    if (bytes == 1u) {
        return (int32_t)((p + 37u * c) & 0xFFu) - 128;
    }
    v = (int32_t)((odd << s) < 32768u ? odd << s : (odd % (1u << (15u - s))) << s);
    return (k / 15u) & 1u ? -v : v;
}

typedef void (*grad_fn)(const tp_conv_params *, const tp_shape *, const tp_shape *,
                        const tp_weights *, const tp_gm_fold *, const tp_gmap *, tp_gm_writer *,
                        void *);

static void run(grad_fn fn, const tp_conv_params *p, const tp_shape *in, const tp_shape *out,
                const tp_weights *w, const tp_gm_fold *f, const tp_gmap *dy, uint8_t *buf)
{
    tp_gm_writer wr;
    memset(buf, 0x5A, TP_GM_HEADER + 2 * N);
    memset(scratch, 0xA5, sizeof scratch);
    tp_gm_begin(&wr, buf, TP_GRAD_INT16, H, W * C, 0u, shifts, f->e);
    fn(p, in, out, w, f, dy, &wr, scratch);
    tp_gm_end(&wr);
}

/* The mismatches of a case's two dX maps (dx_ref, dx_dsp) with each other and with the fold's
 * definition; the first few (bad_before: those already reported) written out. */
static uint32_t compare(uint32_t bytes, uint32_t bits, uint32_t kind, int32_t sh, const uint32_t *m,
                        uint32_t bad_before)
{
    tp_gmap a = tp_gm_at(dx_ref, TP_GRAD_INT16), b = tp_gm_at(dx_dsp, TP_GRAD_INT16);
    static const char *const names[3] = {"1x1", "depthwise s1", "depthwise s2"};
    uint32_t i, bad = 0;
    for (i = 0; i < N; i++) {
        uint32_t px = i / C, y = px / W, x = px % W, ch = i % C;
        int32_t want = 0, got = tp_gm_get(&b, i);
        if (kind != 2u) {
            want = fold_def(q_at(bytes, px, ch), m[ch], sh, bits);
        } else if (y % 2u == 0u && x % 2u == 0u) { /* stride 2: dY 8 x 8 */
            want = fold_def(q_at(bytes, y / 2u * (W / 2u) + x / 2u, ch), m[ch], sh, bits);
        }
        if (got != tp_gm_get(&a, i) || got != want || a.e != 0 || b.e != 0) {
            if (bad_before + bad++ < 8u) {
                put_text(bytes == 1u ? "dY int8, bits " : "dY int16, bits ");
                put_int((int32_t)bits);
                put_text(", ");
                put_text(names[kind]);
                put_text(", sh ");
                put_int(sh);
                put_text(", m ");
                put_int((int32_t)m[ch]);
                put_text(", y ");
                put_int((int32_t)y);
                put_text(" x ");
                put_int((int32_t)x);
                put_text(" channel ");
                put_int((int32_t)ch);
                put_text(": DSP ");
                put_int(got);
                put_text(" (e ");
                put_int(b.e);
                put_text("), reference ");
                put_int(tp_gm_get(&a, i));
                put_text(" (e ");
                put_int(a.e);
                put_text("), by definition ");
                put_int(want);
                put_text("\n");
            }
        }
    }
    return bad;
}

/* Whether every dY' of a case lies within +-(2^bits - 1) before the clamp. */
static int within(uint32_t bytes, uint32_t bits, int32_t sh, const uint32_t *m)
{
    uint32_t i, c;
    for (i = 0; i < H * W; i++) {
        for (c = 0; c < C; c++) {
            int32_t v = fold_def(q_at(bytes, i, c), m[c], sh, 30u);
            if (v >= (1 << bits) || v <= -(1 << bits)) {
                return 0;
            }
        }
    }
    return 1;
}

/* The weights and parameters of kind 0 (1x1), 1 (depthwise, stride 1) or 2 (stride 2). */
static void layer_of(uint32_t kind, tp_conv_params *p, tp_weights *w, tp_shape *out,
                     const int8_t *pw_w, const int8_t *dw_w, const uint8_t *scales)
{
    uint32_t s = kind == 2u ? 2u : 1u, k = kind ? 3u : 1u;
    memset(p, 0, sizeof *p);
    memset(w, 0, sizeof *w);
    p->stride[0] = p->stride[1] = (uint8_t)s;
    p->k[0] = p->k[1] = (uint8_t)k;
    p->pad[0] = p->pad[1] = kind ? 1u : 0u;
    p->depth_multiplier = 1;
    w->data = kind ? dw_w : pw_w;
    w->n_out = C;
    w->row_len = kind ? 9u : C;
    w->depthwise = kind ? 1u : 0u;
    w->scales = scales;
    w->n_scales = C;
    out->h = out->w = (int32_t)(H / s); /* stride 2: dY 8 x 8 */
    out->c = C;
}

/* tp_gm_fold_of's no_clamp at its edge (above); returns the mismatches, cases counted. */
static uint32_t edge_cases(const int8_t *pw_w, const int8_t *dw_w, uint32_t *cases)
{
    static const int8_t top_q[4] = {127, -127, 126, -126};
    uint8_t scales[4 * C];
    uint32_t v, i, c, kind, bad = 0;
    tp_wr_f32(scales, 132103.0f * tp_gm_pow2(-20)); /* channel 0: sh 15 */
    for (c = 1; c < C; c++) {
        tp_wr_f32(scales + 4u * c, tp_gm_pow2(-30)); /* far below: every fold 0 */
    }
    for (v = 0; v < 4u; v++) {
        tp_gmap dy;
        memset(dy_buf, 0, TP_GM_HEADER);
        dy = tp_gm_at(dy_buf, TP_GRAD_INT8);
        for (i = 0; i < H * W; i++) {
            for (c = 0; c < C; c++) { /* channel 0: its top once, else even values below 64 */
                tp_gm_set(&dy, i * C + c,
                          c != 0u   ? q_at(1u, i, c)
                          : i == 5u ? top_q[v]
                                    : (int32_t)(2u * i % 64u));
            }
        }
        for (kind = 0; kind < 3u; kind++) {
            tp_conv_params p;
            tp_weights w;
            tp_gm_fold f;
            tp_shape in = {H, W, C}, out;
            grad_fn ref = kind ? tp_depthwise_conv2d_input_grad_q : tp_conv2d_input_grad_q;
            grad_fn dsp = kind ? tp_arm_depthwise_conv2d_input_grad_q : tp_arm_conv2d_input_grad_q;
            layer_of(kind, &p, &w, &out, pw_w, dw_w, scales);
            tp_gm_fold_of(&f, &dy, (uint32_t)(out.h * out.w), &w, C, NULL);
            run(ref, &p, &in, &out, &w, &f, &dy, dx_ref);
            run(dsp, &p, &in, &out, &w, &f, &dy, dx_dsp);
            (*cases)++;
            if (f.no_clamp != (v >= 2u ? 1u : 0u) || f.bits != 15u ||
                memcmp(dx_ref, dx_dsp, TP_GM_HEADER + 2 * N) != 0) {
                if (bad++ < 8u) {
                    put_text("fold_of's edge, top ");
                    put_int(top_q[v]);
                    put_text(", kind ");
                    put_int((int32_t)kind);
                    put_text(": no_clamp ");
                    put_int((int32_t)f.no_clamp);
                    put_text(", the DSP kernel's dX ");
                    put_text(memcmp(dx_ref, dx_dsp, TP_GM_HEADER + 2 * N) ? "differs\n"
                                                                          : "matches\n");
                }
            }
        }
    }
    return bad;
}

int fold_test_main(void);

int fold_test_main(void)
{
    static int8_t pw_w[C * C], dw_w[9 * C];
    uint8_t scales[4 * C];
    uint32_t cases = 0, bad = 0, bytes, bits, group, kind, i, c, m[C];
    int32_t sh;
#ifdef APP_ENTRY
    (void)tp_board_init();
#endif
    for (i = 0; i < C; i++) {
        pw_w[i * C + i] = 1;
        dw_w[4 * C + i] = 1;
    }
    for (bytes = 1u; bytes <= 2u; bytes++) {
        tp_gmap dy = tp_gm_at(dy_buf, bytes == 1u ? TP_GRAD_INT8 : TP_GRAD_INT16);
        for (i = 0; i < H * W; i++) {
            for (c = 0; c < C; c++) {
                tp_gm_set(&dy, i * C + c, q_at(bytes, i, c));
            }
        }
        for (bits = 11u; bits <= 15u; bits += 4u) {
            for (group = 0; group < 3u; group++) {
                for (c = 0; c < C; c++) { /* trailing zeros c (+ 8), group 2: channel 5 zero */
                    uint32_t tz = c + (group == 1u ? 8u : 0u);
                    m[c] = tz >= 23u ? 1u << 23 : (1u << 23) | (1u << tz);
                    m[c] = group == 2u && c == 5u ? 0u : m[c];
                }
                for (sh = -3; sh <= 42; sh++) {
                    tp_gm_fold f;
                    memset(&f, 0, sizeof f); /* no channel marked dead */
                    f.top = 0;
                    f.e = 0;
                    f.bits = bits;
                    f.live = 1u;
                    for (c = 0; c < C; c++) {
                        tp_wr_f32(scales + 4u * c, (float)m[c] * tp_gm_pow2(-sh));
                    }
                    uint32_t unclamped = within(bytes, bits, sh, m);
                    for (kind = 0; kind < 3u; kind++) { /* 1x1; depthwise stride 1, 2 */
                        tp_conv_params p;
                        tp_weights w;
                        grad_fn ref = kind ? tp_depthwise_conv2d_input_grad_q
                                           : tp_conv2d_input_grad_q;
                        grad_fn dsp = kind ? tp_arm_depthwise_conv2d_input_grad_q
                                           : tp_arm_conv2d_input_grad_q;
                        tp_shape in = {H, W, C}, out;
                        layer_of(kind, &p, &w, &out, pw_w, dw_w, scales);
                        run(ref, &p, &in, &out, &w, &f, &dy, dx_ref);
                        run(dsp, &p, &in, &out, &w, &f, &dy, dx_dsp);
                        bad += compare(bytes, bits, kind, sh, m, bad);
                        cases++;
                        if (unclamped) { /* again, the clamp left out */
                            f.no_clamp = 1u;
                            run(dsp, &p, &in, &out, &w, &f, &dy, dx_dsp);
                            f.no_clamp = 0u;
                            bad += compare(bytes, bits, kind, sh, m, bad);
                            cases++;
                        }
                    }
                }
            }
        }
    }
    bad += edge_cases(pw_w, dw_w, &cases);
    put_text("fold cases ");
    put_int((int32_t)cases);
    return put_summary(", values ", cases * N, bad);
}

#ifndef APP_ENTRY
int main(void)
{
    return fold_test_main();
}
#endif
