/*
 * fuzz_record.c - libFuzzer harness for the params record (firmware/core/tp_record.c) as every
 * application loads one: from the board's store or the host's PUSH_PARAMS into the session's
 * record buffer, then tp_record_restore; a record it takes is trained on (its params are any
 * bits the CRC covers), sealed again and read back in PULL_PARAMS chunks (tp_record_chunk).
 * Run it with tests/fuzz/run.sh record; the model is a generated one compiled in.
 *
 * Input: a mode byte, a chunk-size byte, then the record bytes. Mode bit 0 writes this blob's
 * magic, id and size into the header, bit 1 then seals its CRC (so mutants reach the step and
 * the params), bit 2 makes the record exactly the session's size (the bytes repeated).
 */
// FUZZ_SOURCES: @core
// FUZZ_MODEL: fc_flatten last:2
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "tinyprop.h"
#include "tp_le.h"
#include "tp_record.h"
#include TP_MODEL_HEADER

/* One session for every run, bound once (tp_session_init checks the whole blob: the slow part),
 * its params at record.bytes + TP_RECORD_HEADER: the application's record buffer, a global of
 * exactly the record's size, so ASan sees any access past it. Each run starts from the blob's
 * params and step 0 (tp_reset_params). */
#define FULL (TP_RECORD_HEADER + TP_MODEL_PARAMS_BYTES)
static union {
    uint64_t align;
    uint8_t bytes[TP_MODEL_ARENA_BYTES];
} arena;
static union {
    uint64_t align;
    uint8_t bytes[FULL];
} record;
static tp_session s;
/* The blob's own params, to check that a refused record leaves them restored. */
static uint8_t blob_params[TP_MODEL_PARAMS_BYTES];

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    CHECK(tp_session_init(&s, tp_model_blob, tp_model_blob_len, arena.bytes, sizeof arena.bytes,
                          record.bytes + TP_RECORD_HEADER, TP_MODEL_PARAMS_BYTES) == TP_OK);
    memcpy(blob_params, record.bytes + TP_RECORD_HEADER, TP_MODEL_PARAMS_BYTES);
    return 0;
}

/* Train once on the taken record, seal it, pull it in chunks of `max` and load it again. */
static void train_and_pull(tp_session *s, uint8_t *record, uint32_t n, uint8_t fill, uint32_t max)
{
    tp_hparams hp = {0.05f, 0.0f, fill, 0u};
    tp_result r;
    uint32_t step = s->step, off = 0, got = 0;
    uint8_t *pulled = malloc(n);
    const char *why = NULL;
    tp_status st;
    CHECK(pulled != NULL);
    CHECK(tp_set_hparams(s, &hp) == TP_OK);
    memset(tp_input(s), fill, s->b.req.input_bytes);
    st = tp_train_step(s, (int32_t)(fill % s->b.req.n_classes), &r);
    CHECK(st == TP_OK || st == TP_ERR_NONFINITE);
    CHECK(s->step == step + 1u);
    while (off < n) {
        CHECK(tp_record_chunk(s, record, off, max, &got) == TP_OK);
        CHECK(got >= 1u && got <= max && off + got <= n);
        memcpy(pulled + off, record + off, got);
        off += got;
    }
    CHECK(tp_record_chunk(s, record, n, max, &got) == TP_OK && got == 0u);
    CHECK(tp_record_chunk(s, record, n + 1u, max, &got) == TP_ERR_BAD_OFFSET);
    CHECK(memcmp(pulled, record, n) == 0);
    CHECK(tp_record_restore(s, pulled, n, &why) == TP_OK && s->step == step + 1u);
    free(pulled);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *rec = record.bytes;
    uint32_t n, k;
    const char *why = NULL;
    tp_status st;
    if (size < 2u || size - 2u > 0xFFFFu) {
        return 0;
    }
    CHECK(tp_reset_params(&s) == TP_OK);
    /* what the store or PUSH_PARAMS wrote over the buffer: n bytes, of which the buffer holds
     * its size (a longer record is refused by its size before any byte past the header) */
    n = (data[0] & 4u) ? FULL : (uint32_t)(size - 2u);
    for (k = 0; k < n && k < FULL; k++) {
        rec[k] = size > 2u ? data[2u + k % (size - 2u)] : 0u;
    }
    if ((data[0] & 1u) && n >= TP_RECORD_HEADER) {
        tp_wr_u32(rec, TP_RECORD_MAGIC);
        tp_wr_u32(rec + 4, s.b.req.blob_id);
        tp_wr_u32(rec + 8, s.b.req.params);
        if ((data[0] & 2u) && n == FULL) {
            uint32_t crc = tp_crc32(0, rec, TP_RECORD_HEADER - 4u);
            tp_wr_u32(rec + 20, tp_crc32(crc, rec + TP_RECORD_HEADER, s.b.req.params));
        }
    }
    if (n >= TP_RECORD_HEADER) {
        st = tp_record_match(&s, rec, &why);
        CHECK(st == TP_OK || (st == TP_ERR_RECORD_MISMATCH && why != NULL));
    }
    why = NULL;
    st = tp_record_restore(&s, rec, n, &why);
    if (st == TP_OK) {
        CHECK(n == FULL && s.step == tp_rd_u32(rec + 12));
        train_and_pull(&s, rec, n, data[0], (uint32_t)data[1] + 1u);
    } else {
        /* refused: one line why, and the caller restores the blob's params */
        CHECK(st == TP_ERR_RECORD_MISMATCH && why != NULL && why[0] != '\0');
        CHECK(tp_reset_params(&s) == TP_OK && s.step == 0u);
        CHECK(memcmp(rec + TP_RECORD_HEADER, blob_params, TP_MODEL_PARAMS_BYTES) == 0);
    }
    return 0;
}
