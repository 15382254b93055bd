/* tp_image.c - a camera frame made the model's input (tp_image.h), bit for bit as
 * tinyprop.data.image does it in NumPy. */
#include "tp_image.h"
#include "tinyprop.h"

#include <stddef.h>

#include "tp_blob.h"

/* Bytes a pixel and channels of each tp_image_format. */
static const uint8_t frame_bytes[3] = {1u, 3u, 2u};
static const uint8_t frame_channels[3] = {1u, 3u, 3u};

/* The source pixels [*first, *last] an output pixel i of n covers on an axis whose window is
 * r pixels long: in units of 1 / n of a source pixel, source pixel j spans [j n, (j + 1) n) and
 * the output pixel [i r, (i + 1) r). */
static void span(uint32_t i, uint32_t n, uint32_t r, uint32_t *first, uint32_t *last)
{
    *first = i * r / n;
    *last = ((i + 1u) * r - 1u) / n;
}

/* How much of output pixel i (of n, window r) source pixel j covers, in units of 1 / n. */
static uint32_t overlap(uint32_t i, uint32_t n, uint32_t r, uint32_t j)
{
    uint32_t lo = i * r, hi = lo + r, a = j * n, b = a + n;
    return (hi < b ? hi : b) - (lo > a ? lo : a);
}

/* The 8-bit channels of pixel p (stored as `format`) in v. */
static void decode(uint32_t format, const uint8_t *p, uint32_t v[3])
{
    if (format == TP_IMAGE_GRAY8) {
        v[0] = p[0];
    } else if (format == TP_IMAGE_RGB888) {
        v[0] = p[0];
        v[1] = p[1];
        v[2] = p[2];
    } else { /* RGB565, high byte first: 5-6-5 bits widened by repeating their top bits */
        uint32_t r = (uint32_t)p[0] >> 3, b = (uint32_t)p[1] & 31u;
        uint32_t g = (((uint32_t)p[0] & 7u) << 3) | ((uint32_t)p[1] >> 5);
        v[0] = (r << 3) | (r >> 2);
        v[1] = (g << 2) | (g >> 4);
        v[2] = (b << 3) | (b >> 2);
    }
}

/* An output pixel, its n_in channels in v, as out_c channels: RGB to luma, gray to RGB. */
static void store(uint8_t *out, const uint32_t v[3], uint32_t n_in, uint32_t out_c)
{
    uint32_t c;
    if (out_c == n_in) {
        for (c = 0; c < n_in; c++) {
            out[c] = (uint8_t)v[c];
        }
    } else if (out_c == 1u) {
        out[0] = (uint8_t)((19595u * v[0] + 38470u * v[1] + 7471u * v[2] + 32768u) >> 16);
    } else {
        out[0] = out[1] = out[2] = (uint8_t)v[0];
    }
}

tp_status tp_image_fit(const tp_image *frame, uint8_t *out, uint32_t out_w, uint32_t out_h,
                       uint32_t out_c)
{
    uint32_t cw, ch, x0, y0, x, y, c, n_in, bpp, area;
    if (frame == NULL || frame->pixels == NULL || out == NULL || out_w == 0u || out_h == 0u ||
        out_w > TP_IMAGE_MAX_SIDE || out_h > TP_IMAGE_MAX_SIDE || frame->width == 0u ||
        frame->height == 0u || frame->width > TP_IMAGE_MAX_SIDE ||
        frame->height > TP_IMAGE_MAX_SIDE || frame->format > TP_IMAGE_RGB565BE ||
        (out_c != 1u && out_c != 3u) || frame->stride / frame_bytes[frame->format] < frame->width) {
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
    if (cw == 0u || ch == 0u || (uint64_t)cw * ch > TP_IMAGE_MAX_WINDOW) {
        return TP_ERR_ARG;
    }
    x0 = (frame->width - cw) / 2u;
    y0 = (frame->height - ch) / 2u;
    n_in = frame_channels[frame->format];
    bpp = frame_bytes[frame->format];
    /* Sides under 2^16 keep i * r in 32 bits; a window of at most 2^24 pixels keeps the
     * weighted sums (at most area * 255) and their rounding in 32 bits: no 64-bit division. */
    area = cw * ch;
    if (cw == out_w && ch == out_h) { /* each output pixel is one source pixel: a copy */
        for (y = 0; y < out_h; y++) {
            const uint8_t *row = frame->pixels + (size_t)(y0 + y) * frame->stride;
            for (x = 0; x < out_w; x++) {
                uint32_t v[3];
                decode(frame->format, row + (size_t)(x0 + x) * bpp, v);
                store(out + (y * out_w + x) * out_c, v, n_in, out_c);
            }
        }
        return TP_OK;
    }
    for (y = 0; y < out_h; y++) {
        uint32_t j0, j1;
        span(y, out_h, ch, &j0, &j1);
        for (x = 0; x < out_w; x++) {
            uint32_t i0, i1, i, j, v[3];
            uint32_t sum[3] = {0u, 0u, 0u};
            span(x, out_w, cw, &i0, &i1);
            for (j = j0; j <= j1; j++) {
                const uint8_t *row = frame->pixels + (size_t)(y0 + j) * frame->stride;
                uint32_t wy = overlap(y, out_h, ch, j);
                for (i = i0; i <= i1; i++) {
                    uint32_t w = wy * overlap(x, out_w, cw, i);
                    decode(frame->format, row + (size_t)(x0 + i) * bpp, v);
                    for (c = 0; c < n_in; c++) {
                        sum[c] += w * v[c];
                    }
                }
            }
            for (c = 0; c < n_in; c++) {
                v[c] = (sum[c] + area / 2u) / area;
            }
            store(out + (y * out_w + x) * out_c, v, n_in, out_c);
        }
    }
    return TP_OK;
}

tp_status tp_pixel_table(uint32_t range, float scale, int32_t zero_point, int8_t table[256])
{
    uint32_t p;
    if (table == NULL || range > TP_PIXELS_M1_1 || !(scale > 0.0f && scale - scale == 0.0f)) {
        return TP_ERR_ARG;
    }
    for (p = 0; p < 256u; p++) {
        float x = (float)p, v, a;
        int64_t q; /* q + zero_point: any int32 zero point without overflow */
        if (range == TP_PIXELS_0_1) {
            x = x / 255.0f;
        } else if (range == TP_PIXELS_M1_1) {
            x = x / 127.5f - 1.0f;
        }
        v = x / scale;
        /* round half away from zero; past +-512 the clamp below decides alone */
        a = v < 0.0f ? -v : v;
        a = a > 512.0f ? 512.0f : a;
        q = (int64_t)(a + 0.5f);
        q = (v < 0.0f ? -q : q) + zero_point;
        table[p] = (int8_t)(q < -128 ? -128 : (q > 127 ? 127 : q));
    }
    return TP_OK;
}

tp_status tp_image_input(const tp_image *frame, const int8_t table[256], int8_t *input,
                         uint32_t out_w, uint32_t out_h, uint32_t out_c)
{
    uint32_t k, n = out_w * out_h * out_c;
    uint8_t *bytes = (uint8_t *)input;
    tp_status st = table != NULL ? tp_image_fit(frame, bytes, out_w, out_h, out_c) : TP_ERR_ARG;
    if (st != TP_OK) {
        return st;
    }
    for (k = 0; k < n; k++) {
        bytes[k] = (uint8_t)table[bytes[k]];
    }
    return TP_OK;
}

uint32_t tp_input_pixels(float scale, int32_t zero_point)
{
    /* in float, as the host computes it (datasets.input_pixels): the same choice everywhere */
    static const float range[3][2] = {{0.0f, 1.0f}, {0.0f, 255.0f}, {-1.0f, 1.0f}};
    /* in float from the start: -128 - zero_point overflows an int32 for a zero point near its
     * ends (not an int8 tensor's, whose ends are exact either way) */
    float lo = (-128.0f - (float)zero_point) * scale, hi = (127.0f - (float)zero_point) * scale;
    float best = -1.0f;
    uint32_t k, pick = TP_PIXELS_0_1;
    for (k = 0; k < 3u; k++) {
        float a = range[k][0], b = range[k][1];
        float inter = (hi < b ? hi : b) - (lo > a ? lo : a);
        float iou = (inter > 0.0f ? inter : 0.0f) / ((hi > b ? hi : b) - (lo < a ? lo : a));
        if (iou > best) {
            best = iou;
            pick = k;
        }
    }
    return pick;
}

tp_status tp_model_image_of(tp_session *s, tp_model_image *m)
{
    tp_tensor t;
    uint32_t lead;
    if (s == NULL || m == NULL || s->b.tensors == NULL) {
        return TP_ERR_ARG;
    }
    tp_decode_tensor(s->b.tensors, s->b.input, &t);
    lead = t.rank == 4u ? 1u : 0u; /* NHWC with N = 1, or HWC */
    if (t.dtype != TP_DT_INT8 || (t.rank != 4u && t.rank != 3u) || (lead && t.dims[0] != 1u) ||
        (t.dims[lead + 2u] != 1u && t.dims[lead + 2u] != 3u) || tp_input(s) == NULL) {
        return TP_ERR_BAD_INPUT;
    }
    m->height = t.dims[lead];
    m->width = t.dims[lead + 1u];
    m->channels = t.dims[lead + 2u];
    m->scale = t.scale;
    m->zero_point = t.zero_point;
    m->pixels = tp_input_pixels(t.scale, t.zero_point);
    return TP_OK;
}
