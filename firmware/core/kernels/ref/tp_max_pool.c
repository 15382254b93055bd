/* tp_max_pool.c - reference MAX_POOL_2D (reference/forward.py max_pool): TFLite's int8
 * reference MaxPool, each window's largest in-image input clamped to the activation range. */
#include "tinyprop.h"
#include "tp_ref.h"

void tp_max_pool2d_s8(const tp_pool_params *p, const tp_shape *in_shape, const int8_t *in,
                      const tp_shape *out_shape, int8_t *out)
{
    int32_t oy, ox, ch, c = in_shape->c;
    for (oy = 0; oy < out_shape->h; oy++) {
        for (ox = 0; ox < out_shape->w; ox++) {
            for (ch = 0; ch < c; ch++) {
                int32_t at = tp_pool_argmax(p, in_shape, in, oy, ox, ch);
                out[(oy * out_shape->w + ox) * c + ch] = tp_clamp_act(in[at], p->act_min,
                                                                      p->act_max);
            }
        }
    }
}
