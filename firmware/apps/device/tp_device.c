/* tp_device.c - the device main loop (tp_device.h): frames in, tinyprop calls, frames out. */
#include "tp_device.h"

#include <string.h>

#include "tinyprop.h"
#include "tp_board.h"
#include "tp_le.h"
#include "tp_proto.h"
#include "tp_record.h"
#include "tp_store.h"
#include "tp_text.h"

#ifdef TP_MODEL_HEADER
#include TP_MODEL_HEADER
#define HAVE_BLOB 1
#else
#define HAVE_BLOB 0
#endif

#ifdef TP_MODEL_ARENA_BYTES
#define ARENA_BYTES TP_MODEL_ARENA_BYTES
#else
#define ARENA_BYTES TP_DEVICE_DEFAULT_ARENA_BYTES
#endif
#ifdef TP_MODEL_PARAMS_BYTES
#define PARAMS_BYTES TP_MODEL_PARAMS_BYTES
#else
#define PARAMS_BYTES TP_DEVICE_DEFAULT_PARAMS_BYTES
#endif

#define HDR TP_RECORD_HEADER
#define READ_BLOCK 256u
#define TEXT_MAX 88u        /* with its tp_text, the 100 bytes the device always kept for it */
#define FAULT_TEXT_MAX 192u /* a refused blob's fault line (tp_fault_text), on the stack */
/* The functions that build that line are never inlined: in the caller's frame (the request
 * loop, main) its bytes would sit on the stack under every training step. */
#if defined(__GNUC__) || defined(__clang__)
#define COLD_PATH __attribute__((noinline, cold))
#else
#define COLD_PATH
#endif
#define SAMPLE_FLAGS_KNOWN TP_SAMPLE_FLAG_OUTPUT

/* 8-byte aligned: the arena holds float gradients, the record int32 biases after its header. */
#ifdef TP_DEVICE_BOARD_BUFFERS
const uint32_t tp_device_arena_bytes = ARENA_BYTES;
const uint32_t tp_device_record_bytes = HDR + PARAMS_BYTES;
#define ARENA tp_device_arena
#define RECORD tp_device_record
/* The board leaves a buffer NULL when its heap had no block for it. */
#define NO_ARENA (ARENA == NULL)
#define NO_RECORD (RECORD == NULL)
#else
#define NO_ARENA 0
#define NO_RECORD 0
#if HAVE_BLOB /* firmware without a blob has no use for an arena */
static union {
    uint64_t align;
    uint8_t bytes[ARENA_BYTES > 0u ? ARENA_BYTES : 1u];
} arena;
#define ARENA arena.bytes
#endif
static union {
    uint64_t align;
    uint8_t bytes[HDR + PARAMS_BYTES];
} record;
#define RECORD record.bytes
#endif

/* Everything else the device keeps: its size is METRIC.static_bytes (with the board's own few
 * words, which the ELF shows). */
static struct {
    tp_session s;
    tp_frame_decoder dec;
    uint8_t rx[TP_PROTO_MAX_BODY];
    uint8_t tx[TP_PROTO_MAX_FRAME];
    uint8_t in[READ_BLOCK];
    char path[TP_PROTO_MAX_PAYLOAD + 1u];
    char text[TEXT_MAX];
    tp_text t;             /* builds in text */
    int loaded;            /* a blob is bound to the session */
    tp_status boot_code;   /* ERROR code for requests that need a blob, when none is bound */
    uint32_t input_filled; /* contiguous input bytes written since the last sample */
    uint32_t bulk_count;   /* samples in the open bulk file; 0: none open */
    uint32_t bulk_input;   /* file offset of the bulk sample being run (a row-band input) */
    int record_valid;      /* a PUSH_PARAMS header was accepted: later chunks may follow */
    /* The last request handled and its sample's METRIC fields (the rest are the device's
     * constants or its stack's high-water mark). A host that lost a training step's METRIC
     * sends the request again with its seq: it gets that METRIC again, and the step is not
     * trained twice. 24 bytes, so the buffers after dev keep their 8-byte alignment free. */
    struct {
        uint32_t step, counter, arena_peak;
        float loss;
        uint16_t seq;
        uint8_t type, trained, label, prediction, flags; /* trained: the METRIC answers seq */
    } last;
} dev;

#if TP_DEVICE_SAVE_EVERY > 0
static tp_save_policy autosave; /* when a training step saves (TP_DEVICE_SAVE_EVERY, _MINUTES) */
#endif

/* "a x b y c" */
/* ERROR and LOG texts (tp_text.h): "a x b y c", "ab". */
static const char *text_fmt(const char *a, uint32_t x, const char *b, uint32_t y, const char *c)
{
    tp_text_clear(&dev.t);
    tp_text_add(&dev.t, a);
    tp_text_u32(&dev.t, x);
    tp_text_add(&dev.t, b);
    tp_text_u32(&dev.t, y);
    tp_text_add(&dev.t, c);
    return dev.text;
}

static const char *text_join(const char *a, const char *b)
{
    tp_text_clear(&dev.t);
    tp_text_add(&dev.t, a);
    tp_text_add(&dev.t, b);
    return dev.text;
}

/* Send the frame an encoder just wrote to dev.tx. len is read through a pointer, after the
 * encoder (an argument of this call) has set it. An encoder failure is a firmware bug: nothing
 * useful could be sent about it. */
static void transmit(tp_status st, const size_t *len)
{
    if (st == TP_OK) {
        (void)tp_board_write(dev.tx, *len);
    }
}

/* code: any tp_status, sent as it is (the host has the table of their messages) */
static void send_error(uint16_t seq, tp_status code, const char *text)
{
    size_t len = 0;
    transmit(tp_proto_encode_error(dev.tx, sizeof dev.tx, seq, code, text, &len), &len);
}

static void send_log(const char *text)
{
    size_t len = 0;
    transmit(tp_proto_encode_log(dev.tx, sizeof dev.tx, 0, text, &len), &len);
}

static void send_ack(uint16_t seq, uint8_t type, uint32_t value)
{
    size_t len = 0;
    transmit(tp_proto_encode_ack(dev.tx, sizeof dev.tx, seq, type, value, &len), &len);
}

/* RAM for a blob's arena and params record: on a static build, the buffers this firmware has
 * plus what no one uses (a rebuild for another blob places its buffers there), one region; with
 * TP_DEVICE_BOARD_BUFFERS, the board's heap before it allocated them. */
static void room_for_buffers(tp_board_ram *ram)
{
    tp_board_free_ram(ram);
#ifndef TP_DEVICE_BOARD_BUFFERS
    /* their sizes, not sizeof: the alignment padding is not the blob's to have */
#if HAVE_BLOB
    ram->free_bytes += ARENA_BYTES;
#endif
    ram->free_bytes += HDR + PARAMS_BYTES;
    if (ram->free_bytes > tp_board_sram_bytes()) { /* a shortfall larger than the buffers */
        ram->free_bytes = 0u;
    }
    ram->largest_block = ram->free_bytes;
    ram->second_block = ram->free_bytes;
#endif
}

static void send_ready(uint16_t seq)
{
    tp_msg_ready m;
    tp_board_ram ram;
    size_t len = 0;
    room_for_buffers(&ram);
    m.free_bytes = ram.free_bytes;
    m.largest_block = ram.largest_block;
    m.second_block = ram.second_block;
    m.sram_bytes = tp_board_sram_bytes();
    m.arena_bytes = ARENA_BYTES;
    m.blob_id = dev.loaded ? dev.s.b.req.blob_id : 0u;
    m.fw_version = TP_VERSION_NUMBER;
    m.max_payload = TP_PROTO_MAX_PAYLOAD;
    m.counter_unit = TP_COUNTER_MICROSECONDS;
    (void)tp_proto_counter_unit(tp_board_counter_unit(), &m.counter_unit);
    m.board = tp_board_name();
    transmit(tp_proto_encode_ready(dev.tx, sizeof dev.tx, seq, &m, &len), &len);
}

/* ---- the params record (tp_record.h) ---- */

static uint32_t record_len(void)
{
    return tp_record_bytes(&dev.s);
}

static int save_record(void)
{
    int st;
    tp_record_seal(&dev.s, RECORD);
    st = tp_board_store_save(RECORD, record_len());
#if TP_DEVICE_SAVE_EVERY > 0
    if (st == TP_BOARD_OK) {
        tp_save_policy_saved(&autosave, tp_board_counter());
    }
#endif
    return st;
}

/* At boot: take the stored params when they are this blob's and intact, else the blob's. */
static void restore_params(void)
{
    uint32_t n = 0;
    const char *why = "cannot read it";
    int st = tp_board_store_load(RECORD, record_len(), &n);
    if (st == TP_BOARD_ERR_NOT_FOUND || st == TP_BOARD_ERR_UNSUPPORTED) {
        return;
    }
    if (st == TP_BOARD_OK && tp_record_restore(&dev.s, RECORD, n, &why) == TP_OK) {
        send_log("params restored from the store");
        return;
    }
    send_log(text_join("store ignored: ", why));
    (void)tp_reset_params(&dev.s);
}

/* Check the compiled-in blob, that it fits the static buffers, and bind it; why not stays in
 * the unbound session's fault (tp_session_fault), the ERROR text of requests that need a blob. */
static tp_status bind_model(void)
{
#if HAVE_BLOB
    tp_requirements req;
    uint32_t need;
    tp_status st = tp_blob_check(tp_model_blob, tp_model_blob_len, &req, &dev.s.fault);
    if (st != TP_OK) {
        return st;
    }
    need = req.arena_train > req.arena_infer ? req.arena_train : req.arena_infer;
    if (need > ARENA_BYTES || NO_ARENA) {
        return TP_ERR_ARENA_TOO_SMALL;
    }
    if (req.params > PARAMS_BYTES || NO_RECORD) {
        return TP_ERR_PARAMS_TOO_SMALL;
    }
    return tp_session_init(&dev.s, tp_model_blob, tp_model_blob_len, ARENA, ARENA_BYTES,
                           req.params > 0u ? RECORD + HDR : NULL, req.params);
#else
    return TP_ERR_NOT_LOADED;
#endif
}

static COLD_PATH void log_boot_refusal(tp_status st)
{
    char line[FAULT_TEXT_MAX] = "model blob rejected at boot: ";
    uint32_t at = (uint32_t)strlen(line);
    dev.s.fault.status = st; /* also a refusal of the static buffers' sizes */
    (void)tp_fault_text(&dev.s.fault, line + at, FAULT_TEXT_MAX - at);
    send_log(line);
}

static void boot_model(void)
{
    tp_status st = bind_model();
    if (st == TP_ERR_NOT_LOADED) {
        dev.boot_code = TP_ERR_NOT_LOADED;
        return;
    }
    if (st != TP_OK) {
        dev.boot_code = st;
        log_boot_refusal(st);
        return;
    }
    dev.loaded = 1;
    if (dev.s.b.req.params > 0u) {
        restore_params();
    }
#if TP_DEVICE_SAVE_EVERY > 0
    tp_save_policy_init(&autosave, TP_DEVICE_SAVE_EVERY,
                        strcmp(tp_board_counter_unit(), "us") == 0 ? TP_DEVICE_SAVE_MINUTES * 60u
                                                                   : 0u);
#endif
}

/* ---- requests ---- */

static COLD_PATH void send_no_blob(uint16_t seq)
{
    char line[FAULT_TEXT_MAX] = "no model blob in this firmware";
    if (dev.boot_code != TP_ERR_NOT_LOADED) {
        (void)tp_fault_text(&dev.s.fault, line, FAULT_TEXT_MAX);
    }
    send_error(seq, dev.boot_code, line);
}

static int need_blob(uint16_t seq)
{
    if (!dev.loaded) {
        send_no_blob(seq);
    }
    return dev.loaded;
}

/* A training step in slices of TP_DEVICE_SLICE units, the board's other work between them
 * (tp_board_yield): the same step bit for bit as tp_train_step. */
static tp_status train_sliced(uint8_t label, tp_result *r)
{
    tp_status st = tp_train_begin(&dev.s, label);
    while (st == TP_OK || st == TP_STEP_PENDING) {
        st = tp_train_continue(&dev.s, TP_DEVICE_SLICE, r);
        if (st != TP_STEP_PENDING) {
            break;
        }
        tp_board_yield();
    }
    return st;
}

/* The METRIC of the last sample (dev.last). */
static void send_metric(uint16_t seq)
{
    tp_msg_metric m;
    size_t len = 0;
    memset(&m, 0, sizeof m);
    m.step = dev.last.step;
    m.loss = dev.last.loss;
    m.counter = dev.last.counter;
    m.arena_peak = dev.last.arena_peak;
    m.stack_peak = tp_board_stack_peak();
    m.trainable_bytes = dev.s.b.req.params;
    m.static_bytes = (uint32_t)sizeof dev + HDR;
    m.label = dev.last.label;
    m.prediction = dev.last.prediction;
    m.correct = m.label == TP_LABEL_NONE ? TP_CORRECT_UNKNOWN : (uint8_t)(m.prediction == m.label);
    m.flags = dev.last.flags;
    transmit(tp_proto_encode_metric(dev.tx, sizeof dev.tx, seq, &m, &len), &len);
}

/* Train on or evaluate the sample in the input tensor; answers [OUTPUT] then METRIC. */
static void run_sample(uint16_t seq, uint8_t label, uint8_t flags, int train)
{
    tp_result r;
    tp_status st;
    size_t len = 0;
    uint64_t t0, t1;
    uint32_t step = dev.s.step;
    memset(&r, 0, sizeof r);
    t0 = tp_board_counter();
    st = train ? train_sliced(label, &r) : tp_infer(&dev.s, &r);
    t1 = tp_board_counter();
    dev.input_filled = 0;
    if (st != TP_OK && st != TP_ERR_NONFINITE) {
        send_error(seq, st, train ? "training step" : "inference");
        return;
    }
    if (!train && (flags & TP_SAMPLE_FLAG_OUTPUT)) {
        const int8_t *out = tp_output(&dev.s);
        uint32_t n = tp_output_bytes(&dev.s);
        if (tp_proto_encode_output(dev.tx, sizeof dev.tx, seq, (const uint8_t *)out, n, &len) !=
            TP_OK) {
            send_error(seq, TP_ERR_ARG, "output tensor larger than a frame");
            return;
        }
        transmit(TP_OK, &len);
    }
    dev.last.step = train ? step : dev.s.step;
    dev.last.loss = train ? r.loss : 0.0f; /* tp_infer computes no loss */
    dev.last.counter = t1 - t0 > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)(t1 - t0);
    dev.last.arena_peak = r.arena_peak;
    dev.last.label = label;
    dev.last.prediction = (uint8_t)r.prediction;
    dev.last.flags = (uint8_t)(st == TP_ERR_NONFINITE || r.skipped ? TP_METRIC_FLAG_SKIPPED : 0u);
    dev.last.flags |= (uint8_t)(train ? 0u : TP_METRIC_FLAG_EVAL);
    dev.last.trained = (uint8_t)train;
    send_metric(seq);
#if TP_DEVICE_SAVE_EVERY > 0
    if (train && dev.s.step != step && tp_save_policy_step(&autosave, tp_board_counter()) &&
        save_record() != TP_BOARD_OK) {
        send_log("autosave: cannot save the params record");
    }
#endif
}

/* Checks shared by TRAIN, EVAL and BULK_SAMPLE before the sample is touched. */
static int sample_args_ok(uint16_t seq, uint8_t label, uint8_t flags, int train)
{
    if (flags & (uint8_t)~SAMPLE_FLAGS_KNOWN) {
        send_error(seq, TP_ERR_ARG, "unknown sample flags");
        return 0;
    }
    if ((train || label != TP_LABEL_NONE) && label >= dev.s.b.req.n_classes) {
        send_error(seq, TP_ERR_BAD_LABEL,
                   text_fmt("label ", label, ", the model has ", dev.s.b.req.n_classes,
                            " classes"));
        return 0;
    }
    return 1;
}

static void on_input_chunk(const tp_host_msg *m)
{
    uint32_t off = m->u.chunk.offset, n = (uint32_t)m->data_len;
    if (tp_input(&dev.s) == NULL) {
        send_error(m->seq, TP_ERR_UNSUPPORTED,
                   "this blob reads its input in row bands: send samples with BULK_SAMPLE");
        return;
    }
    if (off > dev.s.b.req.input_bytes || n > dev.s.b.req.input_bytes - off) {
        send_error(m->seq, TP_ERR_BAD_OFFSET,
                   text_fmt("chunk at ", off, " ends past the input's ", dev.s.b.req.input_bytes,
                            " bytes"));
        return;
    }
    if (off > dev.input_filled) {
        send_error(m->seq, TP_ERR_BAD_OFFSET, "input chunks must follow each other from 0");
        return;
    }
    memcpy(tp_input(&dev.s) + off, m->data, n);
    if (off + n > dev.input_filled || off == 0u) {
        dev.input_filled = off + n;
    }
    send_ack(m->seq, m->type, dev.input_filled);
}

static void on_sample(const tp_host_msg *m, int train)
{
    uint8_t label = m->u.sample.label, flags = m->u.sample.flags;
    if (!sample_args_ok(m->seq, label, flags, train)) {
        return;
    }
    if (dev.input_filled != dev.s.b.req.input_bytes) {
        send_error(m->seq, TP_ERR_WRONG_SAMPLE_SIZE,
                   text_fmt("input has ", dev.input_filled, " of ", dev.s.b.req.input_bytes,
                            " bytes"));
        return;
    }
    run_sample(m->seq, label, flags, train);
}

static void on_set_hparams(const tp_host_msg *m)
{
    tp_hparams hp;
    tp_status st;
    if (m->u.hparams.flags & ~(uint32_t)TP_HPARAM_FLAG_QAS) { /* the wire's flags, not the core's */
        send_error(m->seq, TP_ERR_ARG, "unknown SET_HPARAMS flags");
        return;
    }
    hp.lr = m->u.hparams.lr;
    hp.momentum = m->u.hparams.momentum;
    hp.seed = m->u.hparams.seed;
    hp.flags = (m->u.hparams.flags & TP_HPARAM_FLAG_QAS) ? 0u : TP_HP_NO_QAS;
    st = tp_set_hparams(&dev.s, &hp);
    if (st != TP_OK) {
        send_error(m->seq, st, ""); /* the status names the field and the fix */
        return;
    }
    send_ack(m->seq, m->type, 0u);
}

static void on_pull(const tp_host_msg *m)
{
    uint32_t room = (uint32_t)tp_proto_max_payload_for(sizeof dev.tx) - 4u, n = 0;
    uint32_t off = m->u.pull.offset;
    size_t len = 0;
    if (tp_record_chunk(&dev.s, RECORD, off, m->u.pull.max_len < room ? m->u.pull.max_len : room,
                        &n) != TP_OK) {
        send_error(m->seq, TP_ERR_BAD_OFFSET, "offset past the end of the params record");
        return;
    }
    transmit(tp_proto_encode_params(dev.tx, sizeof dev.tx, m->seq, off, RECORD + off, n, &len),
             &len);
}

static void on_push(const tp_host_msg *m)
{
    uint32_t off = m->u.chunk.offset, n = (uint32_t)m->data_len, total = record_len();
    const char *why = "";
    if (off > total || n > total - off) {
        send_error(m->seq, TP_ERR_BAD_OFFSET, "bytes outside the params record");
        return;
    }
    if (off == 0u) {
        if (n < HDR) {
            send_error(m->seq, TP_ERR_BAD_PAYLOAD, "the first push must hold the record header");
            return;
        }
        if (tp_record_match(&dev.s, m->data, &why) != TP_OK) {
            dev.record_valid = 0;
            send_error(m->seq, TP_ERR_RECORD_MISMATCH, why);
            return;
        }
        dev.record_valid = 1;
        dev.s.step = tp_rd_u32(m->data + 12);
    } else if (off < HDR || !dev.record_valid) {
        send_error(m->seq, TP_ERR_BAD_STATE, "push the record header at offset 0 first");
        return;
    }
    memcpy(RECORD + off, m->data, n);
    send_ack(m->seq, m->type, n);
}

static void on_save(const tp_host_msg *m)
{
    int st = save_record();
    if (st == TP_BOARD_OK) {
        send_ack(m->seq, m->type, record_len());
    } else {
        send_error(m->seq, (tp_status)-st, "cannot save the params record");
    }
}

static void on_bulk_open(const tp_host_msg *m)
{
    uint32_t per = 1u + dev.s.b.req.input_bytes;
    int32_t size;
    memcpy(dev.path, m->data, m->data_len);
    dev.path[m->data_len] = '\0';
    dev.bulk_count = 0;
    size = tp_board_bulk_open(dev.path);
    if (size < 0) {
        send_error(m->seq, (tp_status)-size, "cannot open the bulk file");
        return;
    }
    if ((uint32_t)size % per != 0u) {
        send_error(m->seq, TP_ERR_WRONG_SAMPLE_SIZE,
                   text_fmt("bulk file has ", (uint32_t)size, " bytes, not a multiple of ", per,
                            " (label + input)"));
        return;
    }
    dev.bulk_count = (uint32_t)size / per;
    send_ack(m->seq, m->type, dev.bulk_count);
}

/* The row source of a blob that reads its input in row bands: the rows of the bulk sample
 * being run, read from the host's file as the first tiles ask for them (as a camera would
 * deliver them), never held whole. */
static tp_status bulk_rows(void *ctx, uint32_t row, uint32_t n, int8_t *dst, uint32_t bytes)
{
    uint32_t per_row = bytes / (n ? n : 1u);
    (void)ctx;
    return tp_board_bulk_read(dev.bulk_input + row * per_row, (uint8_t *)dst, bytes) ==
                   (int32_t)bytes
               ? TP_OK
               : TP_ERR_BAD_INPUT;
}

static void on_bulk_sample(const tp_host_msg *m)
{
    uint32_t i = m->u.bulk_sample.index, per = 1u + dev.s.b.req.input_bytes;
    uint8_t mode = m->u.bulk_sample.mode, label = 0;
    if (dev.bulk_count == 0u) {
        send_error(m->seq, TP_ERR_BAD_STATE, "no bulk file open: send BULK_OPEN first");
        return;
    }
    if (mode != TP_BULK_TRAIN && mode != TP_BULK_EVAL) {
        send_error(m->seq, TP_ERR_ARG, "mode must be 0 (train) or 1 (eval)");
        return;
    }
    if (i >= dev.bulk_count) {
        send_error(m->seq, TP_ERR_BAD_OFFSET,
                   text_fmt("sample ", i, " out of range: the file has ", dev.bulk_count,
                            " samples"));
        return;
    }
    if (tp_board_bulk_read(i * per, &label, 1u) != 1) {
        send_error(m->seq, TP_ERR_IO, "cannot read the sample's label");
        return;
    }
    if (!sample_args_ok(m->seq, label, m->u.bulk_sample.flags, mode == TP_BULK_TRAIN)) {
        return;
    }
    dev.input_filled = 0;
    if (tp_input(&dev.s) == NULL) { /* a row-band input: the core reads its rows */
        dev.bulk_input = i * per + 1u;
        tp_set_row_source(&dev.s, bulk_rows, NULL);
    } else if (tp_board_bulk_read(i * per + 1u, (uint8_t *)tp_input(&dev.s),
                                  dev.s.b.req.input_bytes) != (int32_t)dev.s.b.req.input_bytes) {
        send_error(m->seq, TP_ERR_IO, "cannot read the sample's input");
        return;
    }
    run_sample(m->seq, label, m->u.bulk_sample.flags, mode == TP_BULK_TRAIN);
}

/* A training request the device answered already (the same seq and type as the last one):
 * its METRIC again. Every other request is idempotent, and simply handled again. */
static int answered_already(const tp_host_msg *m)
{
    if (m->seq != 0u && m->seq == dev.last.seq && m->type == dev.last.type && dev.last.trained) {
        send_metric(m->seq);
        return 1;
    }
    dev.last.seq = m->seq;
    dev.last.type = m->type;
    dev.last.trained = 0u;
    return 0;
}

static void handle(const tp_host_msg *m)
{
    if (answered_already(m)) {
        return;
    }
    if (m->type == TP_MSG_HELLO) {
        send_ready(m->seq);
        return;
    }
    if (!need_blob(m->seq)) {
        return;
    }
    switch (m->type) {
    case TP_MSG_INPUT_CHUNK:
        on_input_chunk(m);
        break;
    case TP_MSG_TRAIN:
        on_sample(m, 1);
        break;
    case TP_MSG_EVAL:
        on_sample(m, 0);
        break;
    case TP_MSG_SET_HPARAMS:
        on_set_hparams(m);
        break;
    case TP_MSG_PULL_PARAMS:
        on_pull(m);
        break;
    case TP_MSG_PUSH_PARAMS:
        on_push(m);
        break;
    case TP_MSG_SAVE_PARAMS:
        on_save(m);
        break;
    case TP_MSG_RESET: {
        tp_status st = tp_reset_params(&dev.s);
        if (st == TP_OK) {
            send_ack(m->seq, m->type, 0u);
        } else {
            send_error(m->seq, st, "reset");
        }
        break;
    }
    case TP_MSG_BULK_OPEN:
        on_bulk_open(m);
        break;
    case TP_MSG_BULK_SAMPLE:
        on_bulk_sample(m);
        break;
    default:
        send_error(m->seq, TP_ERR_UNKNOWN_TYPE, "not handled by this device");
        break;
    }
}

/* Decode every frame in a block read from the link and answer it. */
static void serve_block(const uint8_t *p, size_t n)
{
    tp_host_msg m;
    tp_status st;
    while ((st = tp_proto_next(&dev.dec, &p, &n, &m)) != TP_PROTO_MORE) {
        if (st == TP_OK) {
            handle(&m);
        } else {
            send_error(m.seq, st, "");
        }
    }
}

int tp_device_main(void)
{
    if (tp_board_init() != TP_BOARD_OK) {
        return 1;
    }
    (void)tp_frame_decoder_init(&dev.dec, dev.rx, sizeof dev.rx);
    tp_text_init(&dev.t, dev.text, TEXT_MAX);
    boot_model();
    send_ready(0);
    for (;;) {
        int got = tp_board_read(dev.in, sizeof dev.in);
        if (got == TP_BOARD_ERR_CLOSED) {
            return 0;
        }
        if (got > 0) {
            serve_block(dev.in, (size_t)got);
        }
    }
}
