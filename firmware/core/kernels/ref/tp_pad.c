/* tp_pad.c - reference PAD with the zero point (reference/forward.py). */
#include "tinyprop.h"
#include <string.h>

#include "tp_ref.h"

void tp_pad_s8(const tp_pad_params *p, const tp_shape *in_shape, const int8_t *in,
               const tp_shape *out_shape, int8_t *out)
{
    int32_t h = in_shape->h, w = in_shape->w, c = in_shape->c;
    int32_t ow = out_shape->w;
    int32_t y;
    memset(out, (int8_t)p->value, (size_t)out_shape->h * (size_t)ow * (size_t)c);
    for (y = 0; y < h; y++) {
        memcpy(out + ((y + p->before[0]) * ow + p->before[1]) * c, in + y * w * c,
               (size_t)w * (size_t)c);
    }
}
