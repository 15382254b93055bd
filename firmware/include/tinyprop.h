/* tinyprop.h - the core's API: int8 forward and sparse-update training of a TFLite-derived
 * blob, in place (docs/architecture.md: the layers behind it).
 *
 * The caller owns all memory: the blob (flash or RAM, read only), one arena for activations,
 * gradients and scratch, and one params region for the trainable parameters (RAM copies of
 * the biases and weights the blob marks trainable). No heap, no globals: everything lives in
 * the tp_session the caller provides. Ask the blob first how much memory it needs
 * (tp_blob_requirements), then hand the memory to tp_session_init.
 *
 * The buffers, their sizes, alignment and lifetime:
 *   tp_session  tp_session_size() bytes, any alignment a struct has; from tp_session_init to
 *               the session's last use.
 *   blob        len bytes, any alignment (read byte by byte); read only; the session keeps
 *               pointers into it, so it outlives the session, unchanged.
 *   arena       at least req.arena_infer bytes (req.arena_train for tp_train_step: it returns
 *               TP_ERR_ARENA_TOO_SMALL otherwise), starting at a multiple of TP_MEMORY_ALIGN
 *               (the core reads float32 gradients, int64 sums and kernel scratch there as
 *               words); the session owns its contents from tp_session_init on: every call
 *               overwrites it, nothing in it outlives a call but the input written with tp_input
 *               and the output tp_output points to (until the next call).
 *   params      NULL (inference only), or at least req.params bytes starting at a multiple of
 *               TP_MEMORY_ALIGN; filled from the blob by tp_session_init and tp_reset_params,
 *               it holds the trained parameters and the optimizer state across calls: keep it
 *               (save it, restore it) to keep what the model learned.
 * tp_session_init refuses an arena or params region that is too small or misaligned (the fault
 * names which); nothing is allocated, and no buffer needs freeing beyond the caller's own.
 */
#ifndef TINYPROP_H
#define TINYPROP_H

/* No fused multiply-add: the float paths (loss, optimizer, gradient scales) must equal NumPy's
 * on every target, and the builds that pass no -ffp-contract=off (the Arduino IDE's and
 * ESP-IDF's GNU C modes contract by default) get it here. Every source includes this header
 * before any function, so the pragma covers the whole translation unit. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <stddef.h>
#include <stdint.h>

#include "tp_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TP_VERSION_MAJOR 0
#define TP_VERSION_MINOR 1
#define TP_VERSION_PATCH 0
#define TP_STRINGIFY_(x) #x
#define TP_STRINGIFY(x) TP_STRINGIFY_(x)
#define TP_VERSION                 \
    TP_STRINGIFY(TP_VERSION_MAJOR) \
    "." TP_STRINGIFY(TP_VERSION_MINOR) "." TP_STRINGIFY(TP_VERSION_PATCH)
/* The version as READY carries it (docs/protocol.md): major << 16 | minor << 8 | patch. */
#define TP_VERSION_NUMBER                                                     \
    (((uint32_t)TP_VERSION_MAJOR << 16) | ((uint32_t)TP_VERSION_MINOR << 8) | \
     (uint32_t)TP_VERSION_PATCH)

/* Every status of the core, the protocol and the board HAL: tp_status.h's table. */
#define TP_STATUS_ENUM_(name, code, kind, message) name = code,
typedef enum { TP_STATUS_TABLE(TP_STATUS_ENUM_) } tp_status;
#undef TP_STATUS_ENUM_

/* The alignment of the arena and the params region (bytes). */
#define TP_MEMORY_ALIGN 8u

/* What one blob needs from the caller, read from its (checked) header. */
typedef struct {
    uint32_t arena_infer; /* arena bytes for inference only */
    uint32_t arena_train; /* arena bytes for a training step (0: no training program) */
    uint32_t params;      /* bytes of the params region: trainable parameters, then any
                             optimizer state */
    uint32_t input_bytes;
    uint32_t n_classes;
    uint32_t model_id;  /* CRC32 of the source .tflite */
    uint32_t blob_id;   /* CRC32 stored in the blob's trailer */
    uint32_t optimizer; /* bytes of optimizer state at the end of the params region: one float32
                           velocity per trained parameter (convert --momentum); 0: plain SGD */
} tp_requirements;

typedef struct {
    float lr;       /* SGD learning rate */
    float momentum; /* in [0, 1); non-zero needs the blob's optimizer state (req.optimizer) */
    uint32_t seed;  /* stochastic rounding generator */
    uint32_t flags; /* TP_HP_* */
} tp_hparams;

#define TP_HP_NO_QAS 1u /* ablation: update without quantization-aware scaling */

typedef struct {
    float loss;         /* cross-entropy of the dequantized logits (train step only) */
    int32_t prediction; /* argmax of the logits */
    int32_t label;
    uint32_t arena_peak; /* measured arena high-water mark of this call, bytes */
    uint32_t skipped;    /* 1 if the update was skipped (non-finite loss or gradient) */
} tp_result;

/* Why the loader refused a blob, or tp_session_init the memory given with it: which check
 * failed (tp_fault_text names it and formats the whole fault into one line) and where. */
typedef struct {
    tp_status status; /* what the refusing call returned */
    uint16_t check;   /* the check that failed; 0: none (TP_OK) */
    uint16_t field;   /* the record's field at fault (tp_blob_layout.h's tp_blob_field); 0: none */
    uint32_t section; /* the section's id, its 4 bytes little-endian ("OPS " = 0x2053504F);
                         0: the header, the section table or the caller's memory */
    uint32_t record;  /* the record's index in that section; TP_FAULT_NO_RECORD: none */
    const char *file; /* the check's source file and line in builds with TP_DEBUG (and the */
    uint32_t line;    /* fuzzer's); NULL and 0 in others */
} tp_fault;

#define TP_FAULT_NO_RECORD 0xFFFFFFFFu

/* A checked blob: its section views and requirements, filled by the loader (read only). */
typedef struct {
    const uint8_t *blob;
    uint32_t blob_len;
    const uint8_t *tensors;
    const uint8_t *ops;
    const uint8_t *data;
    const uint8_t *train;   /* the training program (TRAN), or NULL */
    const uint8_t *scratch; /* the kernels' scratch plan (SCRA), or NULL: none */
    const uint8_t *tile;    /* the tiled stage (TILE), or NULL: every op runs whole */
    const uint8_t *inplace; /* the in-place ops (INPL), or NULL: none */
    uint32_t n_tensors, n_ops, data_len, train_len, tile_len, inplace_len;
    uint32_t stage_ops;             /* ops 0..stage_ops-1 run tile by tile (0: none) */
    uint32_t input, output, logits; /* tensor indices */
    tp_requirements req;
} tp_blob_view;

/* The parts of a training step, for profiling (tp_set_profile). */
typedef enum {
    TP_PART_FORWARD = 0,  /* forward op k, and its RELU mask */
    TP_PART_LOSS = 1,     /* the loss and the logits' gradient */
    TP_PART_BACKWARD = 2, /* op k's input gradients (its mask applied, dY folded) */
    TP_PART_GRAD = 3,     /* one of op k's bias or weight-row gradients */
    TP_PART_UPDATE = 4,   /* the optimizer on that bias or row (QAS, momentum, rounding) */
    TP_PART_END = 5       /* the step is done */
} tp_part;

/* Called as each part of a training step begins (tinyprop bench --only step reads a counter
 * there) in builds with TP_PROFILE defined; NULL, the default, calls nothing. */
typedef void (*tp_profile_hook)(void *ctx, uint32_t part, uint32_t op);

/* Where a blob that reads its input in row bands (tinyprop convert --input-rows, for a camera
 * that delivers rows) gets them: copy rows [row, row + n) of the input (n x W x C int8, row
 * after row: `bytes` in all) to dst and return TP_OK. Rows are asked for in increasing order,
 * each at most once a call of tp_infer / tp_train_step. */
typedef tp_status (*tp_row_source)(void *ctx, uint32_t row, uint32_t n, int8_t *dst,
                                   uint32_t bytes);

/* A training step under way: from tp_train_begin to the tp_train_continue that ends it. */
typedef struct {
    uint32_t phase; /* 0: none under way; else where it stands (tp_train.c) */
    uint32_t k, j;  /* the next forward op; TRAN records (forward: next; backward: left) */
    uint32_t key, v_end;
    int32_t label, prediction;
    float loss;
    const int8_t *logits;
} tp_step_run;

/* One blob bound to caller memory. Allocate it anywhere (tp_session_size() bytes); its fields
 * are the core's: read b.req and step, change nothing but through the functions below. */
typedef struct {
    tp_blob_view b;
    uint8_t *arena;
    uint32_t arena_len;
    uint8_t *params; /* NULL: an inference-only session, every constant read from the blob */
    uint32_t params_len;
    uint32_t arena_high; /* high-water mark of the current call */
    tp_hparams hp;
    uint32_t step;      /* training steps taken */
    uint32_t flags;     /* TP_SESSION_* */
    tp_row_source rows; /* the input's rows, for a blob that reads them in bands */
    void *rows_ctx;
    tp_fault fault;  /* why tp_session_init refused (fault.status: what it returned) */
    tp_step_run run; /* the training step under way, if any */
#ifdef TP_PROFILE    /* builds that profile steps (kerneltest): others keep the session's size */
    tp_profile_hook profile;
    void *profile_ctx;
#endif
} tp_session;

/* tp_session.flags: run the reference kernels even where the build has optimized ones (they
 * agree bit for bit; benchmarks and tests compare them in one binary). */
#define TP_SESSION_REFERENCE_KERNELS 1u

/* Check a blob completely (bounds, CRC, fields) and report what it needs. Never reads
 * outside blob[0..len). */
tp_status tp_blob_requirements(const uint8_t *blob, uint32_t len, tp_requirements *out);

/* The same, and on a refusal which check failed, in *fault (NULL: not wanted). */
tp_status tp_blob_check(const uint8_t *blob, uint32_t len, tp_requirements *out, tp_fault *fault);

/* Bind a checked blob to caller memory (the buffers above: sizes, TP_MEMORY_ALIGN, lifetime).
 * params may be NULL (and params_len 0) for inference only; when given, the trainable
 * parameters are copied in from the blob. On a refusal, tp_session_fault says why:
 * TP_ERR_ARENA_TOO_SMALL, TP_ERR_PARAMS_TOO_SMALL, TP_ERR_ARG for a misaligned buffer, or the
 * loader's status. */
tp_status tp_session_init(tp_session *s, const uint8_t *blob, uint32_t len, uint8_t *arena,
                          uint32_t arena_len, uint8_t *params, uint32_t params_len);

/* The fault of the last tp_session_init (for FFI bindings, which do not mirror the session). */
const tp_fault *tp_session_fault(const tp_session *s);

/* The fault as one line into buf (n bytes, NUL-terminated, cut to fit), e.g.
 * "TP_ERR_BLOB_INVALID: OPS record 12 field inputs: an operand is not ... (check op_operand)";
 * returns the line's length before any cut. */
uint32_t tp_fault_text(const tp_fault *f, char *buf, uint32_t n);

/* Restore the trainable parameters to the blob's values and zero the optimizer state. */
tp_status tp_reset_params(tp_session *s);

/* The model's int8 input tensor inside the arena: write a sample here before a call. NULL for
 * a blob that reads its input in row bands: give it a row source instead. */
int8_t *tp_input(tp_session *s);
/* The row source of a blob that reads its input in row bands (tp_input is NULL); a call
 * without one fails with TP_ERR_BAD_INPUT, as does a source that fails. */
void tp_set_row_source(tp_session *s, tp_row_source rows, void *ctx);
/* The model's int8 output (after tp_infer) inside the arena. */
const int8_t *tp_output(const tp_session *s);
uint32_t tp_output_bytes(const tp_session *s);
/* The name of class k (logit k), NUL-terminated UTF-8 inside the blob; NULL for a blob without
 * class names (convert without MODEL.labels.txt) or k >= n_classes. It walks the names before
 * k: O(total name bytes) a call, for printing a prediction, not for an inner loop. */
const char *tp_class_name(const tp_session *s, uint32_t k);

tp_status tp_infer(tp_session *s, tp_result *r);
tp_status tp_train_step(tp_session *s, int32_t label, tp_result *r);
/* The same step in slices, for a board that must keep serving a watchdog, a radio or a camera:
 * tp_train_begin checks what tp_train_step checks and runs nothing; each tp_train_continue
 * then runs at most `units` units of work (the tiled first ops, one op's forward, the loss,
 * one op's backward and update) and returns TP_STEP_PENDING while work is left, then what
 * tp_train_step returns, with *r filled as it fills it. The result is tp_train_step's bit for
 * bit. Until it ends the arena is the step's: tp_infer, tp_train_begin, tp_set_hparams,
 * tp_reset_params and tp_set_step abandon it (tp_train_continue then says TP_ERR_NO_STEP; the
 * parameters keep the updates already made). */
tp_status tp_train_begin(tp_session *s, int32_t label);
tp_status tp_train_continue(tp_session *s, uint32_t units, tp_result *r);
/* Train with hp from the next step on, once it passes every check (lr finite in [0,
 * TP_LR_MAX], momentum in [0, 1) and non-zero only with the blob's optimizer state, known
 * flags): else the session keeps its hyper-parameters and the status says which is wrong. */
tp_status tp_set_hparams(tp_session *s, const tp_hparams *hp);
/* The training step counter (it keys stochastic rounding): set it when resuming a run. */
void tp_set_step(tp_session *s, uint32_t step);

/* Choose the kernels of a session: reference (1) or the build's (0, the default). */
void tp_use_reference_kernels(tp_session *s, int reference);

#ifdef TP_PROFILE
/* Install a profiling hook (NULL: none) with its context (TP_PROFILE builds only). */
void tp_set_profile(tp_session *s, tp_profile_hook hook, void *ctx);
#endif

/* Bytes a tp_session occupies: lets FFI bindings allocate one without mirroring its fields. */
uint32_t tp_session_size(void);

/* "TP_OK", "TP_ERR_BLOB_CRC", ...; "TP_ERR_UNKNOWN" for any other value. */
const char *tp_status_name(tp_status st);
/* The status's one-line message: what was wrong and what to do (tp_status.h). */
const char *tp_status_message(tp_status st);

/* CRC-32 (IEEE 802.3, zlib's), continued from crc (0 to start): blob trailers, protocol frames
 * and params records. */
uint32_t tp_crc32(uint32_t crc, const uint8_t *data, size_t n);

#ifdef __cplusplus
}
#endif
#endif
