/* tp_add.c - reference ADD (reference/forward.py): both inputs rescaled to a common scale. */
#include "tinyprop.h"
#include "tp_ref.h"

void tp_add_s8(const tp_add_params *p, uint32_t n, const int8_t *in1, const int8_t *in2,
               int8_t *out)
{
    int64_t scale_up = (int64_t)1 << p->left_shift;
    uint32_t i;
    for (i = 0; i < n; i++) {
        int64_t s1 = tp_mbqm((in1[i] - p->in1_zp) * scale_up, p->mult[1], p->shift[1]);
        int64_t s2 = tp_mbqm((in2[i] - p->in2_zp) * scale_up, p->mult[2], p->shift[2]);
        out[i] = tp_clamp_act(tp_mbqm(s1 + s2, p->mult[0], p->shift[0]) + p->out_zp, p->act_min,
                              p->act_max);
    }
}
