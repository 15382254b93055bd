/*
 * fuzz_image.c - libFuzzer harness for the camera frame input (firmware/core/tp_image.c): a frame
 * of fuzzed width, height, format, stride and bytes fitted to a model input of fuzzed shape
 * (tp_image_fit), mapped through the pixel table of a fuzzed quantization (tp_pixel_table,
 * tp_input_pixels, tp_image_input). Run it with tests/fuzz/run.sh image.
 *
 * Input: a 20-byte header, then the pixels (repeated to fill the frame). The frame and the
 * output are malloc'ed at exactly the bytes they need, so ASan sees any access past them;
 * a side over TP_IMAGE_MAX_SIDE gets a one-byte buffer and must be refused before any access.
 */
// FUZZ_SOURCES: @core
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "tp_image.h"

#define HEADER 20u
/* Frames and inputs a run allocates at most: larger ones are skipped, which keeps every
 * execution short (the sums' 32-bit bounds are checked by the header's limits, not by size). */
#define MAX_FRAME_BYTES (4u << 10)
#define MAX_OUT_BYTES (1u << 10)

static uint32_t u16_at(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

/* A side from 2 bytes and a flag: 0 .. 65535, or past TP_IMAGE_MAX_SIDE. */
static uint32_t side(const uint8_t *p, int over)
{
    return over ? TP_IMAGE_MAX_SIDE + 1u + u16_at(p) : u16_at(p);
}

/* The bytes a frame's rows span: the last row need not be padded to the stride. */
static uint64_t frame_span(const tp_image *f)
{
    static const uint8_t bpp[3] = {1u, 3u, 2u};
    return (uint64_t)(f->height - 1u) * f->stride + (uint64_t)f->width * bpp[f->format];
}

static int side_too_large(const tp_image *f, uint32_t w, uint32_t h)
{
    return f->width > TP_IMAGE_MAX_SIDE || f->height > TP_IMAGE_MAX_SIDE || w > TP_IMAGE_MAX_SIDE ||
           h > TP_IMAGE_MAX_SIDE;
}

/* A gray frame of out's size in gray is copied; any frame's fit stays within its pixels' range. */
static void check_fit(const tp_image *f, const uint8_t *out, uint32_t w, uint32_t h, uint32_t c)
{
    uint32_t x, y, lo = 255u, hi = 0u;
    if (f->format != TP_IMAGE_GRAY8) {
        return;
    }
    for (y = 0; y < f->height; y++) {
        for (x = 0; x < f->width; x++) {
            uint32_t v = f->pixels[(size_t)y * f->stride + x];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
    }
    for (x = 0; x < w * h * c; x++) {
        CHECK(out[x] >= lo && out[x] <= hi);
    }
    if (c == 1u && f->width == w && f->height == h) {
        for (y = 0; y < h; y++) {
            CHECK(memcmp(out + (size_t)y * w, f->pixels + (size_t)y * f->stride, w) == 0);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tp_image f;
    uint32_t w, h, c, range, k, bits;
    int32_t zero_point;
    float scale;
    uint64_t frame_bytes, out_bytes;
    uint8_t *pixels, *out, *fitted;
    int8_t table[256];
    tp_status st;
    if (size < HEADER) {
        return 0;
    }
    /* byte 0: format (2 bits, 3 unknown), out_c 1 or 3 (or 0, 2: refused), sides over the
     * limit; bytes 1-8: frame width, height, output width, height; 9: stride padding;
     * 10-13: the input's scale bits; 14: zero point (an int8 tensor's); 15: pixel range (3
     * unknown), and in its top bit: the zero point is bytes 16-19 (any int32) instead */
    f.format = data[0] & 3u;
    c = (data[0] >> 2) & 3u;
    c = c == 2u ? 3u : c == 3u ? 2u : c; /* 1 and 3 most often: 0 -> 0, 1 -> 1, 2 -> 3, 3 -> 2 */
    f.width = side(data + 1, data[0] & 0x10u);
    f.height = side(data + 3, data[0] & 0x20u);
    w = side(data + 5, data[0] & 0x40u);
    h = side(data + 7, data[0] & 0x80u);
    f.stride = f.width * (f.format == 1u   ? 3u
                          : f.format == 2u ? 2u
                                           : 1u) +
               data[9] % 8u -
               (data[9] & 0x80u ? 1u : 0u); /* one short of a row sometimes: refused */
    memcpy(&bits, data + 10, 4);
    memcpy(&scale, &bits, sizeof scale); /* any bits: NaN, infinities, denormals, negatives */
    zero_point = (int8_t)data[14];
    if (data[15] & 0x80u) {
        memcpy(&zero_point, data + 16, 4);
    }
    range = data[15] % 4u;

    /* the pixel table: for a positive finite scale, pixel values in order map to inputs in order */
    st = tp_pixel_table(range, scale, zero_point, table);
    CHECK(st == TP_OK || st == TP_ERR_ARG);
    CHECK((st == TP_OK) == (range <= TP_PIXELS_M1_1 && scale > 0.0f && scale - scale == 0.0f));
    if (st == TP_OK) {
        for (k = 1; k < 256u; k++) {
            CHECK(table[k] >= table[k - 1]);
        }
    }
    CHECK(tp_input_pixels(scale, zero_point) <= TP_PIXELS_M1_1);

    out_bytes = (uint64_t)w * h * c;
    frame_bytes = f.format <= TP_IMAGE_RGB565BE && f.width && f.height ? frame_span(&f) : 1u;
    if (side_too_large(&f, w, h)) {
        static const uint8_t one[1] = {0};
        uint8_t byte;
        f.pixels = one;
        CHECK(tp_image_fit(&f, &byte, w, h, c) == TP_ERR_ARG);
        return 0;
    }
    if (frame_bytes > MAX_FRAME_BYTES || out_bytes > MAX_OUT_BYTES) {
        return 0;
    }
    pixels = malloc(frame_bytes);
    out = malloc(out_bytes ? out_bytes : 1u);
    fitted = malloc(out_bytes ? out_bytes : 1u);
    CHECK(pixels && out && fitted);
    for (k = 0; k < frame_bytes; k++) {
        pixels[k] = size > HEADER ? data[HEADER + k % (size - HEADER)] : (uint8_t)k;
    }
    f.pixels = pixels;
    st = tp_image_fit(&f, fitted, w, h, c);
    CHECK(st == TP_OK || st == TP_ERR_ARG);
    if (st == TP_OK) {
        check_fit(&f, fitted, w, h, c);
    }
    /* tp_image_input is the fit, then the table */
    if (tp_pixel_table(range, scale, zero_point, table) == TP_OK) {
        tp_status in = tp_image_input(&f, table, (int8_t *)out, w, h, c);
        CHECK(in == st);
        for (k = 0; in == TP_OK && k < out_bytes; k++) {
            CHECK((int8_t)out[k] == table[fitted[k]]);
        }
    }
    free(fitted);
    free(out);
    free(pixels);
    return 0;
}
