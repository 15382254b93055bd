/*
 * tp_proto.h - the serial protocol between the host and the device (docs/protocol.md).
 *
 * A frame body is: type u8, seq u16, payload length u16, payload, CRC32 (IEEE) of everything
 * before it; all little-endian. On the wire the body is COBS-encoded and ends with one 0x00, so
 * a receiver resynchronises at the next 0x00 after any garbage.
 *
 * This module has no heap, no globals and no board code: the decoder fills a buffer the caller
 * owns, the encoders write whole wire frames into a buffer the caller owns, and every function
 * returns a tp_status (tinyprop.h). host/tinyprop/device/protocol.py is the Python twin; the
 * two are checked against the same vectors (tests/vectors/protocol.json).
 */
#ifndef TP_PROTO_H
#define TP_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "tinyprop.h"

/* 2: READY reports the board's free RAM; 3: ERROR codes are tp_status values (docs/protocol.md) */
#define TP_PROTO_VERSION 3u

#define TP_PROTO_MAX_PAYLOAD 1024u /* bytes; bulk data moves in chunks of at most this */
#define TP_PROTO_OVERHEAD 9u       /* type + seq + length + CRC32 */
#define TP_PROTO_MAX_BODY (TP_PROTO_MAX_PAYLOAD + TP_PROTO_OVERHEAD)
/* Wire bytes of a frame whose body has n bytes: COBS adds one code byte per started 254-byte
 * block, then the 0x00 delimiter. */
#define TP_PROTO_WIRE_SIZE(n) ((n) + (n) / 254u + 2u)
#define TP_PROTO_MAX_FRAME TP_PROTO_WIRE_SIZE(TP_PROTO_MAX_BODY)

/* Message types. Host -> device below 0x80, device -> host from 0x80. */
typedef enum {
    TP_MSG_HELLO = 0x01, /* (empty) -> READY */
    /* 0x02..0x04 reserved: the model blob is compiled into the firmware (docs/protocol.md) */
    TP_MSG_INPUT_CHUNK = 0x05, /* offset u32, data -> ACK(bytes written) */
    TP_MSG_TRAIN = 0x06,       /* label u8, flags u8 -> [OUTPUT], METRIC */
    TP_MSG_EVAL = 0x07,        /* label u8 (0xFF: none), flags u8 -> [OUTPUT], METRIC */
    TP_MSG_SET_HPARAMS = 0x08, /* lr f32, momentum f32, seed u32, flags u32 -> ACK */
    TP_MSG_PULL_PARAMS = 0x09, /* offset u32, max_len u16 -> PARAMS */
    TP_MSG_PUSH_PARAMS = 0x0A, /* offset u32, data -> ACK(bytes written) */
    TP_MSG_SAVE_PARAMS = 0x0B, /* (empty) -> ACK(bytes saved) */
    TP_MSG_RESET = 0x0C,       /* (empty) -> ACK */
    TP_MSG_BULK_OPEN = 0x0D,   /* path (UTF-8, 1..1024 bytes, no NUL) -> ACK(sample count) */
    TP_MSG_BULK_SAMPLE = 0x0E, /* index u32, mode u8, flags u8 -> [OUTPUT], METRIC */
    /* the learn application (tp_learn.h) */
    TP_MSG_LABEL = 0x0F,     /* label u8: the latest camera frame is of this class -> ACK */
    TP_MSG_GET_FRAME = 0x10, /* every u16: THUMB of the latest frame now, then of every n-th
                                (0: only now) -> ACK(every), THUMB */

    TP_MSG_READY = 0x81,  /* sram, arena, blob id, fw version u32; max payload u16;
                             protocol version u8, counter unit u8; free RAM, largest and
                             second block u32 (version 2); board name */
    TP_MSG_ACK = 0x82,    /* acked type u8, value u32 */
    TP_MSG_METRIC = 0x83, /* see tp_msg_metric */
    TP_MSG_OUTPUT = 0x84, /* output tensor bytes (int8) */
    TP_MSG_PARAMS = 0x85, /* offset u32, data */
    TP_MSG_ERROR = 0x86,  /* code u16 (a tp_status), text */
    TP_MSG_LOG = 0x87,    /* text */
    TP_MSG_SEEN = 0x88,   /* frame u32, capture u32, prep u32: a camera frame was taken (the
                             counters: capturing it, fitting it to the input), its METRIC next */
    TP_MSG_THUMB = 0x89   /* frame u32, offset u32, width u8, height u8, channels u8, data: the
                             frame as the model sees it, downscaled; rows packed, in chunks */
} tp_msg_type;

/* Flags of TRAIN, EVAL and BULK_SAMPLE. */
#define TP_SAMPLE_FLAG_OUTPUT 0x01u /* send OUTPUT (the output tensor) before METRIC */
#define TP_LABEL_NONE 0xFFu         /* EVAL without a label: loss and correct are not known */
/* BULK_SAMPLE modes. */
#define TP_BULK_TRAIN 0u
#define TP_BULK_EVAL 1u
/* SET_HPARAMS flags. */
#define TP_HPARAM_FLAG_QAS 0x01u /* quantization-aware scaling of the gradients */
/* METRIC flags. */
#define TP_METRIC_FLAG_SKIPPED 0x01u /* the step computed a gradient but applied no update */
#define TP_METRIC_FLAG_EVAL 0x02u    /* an evaluation, not a training step */
#define TP_METRIC_FLAG_REPLAY 0x04u  /* a step on a kept frame again (the learn app's replay) */
#define TP_CORRECT_UNKNOWN 0xFFu     /* METRIC.correct when the sample had no label */
/* READY's free RAM fields when the device does not measure them. */
#define TP_RAM_UNKNOWN 0xFFFFFFFFu
/* READY counter units: what METRIC.counter counts. */
#define TP_COUNTER_INSTRUCTIONS 0u
#define TP_COUNTER_MICROSECONDS 1u
#define TP_COUNTER_CYCLES 2u

/* Every function here returns a tp_status (tp_status.h's protocol range): TP_OK,
 * TP_PROTO_MORE (the decoder needs more bytes) or an error. An ERROR message's code is a
 * tp_status, sent unchanged, whichever part of the firmware reported it. */

/* A decoded frame. payload points into the decoder's buffer: valid until the next feed. */
typedef struct {
    uint8_t type;
    uint16_t seq;
    uint16_t len;
    const uint8_t *payload;
} tp_frame;

/* Streaming frame decoder. Set up with tp_frame_decoder_init; fields are private. */
typedef struct {
    uint8_t *buf;
    size_t cap;
    size_t len;         /* decoded body bytes so far */
    size_t raw;         /* wire bytes since the last delimiter */
    uint8_t block_left; /* data bytes left in the current COBS block */
    uint8_t zero_due;   /* the current block ends with an implicit 0x00 */
    uint8_t overflow;
} tp_frame_decoder;

/* buf receives decoded bodies; cap >= TP_PROTO_MAX_BODY accepts every legal frame (a smaller
 * buffer rejects longer frames with TP_ERR_FRAME_TOO_LONG). */
tp_status tp_frame_decoder_init(tp_frame_decoder *d, uint8_t *buf, size_t cap);

/* Consume wire bytes until a frame ends (at a 0x00) or the input runs out; *used says how many
 * were consumed. Returns TP_PROTO_MORE (all consumed, nothing complete), TP_OK (*frame
 * holds a frame), or an error for the frame that just ended (TP_ERR_UNKNOWN_TYPE also
 * fills *frame, whose CRC was good, so the answer can carry its seq). Empty frames (repeated
 * 0x00) are skipped silently. Call again with the rest of the input. */
tp_status tp_frame_decoder_feed(tp_frame_decoder *d, const uint8_t *data, size_t n, size_t *used,
                                tp_frame *frame);

/* Encode one wire frame (COBS + delimiter) into out. The payload is the concatenation of head
 * and tail (either may be NULL when its length is 0), so fixed fields packed on the stack and
 * bulk data elsewhere need no copy. *out_len receives the wire size. */
tp_status tp_frame_encode(uint8_t *out, size_t cap, uint8_t type, uint16_t seq, const uint8_t *head,
                          size_t head_len, const uint8_t *tail, size_t tail_len, size_t *out_len);

/* Largest payload whose frame fits a buffer of cap bytes (0 if none fits), capped at
 * TP_PROTO_MAX_PAYLOAD: how much PARAMS data a small transmit buffer can carry. */
size_t tp_proto_max_payload_for(size_t cap);

/* ---- host -> device messages (the device decodes these) ---- */

typedef struct {
    uint8_t type; /* tp_msg_type */
    uint16_t seq;
    union {
        struct {
            uint32_t offset; /* INPUT_CHUNK, PUSH_PARAMS: data is the tail */
        } chunk;
        struct {
            uint8_t label, flags; /* TRAIN, EVAL */
        } sample;
        struct {
            float lr, momentum;
            uint32_t seed, flags;
        } hparams;
        struct {
            uint32_t offset;
            uint16_t max_len;
        } pull;
        struct {
            uint32_t index;
            uint8_t mode, flags;
        } bulk_sample;
        struct {
            uint8_t label;
        } label;
        struct {
            uint16_t every;
        } get_frame;
    } u;
    const uint8_t *data; /* variable tail (chunk bytes, BULK_OPEN path): points into the frame */
    size_t data_len;
} tp_host_msg;

/* Check a frame's payload against its type's layout and fill *msg (no copies). Returns
 * TP_ERR_UNKNOWN_TYPE for device -> host types and TP_ERR_BAD_PAYLOAD for a wrong
 * size or an empty / NUL-containing BULK_OPEN path. */
tp_status tp_proto_unpack(const tp_frame *frame, tp_host_msg *msg);

/* The next host message in the wire bytes at *data (n of them): feeds the decoder and unpacks
 * what it completes, advancing *data and *n past what it used. Returns TP_PROTO_MORE when the
 * bytes are used up with no message whole, TP_OK with *msg filled, or the status of a frame
 * that could not be read; msg->seq is then that frame's seq when its CRC was good (an unknown
 * type, a bad payload), else 0: the seq to answer the ERROR with. */
tp_status tp_proto_next(tp_frame_decoder *d, const uint8_t **data, size_t *n, tp_host_msg *msg);

/* ---- device -> host messages (the device encodes these into wire frames) ---- */

typedef struct {
    uint32_t sram_bytes, arena_bytes, blob_id,
        fw_version;       /* fw_version: major<<16|minor<<8|patch */
    uint16_t max_payload; /* largest payload the device accepts (its receive buffer) */
    uint8_t counter_unit; /* TP_COUNTER_* */
    /* RAM for a blob's arena and params record (version 2; TP_RAM_UNKNOWN: not measured): all
     * of it, the largest block one of them can have, and the largest left once that one is
     * taken. */
    uint32_t free_bytes, largest_block, second_block;
    const char *board; /* NUL-terminated */
} tp_msg_ready;

typedef struct {
    uint32_t step;
    float loss;
    uint32_t counter; /* cost of this step in the READY counter unit */
    uint32_t arena_peak, stack_peak, trainable_bytes, static_bytes;
    uint8_t label, prediction, correct, flags; /* correct: 1, 0 or TP_CORRECT_UNKNOWN */
} tp_msg_metric;

typedef struct {
    uint32_t frame;         /* the camera frame's index since boot */
    uint32_t capture, prep; /* costs in the READY counter unit */
} tp_msg_seen;

typedef struct {
    uint32_t frame, offset; /* the frame; where data starts in its width x height x channels */
    uint8_t width, height, channels;
} tp_msg_thumb;

/* TP_COUNTER_* for a board's counter unit name ("instructions", "us", "cycles");
 * TP_ERR_ARG for any other name. */
tp_status tp_proto_counter_unit(const char *name, uint8_t *unit);

/* Each writes one wire frame into out (capacity cap) and its size into *out_len. Texts (board,
 * error, log) are cut to fit the payload limit and cap; byte tails never are (E_NO_SPACE). */
tp_status tp_proto_encode_ready(uint8_t *out, size_t cap, uint16_t seq, const tp_msg_ready *m,
                                size_t *out_len);
tp_status tp_proto_encode_ack(uint8_t *out, size_t cap, uint16_t seq, uint8_t acked_type,
                              uint32_t value, size_t *out_len);
tp_status tp_proto_encode_metric(uint8_t *out, size_t cap, uint16_t seq, const tp_msg_metric *m,
                                 size_t *out_len);
tp_status tp_proto_encode_output(uint8_t *out, size_t cap, uint16_t seq, const uint8_t *data,
                                 size_t n, size_t *out_len);
tp_status tp_proto_encode_params(uint8_t *out, size_t cap, uint16_t seq, uint32_t offset,
                                 const uint8_t *data, size_t n, size_t *out_len);
tp_status tp_proto_encode_error(uint8_t *out, size_t cap, uint16_t seq, tp_status code,
                                const char *text, size_t *out_len);
tp_status tp_proto_encode_log(uint8_t *out, size_t cap, uint16_t seq, const char *text,
                              size_t *out_len);
tp_status tp_proto_encode_seen(uint8_t *out, size_t cap, uint16_t seq, const tp_msg_seen *m,
                               size_t *out_len);
tp_status tp_proto_encode_thumb(uint8_t *out, size_t cap, uint16_t seq, const tp_msg_thumb *m,
                                const uint8_t *data, size_t n, size_t *out_len);

#endif /* TP_PROTO_H */
