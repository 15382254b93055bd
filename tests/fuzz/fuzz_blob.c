/*
 * fuzz_blob.c - libFuzzer harness for the blob loader (firmware/core/blob/): tp_blob_check
 * (which checks the training program too; a refusal's fault must name its check), then, for a
 * blob it accepts, tp_session_init, tp_infer and tp_train_step on memory of exactly the requested
 * sizes, and, when its input is an image, a camera frame fitted to it (tp_model_image_of,
 * tp_image_input: the learn app's path, against fuzzed input shapes and quantization). Run it with
 * tests/fuzz/run.sh blob; seed_blob.py seeds the corpus with real small training blobs.
 *
 * The first input byte picks the mode, the rest is the blob. Odd modes patch the declared size
 * and the CRC trailer to match, so mutations get past the CRC into the field checks and the
 * kernels; even modes feed the bytes as they are. The blob is malloc'ed at its exact length, so
 * ASan sees any read past it.
 */
// FUZZ_SOURCES: @core
// FUZZ_NO_COVERAGE: firmware/core/kernels firmware/core/tp_crc32.c firmware/core/tp_fmath.c
// FUZZ_NO_COVERAGE: firmware/core/tp_optim.c firmware/core/tp_quant.c
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "tinyprop.h"
#include "tp_blob_layout.h"
#include "tp_image.h"
#include "tp_le.h"
/* Accepted garbage may ask for any memory or any amount of work: run the ones a small board
 * could hold, which keeps every execution short. */
#define MAX_RUN_BYTES (64u << 10)

/* The row source of a blob that reads its input in row bands: every byte `fill`. */
static tp_status fill_rows(void *ctx, uint32_t row, uint32_t n, int8_t *dst, uint32_t bytes)
{
    const tp_requirements *req = ctx;
    (void)row;
    memset(dst, (int)(req->model_id & 0xFFu), bytes);
    return n == 0u ? TP_ERR_ARG : TP_OK;
}

/* Set a sample: into the input tensor, or through a row source when it streams. */
static void put_sample(tp_session *s, const tp_requirements *req, uint8_t fill)
{
    int8_t *in = tp_input(s);
    if (in != NULL) {
        memset(in, fill, req->input_bytes);
    } else {
        tp_set_row_source(s, fill_rows, (void *)req);
    }
}

/* A model whose input is an image: a small RGB565 frame of `fill` made its input, as the learn
 * app does with a camera frame. */
static void fit_frame(tp_session *s, const tp_requirements *req, uint8_t fill)
{
    static uint8_t pixels[2u * 7u * 5u];
    tp_image frame = {pixels, 7u, 5u, TP_IMAGE_RGB565BE, 14u};
    tp_model_image m;
    int8_t table[256];
    tp_status st;
    if (tp_model_image_of(s, &m) != TP_OK) {
        return;
    }
    CHECK(m.pixels <= TP_PIXELS_M1_1 && (m.channels == 1u || m.channels == 3u));
    CHECK((uint64_t)m.width * m.height * m.channels == req->input_bytes);
    if (tp_pixel_table(m.pixels, m.scale, m.zero_point, table) != TP_OK) {
        return;
    }
    memset(pixels, fill, sizeof pixels);
    st = tp_image_input(&frame, table, tp_input(s), m.width, m.height, m.channels);
    /* TP_ERR_ARG only for an input whose aspect leaves the frame a window under one pixel */
    CHECK(st == TP_OK ||
          (st == TP_ERR_ARG && (m.width > 7u * m.height || m.height > 5u * m.width)));
}

/* Run an accepted blob: inference, then a training step if it has a training program. */
static void run_session(const uint8_t *blob, uint32_t len, const tp_requirements *req, uint8_t fill)
{
    uint32_t arena_len = req->arena_infer > req->arena_train ? req->arena_infer : req->arena_train;
    uint8_t *arena, *params;
    tp_session s;
    tp_result r;
    tp_status st;
    if (arena_len > MAX_RUN_BYTES || req->params > MAX_RUN_BYTES) {
        return;
    }
    arena = malloc(arena_len ? arena_len : 1u);
    params = req->params ? malloc(req->params) : NULL;
    CHECK(arena != NULL && (req->params == 0u || params != NULL));
    st = tp_session_init(&s, blob, len, arena, arena_len, params, req->params);
    CHECK(tp_status_name(st)[0] != '\0');
    if (st == TP_OK) {
        uint32_t k;
        /* every class name (if any) ends inside the blob, which is malloc'ed at its length */
        for (k = 0; k < req->n_classes; k++) {
            const char *name = tp_class_name(&s, k);
            CHECK(name == NULL || strlen(name) > 0u);
        }
        CHECK(tp_class_name(&s, req->n_classes) == NULL);
        fit_frame(&s, req, fill);
        put_sample(&s, req, fill);
        st = tp_infer(&s, &r);
        if (st == TP_OK) {
            CHECK(r.prediction >= 0 && (uint32_t)r.prediction < req->n_classes);
            CHECK(r.arena_peak <= arena_len);
        }
        if (req->arena_train > 0u && params != NULL) {
            tp_hparams hp = {0.05f, 0.0f, fill, 0u};
            CHECK(tp_set_hparams(&s, &hp) == TP_OK);
            put_sample(&s, req, fill);
            st = tp_train_step(&s, (int32_t)(fill % req->n_classes), &r);
            /* NO_TRAIN: the loader accepts a header with arena_train set and no TRAN section */
            CHECK(st == TP_OK || st == TP_ERR_NONFINITE || st == TP_ERR_BAD_INPUT ||
                  st == TP_ERR_BAD_LABEL || st == TP_ERR_NO_TRAIN);
        }
    }
    free(params);
    free(arena);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint32_t len;
    uint8_t *blob;
    tp_requirements req;
    tp_fault fault;
    char line[256];
    tp_status st;
    if (size < 1 || size - 1 > 0xFFFFFFFFu) {
        return 0;
    }
    len = (uint32_t)(size - 1);
    blob = malloc(len ? len : 1u);
    CHECK(blob != NULL);
    memcpy(blob, data + 1, len);
    if ((data[0] & 1u) && len >= TP_HDR_BYTES + TP_CRC_BYTES) {
        tp_wr_u32(blob + TP_HDR_TOTAL_SIZE, len);
        tp_wr_u32(blob + len - TP_CRC_BYTES, tp_crc32(0, blob, len - TP_CRC_BYTES));
    }
    st = tp_blob_check(blob, len, &req, &fault);
    CHECK(tp_status_name(st)[0] != '\0');
    /* every refusal names its check: "<status>: <where>: <what> (check <name>, <file:line>)" */
    CHECK(st == TP_OK || (fault.status == st && fault.check != 0u && fault.line != 0u &&
                          tp_fault_text(&fault, line, sizeof line) < sizeof line &&
                          strstr(line, tp_status_name(st)) == line && strstr(line, "(check ")));
    if (st == TP_OK) {
        CHECK(req.blob_id == tp_crc32(0, blob, len - TP_CRC_BYTES));
        CHECK(req.n_classes > 0u);
        run_session(blob, len, &req, data[0]);
    }
    free(blob);
    return 0;
}
