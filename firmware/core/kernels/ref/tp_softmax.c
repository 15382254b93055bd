/* tp_softmax.c - reference int8 SOFTMAX (quant.softmax_int8): gemmlowp fixed point. */
#include "tinyprop.h"
#include "tp_ref.h"

/* exp(beta * scale * diff) in Q0.31 for diff = x - max <= 0 */
static int32_t softmax_exp(int32_t diff, int32_t mult, int32_t left_shift)
{
    int32_t scaled = tp_wrap32(diff * ((int64_t)1 << left_shift));
    return tp_exp_on_negative_values((int32_t)tp_srdhm(scaled, mult));
}

void tp_softmax_s8(const tp_softmax_params *p, uint32_t rows, uint32_t depth, const int8_t *in,
                   int8_t *out)
{
    uint32_t r, j;
    for (r = 0; r < rows; r++) {
        const int8_t *x = in + r * depth;
        int8_t *y = out + r * depth;
        int32_t mx = -128, total = 0, scale, bits;
        for (j = 0; j < depth; j++) {
            mx = x[j] > mx ? x[j] : mx;
        }
        /* each exp is computed twice (sum, then output): no per-row scratch buffer */
        for (j = 0; j < depth; j++) {
            if (x[j] - mx >= p->diff_min) {
                int32_t e = softmax_exp(x[j] - mx, p->mult, p->left_shift);
                total = tp_wrap32((int64_t)total +
                                  tp_rounding_divide_by_pot(e, TP_SOFTMAX_ACCUM_INT_BITS));
            }
        }
        scale = tp_get_reciprocal(total, TP_SOFTMAX_ACCUM_INT_BITS, &bits);
        for (j = 0; j < depth; j++) {
            int64_t v = -128;
            if (x[j] - mx >= p->diff_min) {
                int32_t e = softmax_exp(x[j] - mx, p->mult, p->left_shift);
                v = tp_rounding_divide_by_pot(tp_srdhm(scale, e), bits + 31 - 8) - 128;
            }
            y[j] = tp_clamp_act(v, -128, 127);
        }
    }
}
