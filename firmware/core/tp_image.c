/* tp_image.c - a camera frame fitted to the model's input (tp_image.h), bit for bit as
 * tinyprop.data.image does it in NumPy. */
#include "tp_image.h"

#include <stddef.h>

/* The source pixels [*first, *last] an output pixel i of n covers on an axis whose window is
 * r pixels long: in units of 1 / n of a source pixel, source pixel j spans [j n, (j + 1) n) and
 * the output pixel [i r, (i + 1) r). */
static void span(uint32_t i, uint32_t n, uint32_t r, uint32_t *first, uint32_t *last)
{
    *first = (uint32_t)((uint64_t)i * r / n);
    *last = (uint32_t)(((uint64_t)(i + 1u) * r - 1u) / n);
}

/* How much of output pixel i (of n, window r) source pixel j covers, in units of 1 / n. */
static uint64_t overlap(uint32_t i, uint32_t n, uint32_t r, uint32_t j)
{
    uint64_t lo = (uint64_t)i * r, hi = lo + r, a = (uint64_t)j * n, b = a + n;
    return (hi < b ? hi : b) - (lo > a ? lo : a);
}

tp_status tp_frame_fit(const tp_frame *frame, uint8_t *out, uint32_t out_w, uint32_t out_h,
                       uint32_t out_c)
{
    uint32_t cw, ch, x0, y0, x, y, c, n_in;
    uint64_t area;
    if (frame == NULL || frame->pixels == NULL || out == NULL || out_w == 0u || out_h == 0u ||
        frame->width == 0u || frame->height == 0u ||
        (frame->channels != 1u && frame->channels != 3u) || (out_c != 1u && out_c != 3u) ||
        frame->stride < frame->width * frame->channels) {
        return TP_ERR_ARG;
    }
    /* the largest centred window of aspect out_w : out_h */
    if ((uint64_t)frame->height * out_w <= (uint64_t)frame->width * out_h) {
        ch = frame->height;
        cw = (uint32_t)((uint64_t)frame->height * out_w / out_h);
    } else {
        cw = frame->width;
        ch = (uint32_t)((uint64_t)frame->width * out_h / out_w);
    }
    if (cw == 0u || ch == 0u) {
        return TP_ERR_ARG;
    }
    x0 = (frame->width - cw) / 2u;
    y0 = (frame->height - ch) / 2u;
    n_in = frame->channels;
    area = (uint64_t)cw * ch;
    for (y = 0; y < out_h; y++) {
        uint32_t j0, j1;
        span(y, out_h, ch, &j0, &j1);
        for (x = 0; x < out_w; x++) {
            uint32_t i0, i1, i, j, v[3];
            uint64_t sum[3] = {0u, 0u, 0u};
            span(x, out_w, cw, &i0, &i1);
            for (j = j0; j <= j1; j++) {
                const uint8_t *row = frame->pixels + (size_t)(y0 + j) * frame->stride;
                uint64_t wy = overlap(y, out_h, ch, j);
                for (i = i0; i <= i1; i++) {
                    uint64_t w = wy * overlap(x, out_w, cw, i);
                    for (c = 0; c < n_in; c++) {
                        sum[c] += w * row[(x0 + i) * n_in + c];
                    }
                }
            }
            for (c = 0; c < n_in; c++) {
                v[c] = (uint32_t)((sum[c] + area / 2u) / area);
            }
            if (out_c == n_in) {
                for (c = 0; c < n_in; c++) {
                    out[(y * out_w + x) * out_c + c] = (uint8_t)v[c];
                }
            } else if (out_c == 1u) { /* RGB to luma */
                out[y * out_w + x] =
                    (uint8_t)((19595u * v[0] + 38470u * v[1] + 7471u * v[2] + 32768u) >> 16);
            } else { /* gray to RGB */
                out[(y * out_w + x) * 3u] = (uint8_t)v[0];
                out[(y * out_w + x) * 3u + 1u] = (uint8_t)v[0];
                out[(y * out_w + x) * 3u + 2u] = (uint8_t)v[0];
            }
        }
    }
    return TP_OK;
}
