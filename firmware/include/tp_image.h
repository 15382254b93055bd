/* tp_image.h - a camera frame made the model's int8 input, exactly as tinyprop's host makes a
 * photo one (tinyprop.data.image, docs/your-data.md "Images"): the board and the host feed a
 * model the same bytes, so what a board learns from its camera matches what the host trains
 * and scores.
 *
 * The rule, integers only: the largest centred window of the model's aspect ratio (floor
 * division), then each output pixel the mean of the window's pixels over the area it covers,
 * partly covered pixels weighted by the part (an exact area average in integer units, rounded
 * half up); RGB to one channel is luma (19595 R + 38470 G + 7471 B + 2^15) >> 16, one channel
 * to RGB repeats it; RGB565 is widened to 8 bits a channel by repeating its top bits. A frame
 * already of the output's size is copied. Then each 8-bit value becomes the int8 input through
 * a table of 256 (tp_pixel_table): its real value in the model's pixel range, quantized with
 * the input's scale and zero point. No buffer beyond the input: the frame is fitted into the
 * input's bytes and mapped in place. */
#ifndef TP_IMAGE_H
#define TP_IMAGE_H

#include <stdint.h>

#include "tinyprop.h" /* tp_status */

#ifdef __cplusplus
extern "C" {
#endif

/* How a frame's pixels are stored. */
typedef enum {
    TP_IMAGE_GRAY8 = 0,   /* one byte a pixel */
    TP_IMAGE_RGB888 = 1,  /* R, G, B bytes */
    TP_IMAGE_RGB565BE = 2 /* RRRRRGGG GGGBBBBB, high byte first: how OV767x and esp32-camera
                             sensors send it */
} tp_image_format;

/* A frame: row y starts at pixels + y * stride (stride >= width * the format's bytes). */
typedef struct {
    const uint8_t *pixels;
    uint32_t width, height, format, stride;
} tp_image;

/* The real value a pixel p is to the model (tinyprop.data.datasets.PIXEL_RANGES). */
typedef enum {
    TP_PIXELS_0_1 = 0,   /* p / 255 (Keras' rescale=1/255: MLPerf VWW) */
    TP_PIXELS_0_255 = 1, /* p (MLPerf ResNet-8) */
    TP_PIXELS_M1_1 = 2   /* p / 127.5 - 1 */
} tp_pixel_range;

/* The largest frame and output side, and window (pixels), tp_image_fit takes: its sums stay in
 * 32 bits (a 4096 x 4096 window; cameras of microcontrollers send far less). */
#define TP_IMAGE_MAX_SIDE 65535u
#define TP_IMAGE_MAX_WINDOW (1u << 24)

/* Fit the frame to out_w x out_h x out_c (out_c 3 or 1) 8-bit values in out (rows packed).
 * TP_ERR_ARG: a NULL pointer, a zero size, an unknown format, out_c other than 1 or 3, a
 * stride shorter than a row, a side over TP_IMAGE_MAX_SIDE, or a window of the output's
 * aspect under one pixel or over TP_IMAGE_MAX_WINDOW pixels. */
tp_status tp_image_fit(const tp_image *frame, uint8_t *out, uint32_t out_w, uint32_t out_h,
                       uint32_t out_c);

/* table[p] = the int8 input of pixel value p: its real value in `range`, divided by `scale`,
 * rounded half away from zero, plus zero_point, clamped (TFLite's QUANTIZE, in float32 as the
 * host computes it). TP_ERR_ARG: an unknown range or a scale not positive and finite. */
tp_status tp_pixel_table(uint32_t range, float scale, int32_t zero_point, int8_t table[256]);

/* The frame fitted (tp_image_fit) into input's out_w x out_h x out_c bytes, then each byte
 * mapped through table (tp_pixel_table): the model's int8 input (tp_input). */
tp_status tp_image_input(const tp_image *frame, const int8_t table[256], int8_t *input,
                         uint32_t out_w, uint32_t out_h, uint32_t out_c);

/* The model input a frame becomes (tp_model_image_of). */
typedef struct {
    uint32_t width, height, channels; /* the input's NHWC shape: channels 1 or 3 */
    float scale;                      /* its int8 quantization */
    int32_t zero_point;
    uint32_t pixels; /* the tp_pixel_range the model reads pixels in (tp_input_pixels) */
} tp_model_image;

/* The pixel range of a model whose int8 input has scale and zero_point: the one whose real
 * interval overlaps the input's, (-128 - zero_point) * scale .. (127 - zero_point) * scale,
 * most as intersection over union (in float), the first of TP_PIXELS_* on a tie; the host's default
 * (tinyprop.data.datasets.input_pixels). */
uint32_t tp_input_pixels(float scale, int32_t zero_point);

/* The session's model input as an image (*m). TP_ERR_BAD_INPUT for an input that is not one:
 * not int8, not of shape [1,] H, W, C with C 1 or 3, or read in row bands (tp_input NULL). */
tp_status tp_model_image_of(tp_session *s, tp_model_image *m);

#ifdef __cplusplus
}
#endif

#endif /* TP_IMAGE_H */
