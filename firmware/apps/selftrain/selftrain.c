/*
 * selftrain.c - a self-training run that needs no host: the model blob and a few labelled
 * samples are compiled in, and the results are text lines on the board link, so a person on a
 * serial monitor, or a Wokwi scenario (boards/esp32/scenario.yaml), can follow and check them.
 * Portable: it uses only tp_board.h and the core (tinyprop.h).
 *
 * Build: TP_MODEL_HEADER names the blob header (tinyprop.boards.write_blob_header), and
 * TP_SAMPLES_HEADER the samples header (tinyprop.boards.write_samples_header: samples, labels,
 * steps, learning rate, seed). `make -C boards/qemu-m4 APP=selftrain BLOB=... SAMPLES=...`;
 * on an Arduino board, -DTP_APP_SELFTRAIN (platformio.ini's esp32dev-wokwi env).
 *
 * Output, one line each ("%08x" is 8 hex digits, losses also as their float32 bits):
 *
 *   selftrain ready board <name> sram <bytes> blob <%08x> samples <n> steps <k>
 *   eval before correct <c>/<n>
 *   step <i> loss <decimal> bits <%08x> pred <p> label <y>      (k lines, samples in turn)
 *   eval after correct <c>/<n>
 *   selftrain ok: loss <first pass mean> -> <last pass mean>, accuracy <before>/<n> -> <after>/<n>,
 *     params crc32 <%08x>                                        (one line)
 *
 * The run passes (exit status 0, "selftrain ok") when the mean loss of the last pass over the
 * samples is below that of the first pass and the accuracy did not drop; otherwise the last
 * line starts "selftrain failed (<why>)" and the exit status is 1. The verdict and the metrics
 * share one line: a Wokwi scenario only sees lines printed after its previous wait matched.
 * A core error ends the run with "selftrain error <status name> in <call>" and the status code
 * as exit status.
 */
#include <stdint.h>
#include <string.h>

#include "tinyprop.h"
#include "tp_board.h"
#include "tp_text.h"

#if !defined(TP_MODEL_HEADER) || !defined(TP_SAMPLES_HEADER)
#error \
    "define TP_MODEL_HEADER and TP_SAMPLES_HEADER (firmware/apps/selftrain/selftrain_headers.py writes both)"
#endif
#include TP_MODEL_HEADER
#include TP_SAMPLES_HEADER

#include "tp_selftrain.h"

#if TP_SELFTRAIN_STEPS < TP_SAMPLES_COUNT
#error "the run needs at least one pass over the samples (TP_SELFTRAIN_STEPS >= TP_SAMPLES_COUNT)"
#endif

/* The memory the blob asks for, static unless the board provides it (see selftrain.h). */
#ifdef TP_SELFTRAIN_BOARD_BUFFERS
const uint32_t tp_selftrain_arena_bytes = TP_MODEL_ARENA_BYTES;
const uint32_t tp_selftrain_params_bytes = TP_MODEL_PARAMS_BYTES;
#define ARENA tp_selftrain_arena
#define PARAMS tp_selftrain_params
#else
/* 8-byte aligned: the arena holds float gradients, the params int32 biases. */
static union {
    uint64_t align;
    uint8_t bytes[TP_MODEL_ARENA_BYTES];
} arena;
static union {
    uint64_t align;
    uint8_t bytes[TP_MODEL_PARAMS_BYTES];
} params;
#define ARENA arena.bytes
#define PARAMS params.bytes
#endif

/* A line is built here and sent whole (tp_text.h: snprintf would pull malloc into newlib-nano
 * builds). */
static char line_buf[160];
static tp_text line;

static uint32_t float_bits(float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return bits;
}

static void send(void)
{
    tp_text_add(&line, "\n");
    (void)tp_board_write((const uint8_t *)line.buf, line.len); /* nowhere to report a failure */
    tp_text_clear(&line);
}

/* Report a core error (what failed, its status name) and return its code as exit status. */
static int fail(const char *what, tp_status st)
{
    tp_text_add(&line, "selftrain error ");
    tp_text_add(&line, tp_status_name(st));
    tp_text_add(&line, " in ");
    tp_text_add(&line, what);
    send();
    return (int)st;
}

static void load_sample(tp_session *s, uint32_t i)
{
    memcpy(tp_input(s), tp_selftrain_samples + (size_t)i * TP_SAMPLES_INPUT_BYTES,
           TP_SAMPLES_INPUT_BYTES);
}

/* Infer every sample, print "eval <when> correct c/n" and return c (or a negative status). */
static int32_t evaluate(tp_session *s, const char *when)
{
    uint32_t correct = 0;
    for (uint32_t i = 0; i < TP_SAMPLES_COUNT; ++i) {
        tp_result r;
        load_sample(s, i);
        tp_status st = tp_infer(s, &r);
        if (st != TP_OK) {
            return -(int32_t)fail("tp_infer", st);
        }
        correct += r.prediction == (int32_t)tp_selftrain_labels[i];
    }
    tp_text_add(&line, "eval ");
    tp_text_add(&line, when);
    tp_text_add(&line, " correct ");
    tp_text_u32(&line, correct);
    tp_text_add(&line, "/");
    tp_text_u32(&line, TP_SAMPLES_COUNT);
    send();
    return (int32_t)correct;
}

int tp_selftrain_main(void)
{
    static tp_session s;
    tp_requirements req;
    tp_text_init(&line, line_buf, sizeof line_buf);
    if (tp_board_init() != TP_BOARD_OK) {
        return 1;
    }
    tp_status st = tp_blob_requirements(tp_model_blob, tp_model_blob_len, &req);
    if (st == TP_OK && req.input_bytes != TP_SAMPLES_INPUT_BYTES) {
        st = TP_ERR_BAD_INPUT; /* samples made for another model */
    }
    if (st != TP_OK) {
        return fail("the compiled-in blob", st);
    }
    st = tp_session_init(&s, tp_model_blob, tp_model_blob_len, ARENA, TP_MODEL_ARENA_BYTES, PARAMS,
                         TP_MODEL_PARAMS_BYTES);
    if (st != TP_OK) {
        return fail("tp_session_init", st);
    }
    const tp_hparams hp = {.lr = TP_SELFTRAIN_LR, .seed = TP_SELFTRAIN_SEED}; /* plain SGD */
    st = tp_set_hparams(&s, &hp);
    if (st != TP_OK) {
        return fail("tp_set_hparams", st);
    }

    tp_text_add(&line, "selftrain ready board ");
    tp_text_add(&line, tp_board_name());
    tp_text_add(&line, " sram ");
    tp_text_u32(&line, tp_board_sram_bytes());
    tp_text_add(&line, " blob ");
    tp_text_hex32(&line, req.blob_id);
    tp_text_add(&line, " samples ");
    tp_text_u32(&line, TP_SAMPLES_COUNT);
    tp_text_add(&line, " steps ");
    tp_text_u32(&line, TP_SELFTRAIN_STEPS);
    send();

    int32_t before = evaluate(&s, "before");
    if (before < 0) {
        return (int)-before;
    }
    /* Mean loss of the first and of the last pass over the samples: learning shows as a drop. */
    float first = 0.0f, last = 0.0f;
    uint32_t last_from = TP_SELFTRAIN_STEPS - TP_SAMPLES_COUNT;
    for (uint32_t i = 0; i < TP_SELFTRAIN_STEPS; ++i) {
        uint32_t k = i % TP_SAMPLES_COUNT;
        tp_result r;
        load_sample(&s, k);
        st = tp_train_step(&s, (int32_t)tp_selftrain_labels[k], &r);
        if (st != TP_OK && st != TP_ERR_NONFINITE) { /* a skipped update is shown, not fatal */
            return fail("tp_train_step", st);
        }
        first += i < TP_SAMPLES_COUNT ? r.loss : 0.0f;
        last += i >= last_from ? r.loss : 0.0f;
        tp_text_add(&line, "step ");
        tp_text_u32(&line, i);
        tp_text_add(&line, " loss ");
        tp_text_decimal(&line, r.loss);
        tp_text_add(&line, " bits ");
        tp_text_hex32(&line, float_bits(r.loss));
        tp_text_add(&line, " pred ");
        tp_text_u32(&line, (uint32_t)r.prediction);
        tp_text_add(&line, " label ");
        tp_text_u32(&line, (uint32_t)r.label);
        tp_text_add(&line, r.skipped ? " skipped" : "");
        send();
    }
    int32_t after = evaluate(&s, "after");
    if (after < 0) {
        return (int)-after;
    }
    first /= (float)TP_SAMPLES_COUNT;
    last /= (float)TP_SAMPLES_COUNT;
    int passed = last < first && after >= before;
    tp_text_add(&line, passed ? "selftrain ok" : "selftrain failed");
    tp_text_add(&line, !(last < first)  ? " (the loss did not fall)"
                       : after < before ? " (accuracy dropped)"
                                        : "");
    tp_text_add(&line, ": loss ");
    tp_text_decimal(&line, first);
    tp_text_add(&line, " -> ");
    tp_text_decimal(&line, last);
    tp_text_add(&line, ", accuracy ");
    tp_text_u32(&line, (uint32_t)before);
    tp_text_add(&line, "/");
    tp_text_u32(&line, TP_SAMPLES_COUNT);
    tp_text_add(&line, " -> ");
    tp_text_u32(&line, (uint32_t)after);
    tp_text_add(&line, "/");
    tp_text_u32(&line, TP_SAMPLES_COUNT);
    tp_text_add(&line, ", params crc32 ");
    tp_text_hex32(&line, tp_crc32(0, PARAMS, req.params));
    send();
    return passed ? 0 : 1;
}
