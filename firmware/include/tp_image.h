/* tp_image.h - a camera frame fitted to a model's input, exactly as tinyprop's host fits a photo
 * (tinyprop.data.image, docs/your-data.md "Images"): the board and the host feed a model the
 * same pixels, so what a board learns from its camera matches what the host trains and scores.
 *
 * The rule, integers only: the largest centred window of the model's aspect ratio (floor
 * division), then each output pixel the mean of the window's pixels over the area it covers,
 * partly covered pixels weighted by the part (an exact area average in integer units, rounded
 * half up); RGB to one channel is luma
 * (19595 R + 38470 G + 7471 B + 2^15) >> 16, one channel to RGB repeats it. A frame already of
 * the output's size is copied. No buffer beyond the output. */
#ifndef TP_IMAGE_H
#define TP_IMAGE_H

#include <stdint.h>

#include "tinyprop.h" /* tp_status */

#ifdef __cplusplus
extern "C" {
#endif

/* A frame of 8-bit pixels: channels 3 (R, G, B interleaved) or 1 (gray); row y starts at
 * pixels + y * stride (stride >= width * channels). */
typedef struct {
    const uint8_t *pixels;
    uint32_t width, height, channels, stride;
} tp_frame;

/* Fit the frame to out_w x out_h x out_c (out_c 3 or 1) in out (out_w * out_h * out_c bytes,
 * rows packed). TP_ERR_ARG: a NULL pointer, a zero size, a channel count other than 1 or 3,
 * a stride shorter than a row, or a frame smaller than the output in either dimension's
 * crop (the window of the output's aspect is narrower than one pixel). */
tp_status tp_frame_fit(const tp_frame *frame, uint8_t *out, uint32_t out_w, uint32_t out_h,
                       uint32_t out_c);

#ifdef __cplusplus
}
#endif

#endif /* TP_IMAGE_H */
