/* test_kernels_dsp.c - the kernel harness's cases (firmware/apps/kerneltest/kerneltest.c's
 * "TPKC" file) run on this machine, for tests/test_kernels_dsp.py: built with
 * TP_KERNELS_DSP_EMULATION (the Cortex-M DSP kernels with portable C intrinsics) under ASan and
 * UBSan, every blob in a heap block of exactly its size and every arena exactly as large as
 * the blob asks, so a kernel reading or writing one byte outside its scratch is caught.
 *
 *   test_kernels_dsp CASES > RECORDS
 *
 * Writes kerneltest's "TPKR" records (costs 0, outputs always sent), then "TPKE". A training
 * case (flag 8) runs its inputs as consecutive steps (kerneltest's learning rate and seed)
 * once with the reference kernels and once with the DSP ones, each session in an arena and a
 * params block of exactly the sizes asked; its records carry the params' CRC32 after each
 * step (crc_ref, crc_opt) and no outputs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tinyprop.h"
#include "tp_le.h"

static void put_u32(uint32_t v)
{
    uint8_t b[4];
    tp_wr_u32(b, v);
    fwrite(b, 1, 4, stdout);
}

static uint32_t get_u32(const uint8_t *file, long size, long at)
{
    return at + 4 <= size ? tp_rd_u32(file + at) : 0u;
}

#define FLAG_TRAIN 8u

/* n_in training steps from the blob's parameters; crcs[i]: the params' CRC32 after step i. */
static tp_status train_steps(const uint8_t *blob, uint32_t blob_len, const tp_requirements *req,
                             const uint8_t *inputs, uint32_t n_in, uint32_t in_bytes, int ref,
                             uint32_t *crcs)
{
    uint32_t arena_bytes = req->arena_infer > req->arena_train ? req->arena_infer
                                                               : req->arena_train;
    uint8_t *arena = malloc(arena_bytes ? arena_bytes : 1u);
    uint8_t *params = malloc(req->params ? req->params : 1u);
    tp_session s;
    tp_hparams hp;
    tp_status st;
    uint32_t i;
    /* each run's own pattern: a result reading a byte the session never wrote differs */
    memset(arena, ref ? 0xA5 : 0x5A, arena_bytes);
    memset(params, ref ? 0xC3 : 0x3C, req->params);
    st = in_bytes == 4u + req->input_bytes
             ? tp_session_init(&s, blob, blob_len, arena, arena_bytes, params, req->params)
             : TP_ERR_BAD_INPUT;
    hp.lr = 0.005f;
    hp.momentum = 0.0f;
    hp.seed = 0u;
    hp.flags = 0u;
    if (st == TP_OK) {
        st = tp_set_hparams(&s, &hp);
        tp_use_reference_kernels(&s, ref);
    }
    for (i = 0; i < n_in && st == TP_OK; i++) {
        tp_result r;
        memcpy(tp_input(&s), inputs + (size_t)i * in_bytes + 4u, req->input_bytes);
        st = tp_train_step(&s, (int32_t)tp_rd_u32(inputs + (size_t)i * in_bytes), &r);
        st = st == TP_ERR_NONFINITE ? TP_OK : st;
        crcs[i] = tp_crc32(0u, params, req->params);
    }
    free(arena);
    free(params);
    return st;
}

int main(int argc, char **argv)
{
    FILE *f = argc > 1 ? fopen(argv[1], "rb") : NULL;
    uint8_t *file;
    long size, at = 12;
    uint32_t n, c;
    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 12) {
        return 2;
    }
    rewind(f);
    file = malloc((size_t)size);
    if (file == NULL || fread(file, 1, (size_t)size, f) != (size_t)size ||
        memcmp(file, "TPKC", 4) != 0) {
        return 2;
    }
    fclose(f);
    n = get_u32(file, size, 8);
    for (c = 0; c < n; c++) {
        uint32_t blob_len = get_u32(file, size, at + 4), n_in = get_u32(file, size, at + 8);
        uint32_t in_bytes = get_u32(file, size, at + 12), i;
        const uint8_t *inputs = file + at + 16 + ((blob_len + 7u) & ~7u);
        uint8_t *blob = malloc(blob_len ? blob_len : 1u), *arena = NULL, *ref = NULL;
        tp_requirements req;
        tp_session s;
        tp_status st;
        memcpy(blob, file + at + 16, blob_len);
        st = tp_blob_requirements(blob, blob_len, &req);
        if (get_u32(file, size, at) & FLAG_TRAIN) {
            uint32_t *crc_ref = calloc(n_in + 1u, 4u), *crc_opt = calloc(n_in + 1u, 4u);
            if (st == TP_OK) {
                st = train_steps(blob, blob_len, &req, inputs, n_in, in_bytes, 1, crc_ref);
            }
            if (st == TP_OK) {
                st = train_steps(blob, blob_len, &req, inputs, n_in, in_bytes, 0, crc_opt);
            }
            for (i = 0; i < n_in; i++) {
                fwrite("TPKR", 1, 4, stdout);
                put_u32(c);
                put_u32(i);
                put_u32((uint32_t)st);
                put_u32(0u);
                put_u32(0u);
                put_u32(0u);
                put_u32(crc_ref[i]);
                put_u32(crc_opt[i]);
            }
            free(crc_ref);
            free(crc_opt);
            free(blob);
            at = (long)(inputs - file) + (long)n_in * in_bytes;
            continue;
        }
        if (st == TP_OK) {
            arena = malloc(req.arena_infer ? req.arena_infer : 1u);
            st = tp_session_init(&s, blob, blob_len, arena, req.arena_infer, NULL, 0);
        }
        for (i = 0; i < n_in; i++) {
            uint32_t out_n = st == TP_OK ? tp_output_bytes(&s) : 0u;
            tp_status st2 = st;
            if (st == TP_OK) {
                ref = realloc(ref, out_n);
                memcpy(tp_input(&s), inputs + (size_t)i * in_bytes, in_bytes);
                tp_use_reference_kernels(&s, 1);
                st2 = tp_infer(&s, NULL);
                memcpy(ref, tp_output(&s), out_n);
                /* the input afresh: an inference may reuse its bytes */
                memcpy(tp_input(&s), inputs + (size_t)i * in_bytes, in_bytes);
                tp_use_reference_kernels(&s, 0);
                st2 = st2 != TP_OK ? st2 : tp_infer(&s, NULL);
            }
            fwrite("TPKR", 1, 4, stdout);
            put_u32(c);
            put_u32(i);
            put_u32((uint32_t)st2);
            put_u32(0u);
            put_u32(0u);
            put_u32(st2 == TP_OK ? out_n : 0u);
            put_u32(st2 == TP_OK ? tp_crc32(0u, ref, out_n) : 0u);
            put_u32(st2 == TP_OK ? tp_crc32(0u, (const uint8_t *)tp_output(&s), out_n) : 0u);
            if (st2 == TP_OK) {
                fwrite(ref, 1, out_n, stdout);
                fwrite(tp_output(&s), 1, out_n, stdout);
            }
        }
        at = (long)(inputs - file) + (long)n_in * in_bytes;
        free(blob);
        free(arena);
        free(ref);
    }
    fwrite("TPKE", 1, 4, stdout);
    put_u32(n);
    free(file);
    return 0;
}
