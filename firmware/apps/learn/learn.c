/* learn.c - the learn application (tp_learn.h): a board learns from its own camera. */
#include "tp_learn.h"

#include <string.h>

#include "tinyprop.h"
#include "tp_board.h"
#include "tp_image.h"
#include "tp_le.h"
#include "tp_proto.h"
#include "tp_record.h"
#include "tp_store.h"
#include "tp_text.h"

#ifndef TP_MODEL_HEADER
#error "the learn application needs a model: build it with BLOB=path/to/model_tpb.h"
#endif
#include TP_MODEL_HEADER

#define HDR TP_RECORD_HEADER
#define THUMB_SIDE 48u /* the thumbnail GET_FRAME sends: 48 x 48, 1 or 3 channels */
#define TEXT_MAX 224u
#define READ_BLOCK 64u
#define NO_LABEL TP_BOARD_NO_LABEL
#define CAMERA_RETRIES 8u /* failed camera reads in a row before the app gives up */

#if TP_LEARN_REPLAY > 0 && !defined(TP_MODEL_INPUT_BYTES)
#error "TP_LEARN_REPLAY needs the header's TP_MODEL_INPUT_BYTES (tinyprop's blob header writes it)"
#endif
#if TP_LEARN_REPLAY > 0
#define REPLAY_BYTES ((uint32_t)TP_LEARN_REPLAY * TP_MODEL_INPUT_BYTES)
#else
#define REPLAY_BYTES 0u
#endif

/* 8-byte aligned: the arena holds float gradients, the record int32 biases after its header. */
#ifdef TP_LEARN_BOARD_BUFFERS
const uint32_t tp_learn_arena_bytes = TP_MODEL_ARENA_BYTES;
const uint32_t tp_learn_record_bytes = HDR + TP_MODEL_PARAMS_BYTES;
const uint32_t tp_learn_frame_bytes = TP_LEARN_FRAME_BYTES;
#define ARENA tp_learn_arena
#define RECORD tp_learn_record
#define FRAME tp_learn_frame
#define NO_BUFFERS (ARENA == NULL || RECORD == NULL || FRAME == NULL)
#else
static union {
    uint64_t align;
    uint8_t bytes[TP_MODEL_ARENA_BYTES];
} arena;
static union {
    uint64_t align;
    uint8_t bytes[HDR + TP_MODEL_PARAMS_BYTES];
} record;
static union {
    uint64_t align;
    uint8_t bytes[TP_LEARN_FRAME_BYTES];
} frame;
#define ARENA arena.bytes
#define RECORD record.bytes
#define FRAME frame.bytes
#define NO_BUFFERS 0
#endif

#if TP_LEARN_REPLAY > 0
/* the kept frames, as the model's int8 inputs, and their labels */
static int8_t replay[REPLAY_BYTES];
static uint8_t replay_label[TP_LEARN_REPLAY];
#endif

static struct {
    tp_session s;
    tp_frame_decoder dec;
    uint8_t rx[TP_PROTO_MAX_BODY];
    uint8_t tx[TP_PROTO_MAX_FRAME];
    uint8_t in[READ_BLOCK];
    char text[TEXT_MAX];
    tp_text t;          /* builds in text */
    char why[TEXT_MAX]; /* the text of the error being reported (often built in text) */
    tp_camera_mode mode;
    tp_model_image model;
    int8_t table[256];   /* pixel value -> int8 input (tp_pixel_table) */
    tp_status boot_code; /* why the app cannot learn (TP_OK: it can) */
    int host;            /* the host said HELLO: protocol frames from now on, not text lines */
    uint32_t frames;     /* frames taken; the latest is frames - 1 */
    uint32_t frame_len;  /* bytes of the latest frame in FRAME (0: none yet) */
    int trained;         /* the latest frame was trained on */
    uint32_t labelled;   /* labelled frames trained on (replays not counted) */
    uint32_t correct;    /* of those, predicted right before their step */
    uint32_t thumb_every;
    uint32_t kept, oldest; /* replay: frames kept, the slot of the oldest */
    tp_save_policy saves;  /* when a labelled step saves */
} app;

/* ---- text: lines on the link before the host says HELLO, LOG frames after ---- */

static void transmit(tp_status st, const size_t *len)
{
    if (st == TP_OK) {
        (void)tp_board_write(app.tx, *len);
    }
}

/* Send the text built so far: a LOG frame to an attached host, else a line. */
static void text_send(void)
{
    size_t len = 0;
    if (app.host) {
        transmit(tp_proto_encode_log(app.tx, sizeof app.tx, 0, app.text, &len), &len);
    } else {
        static const uint8_t newline = '\n';
        (void)tp_board_write((const uint8_t *)app.text, app.t.len);
        (void)tp_board_write(&newline, 1u);
    }
    tp_text_clear(&app.t);
}

/* An error: an ERROR frame (seq: the request's, 0 for the app's own) or a line. `what` may
 * be the text just built: it is kept in app.why. */
static void report(uint16_t seq, tp_status code, const char *what)
{
    size_t len = 0;
    if (what != app.why) {
        strncpy(app.why, what, TEXT_MAX - 1u);
    }
    tp_text_clear(&app.t);
    what = app.why;
    if (app.host) {
        transmit(tp_proto_encode_error(app.tx, sizeof app.tx, seq, code, what, &len), &len);
    } else {
        tp_text_add(&app.t, "learn error ");
        tp_text_add(&app.t, tp_status_name(code));
        tp_text_add(&app.t, ": ");
        tp_text_add(&app.t, what);
        text_send();
    }
    tp_text_clear(&app.t);
}

static void text_class(int32_t k)
{
    const char *name = k >= 0 ? tp_class_name(&app.s, (uint32_t)k) : NULL;
    tp_text_u32(&app.t, (uint32_t)k);
    if (name != NULL) {
        tp_text_add(&app.t, " ");
        tp_text_add(&app.t, name);
    }
}

static const char *format_name(uint32_t format)
{
    return format == TP_IMAGE_GRAY8 ? "gray8" : format == TP_IMAGE_RGB888 ? "rgb888" : "rgb565";
}

static uint32_t frame_bytes_of(const tp_camera_mode *m)
{
    uint32_t per = m->format == TP_IMAGE_GRAY8 ? 1u : m->format == TP_IMAGE_RGB888 ? 3u : 2u;
    return m->width * m->height * per;
}

/* The RAM the app holds besides the stack: what METRIC calls static (the app's state, the
 * record header, the frame and the replay buffer), then the arena and the params. */
static uint32_t static_bytes(void)
{
    return (uint32_t)sizeof app + HDR + TP_LEARN_FRAME_BYTES + REPLAY_BYTES;
}

/* "learn ready board B blob ID camera WxH FORMAT classes N step K frame-buffer F replay R
 * (X bytes) static S arena A params P save-every E lr-bits L" */
static void send_ready_line(void)
{
    uint32_t lr_bits;
    float lr = TP_LEARN_LR;
    memcpy(&lr_bits, &lr, sizeof lr_bits);
    tp_text_add(&app.t, "learn ready board ");
    tp_text_add(&app.t, tp_board_name());
    tp_text_add(&app.t, " blob ");
    tp_text_hex32(&app.t, app.s.b.req.blob_id);
    tp_text_add(&app.t, " camera ");
    tp_text_u32(&app.t, app.mode.width);
    tp_text_add(&app.t, "x");
    tp_text_u32(&app.t, app.mode.height);
    tp_text_add(&app.t, " ");
    tp_text_add(&app.t, format_name(app.mode.format));
    tp_text_add(&app.t, " classes ");
    tp_text_u32(&app.t, app.s.b.req.n_classes);
    tp_text_add(&app.t, " step ");
    tp_text_u32(&app.t, app.s.step);
    tp_text_add(&app.t, " frame-buffer ");
    tp_text_u32(&app.t, TP_LEARN_FRAME_BYTES);
    tp_text_add(&app.t, " replay ");
    tp_text_u32(&app.t, TP_LEARN_REPLAY);
    tp_text_add(&app.t, " ");
    tp_text_u32(&app.t, REPLAY_BYTES);
    tp_text_add(&app.t, " static ");
    tp_text_u32(&app.t, static_bytes());
    tp_text_add(&app.t, " arena ");
    tp_text_u32(&app.t, TP_MODEL_ARENA_BYTES);
    tp_text_add(&app.t, " params ");
    tp_text_u32(&app.t, app.s.b.req.params);
    tp_text_add(&app.t, " save-every ");
    tp_text_u32(&app.t, TP_LEARN_SAVE_EVERY);
    tp_text_add(&app.t, " lr-bits ");
    tp_text_hex32(&app.t, lr_bits);
    text_send();
}

/* ---- boot ---- */

static void restore_params(void)
{
    uint32_t n = 0;
    const char *why = "cannot read it";
    int st = tp_board_store_load(RECORD, tp_record_bytes(&app.s), &n);
    if (st == TP_BOARD_ERR_NOT_FOUND || st == TP_BOARD_ERR_UNSUPPORTED) {
        return;
    }
    if (st == TP_BOARD_OK && tp_record_restore(&app.s, RECORD, n, &why) == TP_OK) {
        tp_text_add(&app.t, "params restored from the store at step ");
        tp_text_u32(&app.t, app.s.step);
        text_send();
        return;
    }
    tp_text_add(&app.t, "store ignored: ");
    tp_text_add(&app.t, why);
    text_send();
    (void)tp_reset_params(&app.s);
}

/* Bind the blob, restore what was learned, open the camera. On failure the status, with
 * app.text holding why. */
static tp_status boot(void)
{
    tp_requirements req;
    tp_hparams hp = {.lr = TP_LEARN_LR, .momentum = 0.0f, .seed = TP_LEARN_SEED, .flags = 0u};
    tp_camera_mode want = {TP_LEARN_CAMERA_WIDTH, TP_LEARN_CAMERA_HEIGHT, TP_LEARN_CAMERA_FORMAT,
                           0u};
    tp_status st = tp_blob_requirements(tp_model_blob, tp_model_blob_len, &req);
    int got;
    if (st != TP_OK) {
        tp_text_add(&app.t, "the compiled-in model blob is refused");
        return st;
    }
    if (NO_BUFFERS || req.params > TP_MODEL_PARAMS_BYTES ||
        (req.arena_train > req.arena_infer ? req.arena_train : req.arena_infer) >
            TP_MODEL_ARENA_BYTES) {
        tp_text_add(&app.t, "no RAM for the blob's arena and params: rebuild with its header");
        return TP_ERR_ARENA_TOO_SMALL;
    }
    st = tp_session_init(&app.s, tp_model_blob, tp_model_blob_len, ARENA, TP_MODEL_ARENA_BYTES,
                         RECORD + HDR, req.params);
    if (st == TP_OK && req.params == 0u) {
        st = TP_ERR_NO_TRAIN; /* an inference-only blob */
    }
    if (st != TP_OK) {
        tp_text_add(&app.t,
                    "tp_session_init: this blob cannot be trained here; convert it for training");
        return st;
    }
    restore_params();
    /* the time limit on boards whose counter is a clock */
    tp_save_policy_init(&app.saves, TP_LEARN_SAVE_EVERY,
                        strcmp(tp_board_counter_unit(), "us") == 0 ? TP_LEARN_SAVE_MINUTES * 60u
                                                                   : 0u);
    st = tp_set_hparams(&app.s, &hp);
    if (st != TP_OK) {
        tp_text_add(&app.t, "TP_LEARN_LR is out of range");
        return st;
    }
    if (tp_model_image_of(&app.s, &app.model) != TP_OK ||
        tp_pixel_table(app.model.pixels, app.model.scale, app.model.zero_point, app.table) !=
            TP_OK) {
        tp_text_add(&app.t, "the model's input is not an image (int8, H x W x 1 or 3, whole)");
        return TP_ERR_BAD_INPUT;
    }
    got = tp_board_camera_open(&want);
    if (got == TP_BOARD_ERR_UNSUPPORTED) {
        tp_text_add(&app.t,
                    (TP_LEARN_CAMERA_WIDTH | TP_LEARN_CAMERA_HEIGHT | TP_LEARN_CAMERA_FORMAT) != 0u
                        ? "the camera cannot deliver the mode this build asks for "
                          "(TP_LEARN_CAMERA_WIDTH/HEIGHT/FORMAT)"
                        : "no camera on this board");
        return TP_ERR_UNSUPPORTED;
    }
    if (got != TP_BOARD_OK) {
        tp_text_add(&app.t, "the camera did not start");
        return (tp_status)-got;
    }
    app.mode = want;
    if (frame_bytes_of(&app.mode) > TP_LEARN_FRAME_BYTES) {
        tp_text_add(&app.t, "the camera's frames are larger than TP_LEARN_FRAME_BYTES: raise it");
        return TP_ERR_TOO_BIG;
    }
    return TP_OK;
}

/* ---- the frame path ---- */

static tp_image latest_image(void)
{
    tp_image img = {FRAME, app.mode.width, app.mode.height, app.mode.format, 0u};
    img.stride = frame_bytes_of(&app.mode) / app.mode.height;
    return img;
}

/* The latest frame made the model's int8 input at dst (the session's input, or a replay slot). */
static tp_status fit_latest(int8_t *dst)
{
    tp_image img = latest_image();
    return tp_image_input(&img, app.table, dst, app.model.width, app.model.height,
                          app.model.channels);
}

static tp_status train_sliced(int32_t label, tp_result *r)
{
    tp_status st = tp_train_begin(&app.s, label);
    while (st == TP_OK || st == TP_STEP_PENDING) {
        st = tp_train_continue(&app.s, TP_LEARN_SLICE, r);
        if (st != TP_STEP_PENDING) {
            break;
        }
        tp_board_yield();
    }
    return st;
}

static int save(void)
{
    int st;
    tp_record_seal(&app.s, RECORD);
    st = tp_board_store_save(RECORD, tp_record_bytes(&app.s));
    if (st == TP_BOARD_OK) {
        tp_save_policy_saved(&app.saves, tp_board_counter());
    }
    return st;
}

/* The METRIC of a step (label >= 0) or an inference (label NO_LABEL) on the latest frame. */
static void send_metric(const tp_result *r, uint32_t step, uint64_t cost, int32_t label,
                        uint8_t flags)
{
    tp_msg_metric m;
    size_t len = 0;
    memset(&m, 0, sizeof m);
    m.step = step;
    m.loss = label == NO_LABEL ? 0.0f : r->loss;
    m.counter = cost > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)cost;
    m.arena_peak = r->arena_peak;
    m.stack_peak = tp_board_stack_peak();
    m.trainable_bytes = app.s.b.req.params;
    m.static_bytes = static_bytes();
    m.label = label == NO_LABEL ? TP_LABEL_NONE : (uint8_t)label;
    m.prediction = (uint8_t)r->prediction;
    m.correct = label == NO_LABEL ? TP_CORRECT_UNKNOWN : (uint8_t)(r->prediction == label);
    m.flags = (uint8_t)(flags | (r->skipped ? TP_METRIC_FLAG_SKIPPED : 0u));
    transmit(tp_proto_encode_metric(app.tx, sizeof app.tx, 0, &m, &len), &len);
}

/* One training step on the session's input; its METRIC (or line). */
static tp_status step_on_input(int32_t label, uint8_t flags, uint32_t frame_index)
{
    tp_result r;
    uint32_t step = app.s.step;
    uint64_t t0 = tp_board_counter();
    tp_status st = train_sliced(label, &r);
    uint64_t t1 = tp_board_counter();
    if (st != TP_OK && st != TP_ERR_NONFINITE) {
        return st;
    }
    if (!(flags & TP_METRIC_FLAG_REPLAY)) {
        app.labelled++;
        app.correct += r.prediction == label;
        tp_board_show(r.prediction);
    }
    if (app.host) {
        send_metric(&r, step, t1 - t0, label, flags);
        return TP_OK;
    }
    tp_text_add(&app.t, flags & TP_METRIC_FLAG_REPLAY ? "replay " : "frame ");
    tp_text_u32(&app.t, frame_index);
    tp_text_add(&app.t, " pred ");
    text_class(r.prediction);
    tp_text_add(&app.t, " label ");
    tp_text_u32(&app.t, (uint32_t)label);
    tp_text_add(&app.t, " loss ");
    tp_text_decimal(&app.t, r.loss);
    tp_text_add(&app.t, " step ");
    tp_text_u32(&app.t, step);
    tp_text_add(&app.t, r.skipped ? " skipped" : "");
    tp_text_add(&app.t, " accuracy ");
    tp_text_u32(&app.t, app.correct);
    tp_text_add(&app.t, "/");
    tp_text_u32(&app.t, app.labelled);
    text_send();
    return TP_OK;
}

/* The latest frame, fitted into the session's input, is of class `label`: a step on it, steps
 * on the kept frames, keep it. */
static tp_status learn_latest(int32_t label)
{
    uint32_t index = app.frames - 1u;
    tp_status st;
    if (label < 0 || (uint32_t)label >= app.s.b.req.n_classes) {
        tp_text_clear(&app.t);
        tp_text_add(&app.t, "label ");
        tp_text_u32(&app.t, (uint32_t)label);
        tp_text_add(&app.t, " of frame ");
        tp_text_u32(&app.t, index);
        tp_text_add(&app.t, " is out of range: the model has ");
        tp_text_u32(&app.t, app.s.b.req.n_classes);
        tp_text_add(&app.t, " classes");
        return TP_ERR_BAD_LABEL;
    }
    st = step_on_input(label, 0u, index);
    app.trained = 1;
#if TP_LEARN_REPLAY > 0
    for (uint32_t k = 0; st == TP_OK && k < app.kept; k++) {
        uint32_t slot = (app.oldest + k) % TP_LEARN_REPLAY;
        memcpy(tp_input(&app.s), replay + slot * TP_MODEL_INPUT_BYTES, TP_MODEL_INPUT_BYTES);
        st = step_on_input(replay_label[slot], TP_METRIC_FLAG_REPLAY, index);
    }
    if (st == TP_OK) {
        uint32_t slot = (app.oldest + app.kept) % TP_LEARN_REPLAY;
        st = fit_latest(replay + slot * TP_MODEL_INPUT_BYTES);
        replay_label[slot] = (uint8_t)label;
        if (app.kept < TP_LEARN_REPLAY) {
            app.kept++;
        } else {
            app.oldest = (app.oldest + 1u) % TP_LEARN_REPLAY;
        }
    }
#endif
    if (st != TP_OK) {
        tp_text_clear(&app.t);
        tp_text_add(&app.t, "training step on frame ");
        tp_text_u32(&app.t, index);
        return st;
    }
    if (tp_save_policy_step(&app.saves, tp_board_counter())) {
        if (save() != TP_BOARD_OK) {
            report(0, TP_ERR_IO, "cannot save the params record");
        } else {
            tp_text_add(&app.t, "saved at step ");
            tp_text_u32(&app.t, app.s.step);
            text_send();
        }
    }
    return TP_OK;
}

static void predict_latest(void)
{
    tp_result r;
    uint64_t t0 = tp_board_counter(), t1;
    tp_status st = tp_infer(&app.s, &r);
    t1 = tp_board_counter();
    if (st != TP_OK) {
        report(0, st, "inference");
        return;
    }
    tp_board_show(r.prediction);
    if (app.host) {
        send_metric(&r, app.s.step, t1 - t0, NO_LABEL, TP_METRIC_FLAG_EVAL);
        return;
    }
    tp_text_add(&app.t, "frame ");
    tp_text_u32(&app.t, app.frames - 1u);
    tp_text_add(&app.t, " pred ");
    text_class(r.prediction);
    text_send();
}

/* The latest frame as the model sees it, 48 x 48, in THUMB chunks; fitted into the arena,
 * which holds nothing between frames (the next frame's input is fitted again). A model whose
 * arena is smaller than a thumbnail sends none. */
static void send_thumb(uint16_t seq)
{
    tp_image img = latest_image();
    tp_msg_thumb m = {app.frames - 1u, 0u, THUMB_SIDE, THUMB_SIDE,
                      app.mode.format == TP_IMAGE_GRAY8 ? 1u : 3u};
    uint32_t total = THUMB_SIDE * THUMB_SIDE * m.channels;
    uint32_t room = (uint32_t)tp_proto_max_payload_for(sizeof app.tx) - 11u;
    if (app.frame_len == 0u || total > TP_MODEL_ARENA_BYTES ||
        tp_image_fit(&img, ARENA, THUMB_SIDE, THUMB_SIDE, m.channels) != TP_OK) {
        return;
    }
    for (m.offset = 0; m.offset < total; m.offset += room) {
        size_t len = 0;
        uint32_t n = total - m.offset < room ? total - m.offset : room;
        transmit(tp_proto_encode_thumb(app.tx, sizeof app.tx, seq, &m, ARENA + m.offset, n, &len),
                 &len);
    }
}

/* Take a frame, fit it, and learn from it or predict it. TP_ERR_CLOSED: no more frames. */
static tp_status take_frame(void)
{
    tp_msg_seen seen;
    int32_t label = NO_LABEL;
    uint64_t t0 = tp_board_counter(), t1, t2;
    int32_t n = tp_board_camera_read(FRAME, TP_LEARN_FRAME_BYTES);
    tp_status st;
    t1 = tp_board_counter();
    if (n < 0) {
        return (tp_status)-n;
    }
    app.frames++;
    app.trained = 0;
    app.frame_len = 0;
    if ((uint32_t)n != frame_bytes_of(&app.mode)) {
        tp_text_clear(&app.t);
        tp_text_add(&app.t, "camera frame ");
        tp_text_u32(&app.t, app.frames - 1u);
        tp_text_add(&app.t, " has ");
        tp_text_u32(&app.t, (uint32_t)n);
        tp_text_add(&app.t, " bytes, its mode's frames ");
        tp_text_u32(&app.t, frame_bytes_of(&app.mode));
        report(0, TP_ERR_WRONG_SAMPLE_SIZE, app.text);
        return TP_OK;
    }
    app.frame_len = (uint32_t)n;
    st = fit_latest(tp_input(&app.s));
    t2 = tp_board_counter();
    if (app.host) {
        size_t len = 0;
        seen.frame = app.frames - 1u;
        seen.capture = t1 - t0 > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)(t1 - t0);
        seen.prep = t2 - t1 > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)(t2 - t1);
        transmit(tp_proto_encode_seen(app.tx, sizeof app.tx, 0, &seen, &len), &len);
    }
    if (st != TP_OK) {
        report(0, st, "fitting the frame to the model's input");
        return TP_OK;
    }
    (void)tp_board_label(&label); /* a board without a label source: labels from the host */
    if (label == NO_LABEL) {
        predict_latest();
    } else {
        st = learn_latest(label);
        if (st != TP_OK) {
            report(0, st, app.text);
            predict_latest(); /* the frame still gets its prediction */
        }
    }
    if (app.thumb_every > 0u && (app.frames - 1u) % app.thumb_every == 0u) {
        send_thumb(0);
    }
    return TP_OK;
}

/* ---- the host's requests ---- */

static void send_ack(uint16_t seq, uint8_t type, uint32_t value)
{
    size_t len = 0;
    transmit(tp_proto_encode_ack(app.tx, sizeof app.tx, seq, type, value, &len), &len);
}

static void send_ready(uint16_t seq)
{
    tp_msg_ready m;
    tp_board_ram ram;
    size_t len = 0;
    tp_board_free_ram(&ram);
    memset(&m, 0, sizeof m);
    m.free_bytes = ram.free_bytes;
    m.largest_block = ram.largest_block;
    m.second_block = ram.second_block;
    m.sram_bytes = tp_board_sram_bytes();
    m.arena_bytes = TP_MODEL_ARENA_BYTES;
    m.blob_id = app.boot_code == TP_OK ? app.s.b.req.blob_id : 0u;
    m.fw_version = TP_VERSION_NUMBER;
    m.max_payload = TP_PROTO_MAX_PAYLOAD;
    m.counter_unit = TP_COUNTER_MICROSECONDS;
    (void)tp_proto_counter_unit(tp_board_counter_unit(), &m.counter_unit);
    m.board = tp_board_name();
    transmit(tp_proto_encode_ready(app.tx, sizeof app.tx, seq, &m, &len), &len);
}

static void on_pull(const tp_host_msg *m)
{
    uint32_t room = (uint32_t)tp_proto_max_payload_for(sizeof app.tx) - 4u, n = 0;
    uint32_t off = m->u.pull.offset;
    size_t len = 0;
    if (tp_record_chunk(&app.s, RECORD, off, m->u.pull.max_len < room ? m->u.pull.max_len : room,
                        &n) != TP_OK) {
        report(m->seq, TP_ERR_BAD_OFFSET, "offset past the end of the params record");
        return;
    }
    transmit(tp_proto_encode_params(app.tx, sizeof app.tx, m->seq, off, RECORD + off, n, &len),
             &len);
}

static void on_label(const tp_host_msg *m)
{
    tp_status st;
    if (app.frame_len == 0u || app.trained) {
        report(m->seq, TP_ERR_BAD_STATE,
               app.frame_len == 0u ? "no camera frame to label yet"
                                   : "the latest frame is labelled already: label the next one");
        return;
    }
    st = fit_latest(tp_input(&app.s)); /* its inference and thumbnails used the arena since */
    if (st == TP_OK) {
        st = learn_latest(m->u.label.label);
    }
    if (st != TP_OK) {
        report(m->seq, st, app.text);
        return;
    }
    send_ack(m->seq, m->type, m->u.label.label);
}

static void handle(const tp_host_msg *m)
{
    if (m->type == TP_MSG_HELLO) {
        if (!app.host) { /* end the text lines sent so far: the host resyncs at a 0x00 */
            static const uint8_t delimiter = 0u;
            (void)tp_board_write(&delimiter, 1u);
        }
        app.host = 1;
        send_ready(m->seq);
        if (app.boot_code == TP_OK) {
            send_ready_line();
        }
    }
    if (app.boot_code != TP_OK) { /* every request is answered with why it cannot learn */
        report(m->seq, app.boot_code, app.why);
        return;
    }
    switch (m->type) {
    case TP_MSG_HELLO:
        break;
    case TP_MSG_LABEL:
        on_label(m);
        break;
    case TP_MSG_GET_FRAME:
        app.thumb_every = m->u.get_frame.every;
        send_ack(m->seq, m->type, app.thumb_every);
        send_thumb(m->seq);
        break;
    case TP_MSG_PULL_PARAMS:
        on_pull(m);
        break;
    case TP_MSG_SAVE_PARAMS:
        if (save() == TP_BOARD_OK) {
            send_ack(m->seq, m->type, tp_record_bytes(&app.s));
        } else {
            report(m->seq, TP_ERR_IO, "cannot save the params record");
        }
        break;
    default:
        report(m->seq, TP_ERR_UNKNOWN_TYPE, "not handled by the learn application");
        break;
    }
}

/* Answer every whole request in n bytes from the link. Returns whether one was HELLO. */
static int serve(const uint8_t *p, size_t n)
{
    int hello = 0;
    tp_host_msg m;
    tp_status st;
    while ((st = tp_proto_next(&app.dec, &p, &n, &m)) != TP_PROTO_MORE) {
        if (st == TP_OK) {
            hello |= m.type == TP_MSG_HELLO;
            handle(&m);
        } else {
            report(m.seq, st, "bad request");
        }
    }
    return hello;
}

/* Serve what has arrived; with `wait`, block until the host says HELLO. Returns 0, or
 * TP_ERR_CLOSED when the link closed while waiting. */
static tp_status service(int wait)
{
    for (;;) {
        int got = wait ? tp_board_read(app.in, sizeof app.in)
                       : tp_board_poll(app.in, sizeof app.in);
        if (got == TP_BOARD_ERR_CLOSED) {
            return wait ? TP_ERR_CLOSED : TP_OK; /* standalone: no host to serve */
        }
        if (got <= 0) {
            return TP_OK;
        }
        if (serve(app.in, (size_t)got) && wait) {
            return TP_OK;
        }
    }
}

static void send_done(void)
{
    tp_text_add(&app.t, "learn done frames ");
    tp_text_u32(&app.t, app.frames);
    tp_text_add(&app.t, " labelled ");
    tp_text_u32(&app.t, app.labelled);
    tp_text_add(&app.t, " accuracy ");
    tp_text_u32(&app.t, app.correct);
    tp_text_add(&app.t, "/");
    tp_text_u32(&app.t, app.labelled);
    tp_text_add(&app.t, " step ");
    tp_text_u32(&app.t, app.s.step);
    tp_text_add(&app.t, " params crc32 ");
    tp_text_hex32(&app.t, tp_crc32(0, RECORD + HDR, app.s.b.req.params));
    text_send();
}

int tp_learn_main(void)
{
    if (tp_board_init() != TP_BOARD_OK) {
        return 1;
    }
    (void)tp_frame_decoder_init(&app.dec, app.rx, sizeof app.rx);
    tp_text_init(&app.t, app.text, TEXT_MAX);
    app.boot_code = boot();
    if (app.boot_code != TP_OK) {
        /* Say why once as a line; then answer a host that comes to ask (app.why keeps it). */
        report(0, app.boot_code, app.text);
        while (service(1) == TP_OK) {
        }
        return (int)app.boot_code;
    }
    if (app.mode.flags & TP_CAMERA_WAIT_HOST) {
        if (service(1) != TP_OK) {
            return (int)TP_ERR_CLOSED;
        }
    } else {
        send_ready_line();
    }
    for (uint32_t failed = 0;;) {
        tp_status st;
        (void)service(0);
        st = take_frame();
        if (st == TP_ERR_CLOSED) { /* a virtual camera's last frame is played */
            if (save() != TP_BOARD_OK) {
                report(0, TP_ERR_IO, "cannot save the params record");
            }
            (void)service(0);
            send_done();
            return 0;
        }
        failed = st == TP_OK ? 0u : failed + 1u;
        if (st != TP_OK) { /* a sensor glitch is skipped; one that persists ends the app */
            report(0, st, "camera read");
            if (failed >= CAMERA_RETRIES) {
                return (int)st;
            }
        }
    }
}
