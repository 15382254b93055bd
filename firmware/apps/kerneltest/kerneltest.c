/*
 * kerneltest.c - the kernels' test and measurement harness: runs many small blobs, each with
 * the reference kernels and with the build's kernels, in one firmware process, and reports
 * both outputs and the cost of both (tinyprop.bench.kernels drives it: op-level cases, whole
 * generated models, VWW layer by layer). Portable: only tp_board.h and the core.
 *
 * Input, the bulk file "kernel_cases.bin" (little-endian):
 *
 *   "TPKC" | u32 version 1 | u32 n_cases
 *   per case: u32 flags | u32 blob_len | u32 n_inputs | u32 input_bytes | blob, zero padded to
 *             a multiple of 8 | n_inputs inputs of input_bytes each
 *
 *   flags: 1 send the outputs (else their CRC32 only), 2 the blob is the one compiled in
 *          (BLOB=..., blob_len 0: the VWW model, larger than RAM), 4 run only the build's
 *          kernels (not the reference), 8 training: each input is a u32 label and a sample,
 *          run as consecutive training steps (lr TRAIN_LR, seed TRAIN_SEED) from the blob's
 *          parameters with the build's kernels (the reference ones with flag 16), each step
 *          profiled (tp_set_profile)
 *
 * Output, on the board link: per case and input one record
 *
 *   "TPKR" | u32 case | u32 input | u32 status | u32 cost_ref | u32 cost_opt | u32 out_bytes |
 *   u32 crc_ref | u32 crc_opt | [out_ref | out_opt when flag 1]
 *
 * (status a tp_status; cost in tp_board_counter units, 0 when not run), then "TPKE" | u32 cases
 * and the exit status 0 (1 when the case file cannot be read).
 *
 * A training step's record: cost_opt its cost (hook calls included), crc_opt the CRC32 of the
 * params region after it, cost_ref and crc_ref 0, and (flag 1) twice its profile, u32s: the
 * loss's float bits, the hook calls, the cost of 64 hook calls, the loss part's cost, then per
 * op (forward, backward, grad, update) costs: the tp_part intervals, each charged to the part
 * that began it.
 */
#include <stdint.h>
#include <string.h>

#include "tinyprop.h"
#include "tp_board.h"
#include "tp_le.h"

#ifdef TP_MODEL_HEADER
#include TP_MODEL_HEADER
#define HAVE_BLOB 1
#else
#define HAVE_BLOB 0
#endif

/* the blob compiled in asks for more than the default: make room for its training and a
 * step's profile (4 u32s an op, 128 ops at most) */
#if HAVE_BLOB && defined(TP_MODEL_ARENA_BYTES) && defined(TP_MODEL_PARAMS_BYTES) && \
    !defined(TP_KERNELTEST_MEMORY)
#if TP_MODEL_ARENA_BYTES + TP_MODEL_PARAMS_BYTES + 16u + 2064u > 200u * 1024u
#define TP_KERNELTEST_MEMORY (TP_MODEL_ARENA_BYTES + TP_MODEL_PARAMS_BYTES + 16u + 2064u)
#endif
#endif

#ifndef TP_KERNELTEST_MEMORY
#define TP_KERNELTEST_MEMORY (200u * 1024u)
#endif

#define FLAG_OUTPUTS 1u
#define FLAG_BUILTIN 2u
#define FLAG_OPT_ONLY 4u
#define FLAG_TRAIN 8u
#define FLAG_REF 16u
#define CASE_HEADER 16u
#define TRAIN_LR 0.005f
#define TRAIN_SEED 0u
#define PROFILE_HEAD 4u /* loss bits, hook calls, 64 hook calls' cost, the loss part */

/* blob (when read from the case file), arena and the reference output, carved per case */
static union {
    uint64_t align;
    uint8_t bytes[TP_KERNELTEST_MEMORY];
} memory;
static tp_session session;

static void send_u32(uint32_t v)
{
    uint8_t b[4];
    tp_wr_u32(b, v);
    (void)tp_board_write(b, 4u);
}

static uint32_t read_u32(uint32_t offset, int *ok)
{
    uint8_t b[4];
    *ok = *ok && tp_board_bulk_read(offset, b, 4u) == 4;
    return tp_rd_u32(b);
}

static uint32_t align8(uint32_t n)
{
    return (n + 7u) & ~7u;
}

/* n bytes filled with case `index`'s own pattern before its session starts: a result that
 * reads a byte nobody wrote (an arena or params byte left over from an earlier case) differs
 * between two cases with the same blob and inputs, e.g. a run with the reference kernels and
 * one with the build's. */
static void fill_pattern(uint8_t *p, uint32_t n, uint32_t index)
{
    uint32_t i, x = 0x9E3779B9u * (index + 1u);
    for (i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (uint8_t)x;
    }
}

/* The cost of one inference with the reference (1) or the build's (0) kernels, on the input
 * read afresh from the case file (an inference may reuse the input's bytes). */
static uint32_t timed_infer(int reference, uint32_t input_at, uint32_t input_bytes, tp_status *st)
{
    uint64_t t0, t1;
    if (tp_board_bulk_read(input_at, (uint8_t *)tp_input(&session), input_bytes) !=
        (int32_t)input_bytes) {
        *st = TP_ERR_BAD_INPUT;
        return 0u;
    }
    tp_use_reference_kernels(&session, reference);
    t0 = tp_board_counter();
    *st = tp_infer(&session, NULL);
    t1 = tp_board_counter();
    return (uint32_t)(t1 - t0);
}

/* Run input `input` (input_bytes at input_at in the case file); the record goes out on the
 * link. */
static void run_input(uint32_t index, uint32_t input, uint32_t input_at, uint32_t input_bytes,
                      uint32_t flags, uint8_t *ref_out, uint32_t ref_room)
{
    tp_status st = TP_OK, st2 = TP_OK;
    uint32_t cost_ref = 0u, cost_opt, n = tp_output_bytes(&session), crc_ref = 0u;
    int with_ref = (flags & FLAG_OPT_ONLY) == 0u && n <= ref_room;
    if (with_ref) {
        cost_ref = timed_infer(1, input_at, input_bytes, &st);
        memcpy(ref_out, tp_output(&session), n);
        crc_ref = tp_crc32(0u, ref_out, n);
    }
    cost_opt = timed_infer(0, input_at, input_bytes, &st2);
    (void)tp_board_write((const uint8_t *)"TPKR", 4u);
    send_u32(index);
    send_u32(input);
    send_u32((uint32_t)(st != TP_OK ? st : st2));
    send_u32(cost_ref);
    send_u32(cost_opt);
    send_u32(n);
    send_u32(crc_ref);
    send_u32(tp_crc32(0u, (const uint8_t *)tp_output(&session), n));
    if (flags & FLAG_OUTPUTS) {
        if (with_ref) {
            (void)tp_board_write(ref_out, n);
        } else {
            (void)tp_board_write((const uint8_t *)tp_output(&session), n);
        }
        (void)tp_board_write((const uint8_t *)tp_output(&session), n);
    }
}

/* A training step's profile: each interval between two hook calls charged to the part (and op)
 * that began it. */
typedef struct {
    uint64_t last;
    uint32_t part, op, calls, n_ops;
    uint32_t *table; /* PROFILE_HEAD u32s, then 4 per op */
} profile_state;

static void on_part(void *ctx, uint32_t part, uint32_t op)
{
    profile_state *p = (profile_state *)ctx;
    uint64_t now = tp_board_counter();
    uint32_t d = (uint32_t)(now - p->last), *slot = NULL;
    if (p->part == TP_PART_LOSS) {
        slot = &p->table[3];
    } else if (p->part != TP_PART_END && p->op < p->n_ops) {
        static const uint8_t column[5] = {0u, 0u, 1u, 2u, 3u}; /* forward, -, backward, grad,
                                                                  update */
        slot = &p->table[PROFILE_HEAD + 4u * p->op + column[p->part]];
    }
    if (slot != NULL) {
        *slot += d;
    }
    p->part = part;
    p->op = op;
    p->calls++;
    p->last = now;
}

/* The training steps of a FLAG_TRAIN case; memory at `at` holds the arena, then the params,
 * then the profile table. */
static void run_train_case(uint32_t index, const uint8_t *blob, uint32_t blob_len,
                           const tp_requirements *req, uint8_t *at, uint32_t room, uint32_t inputs,
                           uint32_t n_inputs, uint32_t input_bytes, uint32_t flags)
{
    uint32_t arena = align8(req->arena_infer > req->arena_train ? req->arena_infer
                                                                : req->arena_train);
    uint32_t n_ops, table_bytes, i, k;
    uint8_t *params = at + arena, *table;
    tp_status st;
    profile_state prof;
    tp_hparams hp;
    uint64_t used = (uint64_t)arena + align8(req->params);
    table = params + align8(req->params);
    st = used > room || input_bytes != 4u + req->input_bytes ? TP_ERR_ARENA_TOO_SMALL : TP_OK;
    if (st == TP_OK) {
        fill_pattern(at, (uint32_t)used, index);
        st = tp_session_init(&session, blob, blob_len, at, arena, params, req->params);
    }
    n_ops = st == TP_OK ? session.b.n_ops : 0u;
    table_bytes = 4u * (PROFILE_HEAD + 4u * n_ops);
    if (st == TP_OK && used + table_bytes > room) { /* the table follows the params */
        st = TP_ERR_ARENA_TOO_SMALL;
    }
    hp.lr = TRAIN_LR;
    hp.momentum = 0.0f;
    hp.seed = TRAIN_SEED;
    hp.flags = 0u;
    if (st == TP_OK) {
        st = tp_set_hparams(&session, &hp);
        tp_use_reference_kernels(&session, (flags & FLAG_REF) != 0u);
    }
    for (i = 0; i < n_inputs; i++) {
        uint8_t label[4];
        uint64_t t0, t1 = 0u;
        tp_result r;
        tp_status s2 = st;
        memset(&r, 0, sizeof r);
        if (s2 == TP_OK &&
            (tp_board_bulk_read(inputs + i * input_bytes, label, 4u) != 4 ||
             tp_board_bulk_read(inputs + i * input_bytes + 4u, (uint8_t *)tp_input(&session),
                                req->input_bytes) != (int32_t)req->input_bytes)) {
            s2 = TP_ERR_BAD_INPUT;
        }
        t0 = 0u;
        if (s2 == TP_OK) {
            uint32_t *tab = (uint32_t *)(void *)table;
            for (k = 0; k < table_bytes / 4u; k++) {
                tab[k] = 0u;
            }
            prof.table = tab;
            prof.n_ops = n_ops;
            prof.calls = 0u;
            prof.part = TP_PART_END;
            prof.op = 0u;
            tp_set_profile(&session, on_part, &prof);
            t0 = tp_board_counter();
            prof.last = t0;
            s2 = tp_train_step(&session, (int32_t)tp_rd_u32(label), &r);
            t1 = tp_board_counter();
            tp_set_profile(&session, NULL, NULL);
            memcpy(&tab[0], &r.loss, 4u);
            tab[1] = prof.calls;
            {
                uint64_t h0 = tp_board_counter();
                for (k = 0; k < 64u; k++) {
                    on_part(&prof, TP_PART_END, 0u);
                }
                tab[2] = (uint32_t)(tp_board_counter() - h0);
            }
            if (s2 == TP_ERR_NONFINITE) {
                s2 = TP_OK; /* a skipped step is a result like another */
            }
        }
        (void)tp_board_write((const uint8_t *)"TPKR", 4u);
        send_u32(index);
        send_u32(i);
        send_u32((uint32_t)s2);
        send_u32(0u);
        send_u32(s2 == TP_OK ? (uint32_t)(t1 - t0) : 0u);
        send_u32(s2 == TP_OK ? table_bytes : 0u);
        send_u32(0u);
        send_u32(s2 == TP_OK ? tp_crc32(0u, params, req->params) : 0u);
        if (s2 == TP_OK && (flags & FLAG_OUTPUTS)) {
            (void)tp_board_write(table, table_bytes);
            (void)tp_board_write(table, table_bytes);
        }
    }
}

/* Case `index` at file offset *at; returns 0 when the file ends early. */
static int run_case(uint32_t index, uint32_t *at)
{
    int ok = 1;
    uint32_t start = *at, flags = read_u32(start, &ok), blob_len = read_u32(start + 4u, &ok);
    uint32_t n_inputs = read_u32(start + 8u, &ok), input_bytes = read_u32(start + 12u, &ok);
    uint32_t inputs = start + CASE_HEADER + align8(blob_len), i, used;
    const uint8_t *blob = memory.bytes;
    tp_requirements req;
    tp_status st;
    if (!ok) {
        return 0;
    }
    *at = inputs + n_inputs * input_bytes;
    if (flags & FLAG_BUILTIN) {
#if HAVE_BLOB
        blob = tp_model_blob;
        blob_len = tp_model_blob_len;
        used = 0u;
#else
        blob_len = 0u; /* no blob compiled in: the loader refuses the empty one */
        used = 0u;
#endif
    } else {
        if (blob_len > sizeof memory.bytes ||
            tp_board_bulk_read(start + CASE_HEADER, memory.bytes, blob_len) != (int32_t)blob_len) {
            blob_len = 0u;
        }
        used = align8(blob_len);
    }
    st = tp_blob_requirements(blob, blob_len, &req);
    if (flags & FLAG_TRAIN) {
        if (st == TP_OK && req.arena_train == 0u) {
            st = TP_ERR_NO_TRAIN;
        }
        if (st == TP_OK) {
            run_train_case(index, blob, blob_len, &req, memory.bytes + used,
                           (uint32_t)sizeof memory.bytes - used, inputs, n_inputs, input_bytes,
                           flags);
            return 1;
        }
    }
    if (st == TP_OK && (req.input_bytes != input_bytes ||
                        (uint64_t)used + align8(req.arena_infer) > sizeof memory.bytes)) {
        st = TP_ERR_ARENA_TOO_SMALL;
    }
    if (st == TP_OK) {
        fill_pattern(memory.bytes + used, align8(req.arena_infer), index);
        st = tp_session_init(&session, blob, blob_len, memory.bytes + used, req.arena_infer, NULL,
                             0u);
    }
    for (i = 0; i < n_inputs; i++) {
        if (st != TP_OK) { /* a record per input all the same, with the status */
            (void)tp_board_write((const uint8_t *)"TPKR", 4u);
            send_u32(index);
            send_u32(i);
            send_u32((uint32_t)st);
            send_u32(0u);
            send_u32(0u);
            send_u32(0u);
            send_u32(0u);
            send_u32(0u);
            continue;
        }
        run_input(index, i, inputs + i * input_bytes, input_bytes, flags,
                  memory.bytes + used + align8(req.arena_infer),
                  (uint32_t)sizeof memory.bytes - used - align8(req.arena_infer));
    }
    return 1;
}

int tp_kerneltest_main(void)
{
    int ok = 1;
    uint32_t n, i, at = 12u;
    uint8_t magic[4];
    (void)tp_board_init();
    if (tp_board_bulk_open("kernel_cases.bin") < 0 || tp_board_bulk_read(0u, magic, 4u) != 4 ||
        memcmp(magic, "TPKC", 4) != 0 || read_u32(4u, &ok) != 1u) {
        (void)tp_board_write((const uint8_t *)"TPKX", 4u);
        return 1;
    }
    n = read_u32(8u, &ok);
    for (i = 0; i < n && ok; i++) {
        ok = run_case(i, &at);
    }
    (void)tp_board_write((const uint8_t *)"TPKE", 4u);
    send_u32(i);
    return ok ? 0 : 1;
}
