/*
 * tp_proto.c - frame decoder/encoder and message (un)packing; see tp_proto.h and
 * docs/protocol.md.
 */
#include "tp_proto.h"

#include <string.h>

#include "tinyprop.h" /* tp_crc32 */
#include "tp_le.h"

/* Floats travel as IEEE-754 binary32 bit patterns: both targets use that format. */
typedef char tp_proto_float_is_32_bits[(sizeof(float) == 4) ? 1 : -1];

/* ---- decoder ---- */

static int known_type(uint8_t type)
{
    return (type >= TP_MSG_HELLO && type <= TP_MSG_GET_FRAME) ||
           (type >= TP_MSG_READY && type <= TP_MSG_THUMB);
}

static void decoder_restart(tp_frame_decoder *d)
{
    d->len = 0;
    d->raw = 0;
    d->block_left = 0;
    d->zero_due = 0;
    d->overflow = 0;
}

tp_status tp_frame_decoder_init(tp_frame_decoder *d, uint8_t *buf, size_t cap)
{
    if (d == NULL || buf == NULL || cap == 0) {
        return TP_ERR_ARG;
    }
    d->buf = buf;
    d->cap = cap;
    decoder_restart(d);
    return TP_OK;
}

/* Append n decoded bytes; past the buffer's end, keep discarding until the delimiter and
 * report the frame once as too long. */
static void decoder_emit(tp_frame_decoder *d, const uint8_t *src, size_t n)
{
    size_t room = d->cap - d->len;
    if (n > room) {
        n = room;
        d->overflow = 1;
    }
    memcpy(d->buf + d->len, src, n);
    d->len += n;
}

/* Classify the body collected before a delimiter. */
static tp_status decoder_finish(tp_frame_decoder *d, tp_frame *frame)
{
    const uint8_t *b = d->buf;
    size_t declared;
    if (d->overflow) {
        return TP_ERR_FRAME_TOO_LONG;
    }
    if (d->block_left != 0) {
        return TP_ERR_BAD_COBS;
    }
    if (d->len < TP_PROTO_OVERHEAD) {
        return TP_ERR_FRAME_TRUNCATED;
    }
    declared = tp_rd_u16(b + 3);
    if (declared + TP_PROTO_OVERHEAD > d->len) {
        return TP_ERR_FRAME_TRUNCATED;
    }
    if (declared + TP_PROTO_OVERHEAD < d->len) {
        return TP_ERR_LENGTH_MISMATCH;
    }
    if (tp_crc32(0, b, d->len - 4) != tp_rd_u32(b + d->len - 4)) {
        return TP_ERR_BAD_CRC;
    }
    frame->type = b[0];
    frame->seq = tp_rd_u16(b + 1);
    frame->len = (uint16_t)declared;
    frame->payload = b + 5;
    return known_type(b[0]) ? TP_OK : TP_ERR_UNKNOWN_TYPE;
}

tp_status tp_frame_decoder_feed(tp_frame_decoder *d, const uint8_t *data, size_t n, size_t *used,
                                tp_frame *frame)
{
    size_t i;
    if (d == NULL || (data == NULL && n > 0) || used == NULL || frame == NULL) {
        return TP_ERR_ARG;
    }
    for (i = 0; i < n;) {
        uint8_t byte = data[i];
        if (byte == 0) {
            tp_status st;
            if (d->raw == 0) {
                i++;
                continue; /* idle delimiter */
            }
            st = decoder_finish(d, frame);
            decoder_restart(d);
            *used = i + 1;
            return st;
        }
        if (d->block_left == 0) { /* a code byte: the previous block is complete */
            static const uint8_t zero = 0;
            if (d->zero_due) {
                decoder_emit(d, &zero, 1);
            }
            d->block_left = (uint8_t)(byte - 1u);
            d->zero_due = byte != 0xFFu;
            d->raw++;
            i++;
        } else { /* the block's data bytes: copied in one run, up to a delimiter */
            size_t run = n - i < d->block_left ? n - i : d->block_left;
            const uint8_t *end = memchr(data + i, 0, run);
            if (end != NULL) {
                run = (size_t)(end - (data + i));
            }
            decoder_emit(d, data + i, run);
            d->block_left = (uint8_t)(d->block_left - run);
            d->raw += run;
            i += run;
        }
    }
    *used = n;
    return TP_PROTO_MORE;
}

/* ---- encoder ---- */

/* COBS written straight into the output: a code slot is reserved when a block starts and
 * filled in when it ends. After a full (0xFF) block the next slot is reserved only when more
 * data follows, so no empty trailing block is emitted (the canonical encoding). */
typedef struct {
    uint8_t *out;
    size_t pos;
    size_t code_pos;
    uint8_t code;
    uint8_t reserved;
} cobs_writer;

static void cobs_reserve(cobs_writer *w)
{
    w->code_pos = w->pos++;
    w->code = 1;
    w->reserved = 1;
}

static void cobs_put(cobs_writer *w, uint8_t byte)
{
    if (!w->reserved) {
        cobs_reserve(w);
    }
    if (byte == 0) {
        w->out[w->code_pos] = w->code;
        cobs_reserve(w);
        return;
    }
    w->out[w->pos++] = byte;
    if (++w->code == 0xFFu) {
        w->out[w->code_pos] = w->code;
        w->reserved = 0;
    }
}

static uint32_t cobs_put_all(cobs_writer *w, uint32_t crc, const uint8_t *p, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        cobs_put(w, p[i]);
    }
    return tp_crc32(crc, p, n);
}

tp_status tp_frame_encode(uint8_t *out, size_t cap, uint8_t type, uint16_t seq, const uint8_t *head,
                          size_t head_len, const uint8_t *tail, size_t tail_len, size_t *out_len)
{
    uint8_t header[5];
    uint8_t crc_bytes[4];
    size_t len = head_len + tail_len;
    cobs_writer w;
    uint32_t crc;
    if (out == NULL || out_len == NULL || (head == NULL && head_len > 0) ||
        (tail == NULL && tail_len > 0) || head_len > TP_PROTO_MAX_PAYLOAD ||
        tail_len > TP_PROTO_MAX_PAYLOAD || len > TP_PROTO_MAX_PAYLOAD) {
        return TP_ERR_ARG;
    }
    if (cap < TP_PROTO_WIRE_SIZE(len + TP_PROTO_OVERHEAD)) {
        return TP_ERR_NO_SPACE;
    }
    header[0] = type;
    tp_wr_u16(header + 1, seq);
    tp_wr_u16(header + 3, (uint16_t)len);
    w.out = out;
    w.pos = 0;
    cobs_reserve(&w);
    crc = cobs_put_all(&w, 0, header, sizeof header);
    crc = cobs_put_all(&w, crc, head, head_len);
    crc = cobs_put_all(&w, crc, tail, tail_len);
    tp_wr_u32(crc_bytes, crc);
    (void)cobs_put_all(&w, crc, crc_bytes, sizeof crc_bytes);
    if (w.reserved) {
        out[w.code_pos] = w.code;
    }
    out[w.pos++] = 0;
    *out_len = w.pos;
    return TP_OK;
}

size_t tp_proto_max_payload_for(size_t cap)
{
    size_t body;
    if (cap < TP_PROTO_WIRE_SIZE(TP_PROTO_OVERHEAD)) {
        return 0;
    }
    if (cap >= TP_PROTO_MAX_FRAME) {
        return TP_PROTO_MAX_PAYLOAD;
    }
    body = cap - 2u; /* an upper bound; step down to the largest body that fits */
    while (TP_PROTO_WIRE_SIZE(body) > cap) {
        body--;
    }
    return body - TP_PROTO_OVERHEAD;
}

/* ---- host -> device ---- */

/* Payload layout of a host message: fixed bytes, and whether a variable tail follows.
 * Returns 0 for types the device does not receive. */
static int host_layout(uint8_t type, size_t *fixed, int *tail)
{
    *tail = 0;
    switch (type) {
    case TP_MSG_HELLO:
    case TP_MSG_SAVE_PARAMS:
    case TP_MSG_RESET:
        *fixed = 0;
        return 1;
    case TP_MSG_INPUT_CHUNK:
    case TP_MSG_PUSH_PARAMS:
        *fixed = 4;
        *tail = 1;
        return 1;
    case TP_MSG_TRAIN:
    case TP_MSG_EVAL:
        *fixed = 2;
        return 1;
    case TP_MSG_SET_HPARAMS:
        *fixed = 16;
        return 1;
    case TP_MSG_PULL_PARAMS:
    case TP_MSG_BULK_SAMPLE:
        *fixed = 6;
        return 1;
    case TP_MSG_BULK_OPEN:
        *fixed = 0;
        *tail = 1;
        return 1;
    case TP_MSG_LABEL:
        *fixed = 1;
        return 1;
    case TP_MSG_GET_FRAME:
        *fixed = 2;
        return 1;
    default:
        return 0;
    }
}

tp_status tp_proto_unpack(const tp_frame *frame, tp_host_msg *msg)
{
    const uint8_t *p;
    size_t fixed;
    int tail;
    if (frame == NULL || msg == NULL || (frame->payload == NULL && frame->len > 0)) {
        return TP_ERR_ARG;
    }
    if (!host_layout(frame->type, &fixed, &tail)) {
        return TP_ERR_UNKNOWN_TYPE;
    }
    if (frame->len < fixed || (!tail && frame->len != fixed)) {
        return TP_ERR_BAD_PAYLOAD;
    }
    p = frame->payload;
    memset(msg, 0, sizeof *msg);
    msg->type = frame->type;
    msg->seq = frame->seq;
    msg->data = tail ? p + fixed : NULL;
    msg->data_len = tail ? frame->len - fixed : 0;
    switch (frame->type) {
    case TP_MSG_INPUT_CHUNK:
    case TP_MSG_PUSH_PARAMS:
        msg->u.chunk.offset = tp_rd_u32(p);
        break;
    case TP_MSG_TRAIN:
    case TP_MSG_EVAL:
        msg->u.sample.label = p[0];
        msg->u.sample.flags = p[1];
        break;
    case TP_MSG_SET_HPARAMS:
        msg->u.hparams.lr = tp_rd_f32(p);
        msg->u.hparams.momentum = tp_rd_f32(p + 4);
        msg->u.hparams.seed = tp_rd_u32(p + 8);
        msg->u.hparams.flags = tp_rd_u32(p + 12);
        break;
    case TP_MSG_PULL_PARAMS:
        msg->u.pull.offset = tp_rd_u32(p);
        msg->u.pull.max_len = tp_rd_u16(p + 4);
        break;
    case TP_MSG_BULK_SAMPLE:
        msg->u.bulk_sample.index = tp_rd_u32(p);
        msg->u.bulk_sample.mode = p[4];
        msg->u.bulk_sample.flags = p[5];
        break;
    case TP_MSG_LABEL:
        msg->u.label.label = p[0];
        break;
    case TP_MSG_GET_FRAME:
        msg->u.get_frame.every = tp_rd_u16(p);
        break;
    case TP_MSG_BULK_OPEN:
        /* The board opens the path as a C string. */
        if (msg->data_len == 0 || memchr(msg->data, 0, msg->data_len) != NULL) {
            return TP_ERR_BAD_PAYLOAD;
        }
        break;
    default:
        break; /* no fields */
    }
    return TP_OK;
}

tp_status tp_proto_next(tp_frame_decoder *d, const uint8_t **data, size_t *n, tp_host_msg *msg)
{
    size_t used = 0;
    tp_frame f;
    tp_status st;
    if (d == NULL || data == NULL || n == NULL || msg == NULL || (*data == NULL && *n > 0)) {
        return TP_ERR_ARG;
    }
    if (*n == 0u) {
        return TP_PROTO_MORE;
    }
    st = tp_frame_decoder_feed(d, *data, *n, &used, &f);
    *data += used;
    *n -= used;
    if (st == TP_OK) {
        st = tp_proto_unpack(&f, msg);
    }
    if (st != TP_OK && st != TP_PROTO_MORE) {
        /* the seq is trustworthy only when the CRC was good */
        msg->seq = (st == TP_ERR_UNKNOWN_TYPE || st == TP_ERR_BAD_PAYLOAD) ? f.seq : 0u;
    }
    return st;
}

/* ---- device -> host ---- */

tp_status tp_proto_counter_unit(const char *name, uint8_t *unit)
{
    if (name == NULL || unit == NULL) {
        return TP_ERR_ARG;
    }
    if (strcmp(name, "instructions") == 0) {
        *unit = TP_COUNTER_INSTRUCTIONS;
    } else if (strcmp(name, "us") == 0) {
        *unit = TP_COUNTER_MICROSECONDS;
    } else if (strcmp(name, "cycles") == 0) {
        *unit = TP_COUNTER_CYCLES;
    } else {
        return TP_ERR_ARG;
    }
    return TP_OK;
}

/* Fixed fields plus a NUL-terminated text cut to what the payload limit and cap allow. */
static tp_status encode_text(uint8_t *out, size_t cap, uint8_t type, uint16_t seq,
                             const uint8_t *head, size_t head_len, const char *text,
                             size_t *out_len)
{
    size_t room = tp_proto_max_payload_for(cap);
    size_t n;
    if (text == NULL) {
        return TP_ERR_ARG;
    }
    if (room < head_len) {
        return TP_ERR_NO_SPACE;
    }
    room -= head_len;
    for (n = 0; n < room && text[n] != '\0'; n++) {
    }
    return tp_frame_encode(out, cap, type, seq, head, head_len, (const uint8_t *)text, n, out_len);
}

tp_status tp_proto_encode_ready(uint8_t *out, size_t cap, uint16_t seq, const tp_msg_ready *m,
                                size_t *out_len)
{
    uint8_t head[32];
    if (m == NULL) {
        return TP_ERR_ARG;
    }
    tp_wr_u32(head, m->sram_bytes);
    tp_wr_u32(head + 4, m->arena_bytes);
    tp_wr_u32(head + 8, m->blob_id);
    tp_wr_u32(head + 12, m->fw_version);
    tp_wr_u16(head + 16, m->max_payload);
    head[18] = (uint8_t)TP_PROTO_VERSION;
    head[19] = m->counter_unit;
    tp_wr_u32(head + 20, m->free_bytes);
    tp_wr_u32(head + 24, m->largest_block);
    tp_wr_u32(head + 28, m->second_block);
    return encode_text(out, cap, TP_MSG_READY, seq, head, sizeof head, m->board, out_len);
}

tp_status tp_proto_encode_ack(uint8_t *out, size_t cap, uint16_t seq, uint8_t acked_type,
                              uint32_t value, size_t *out_len)
{
    uint8_t head[5];
    head[0] = acked_type;
    tp_wr_u32(head + 1, value);
    return tp_frame_encode(out, cap, TP_MSG_ACK, seq, head, sizeof head, NULL, 0, out_len);
}

tp_status tp_proto_encode_metric(uint8_t *out, size_t cap, uint16_t seq, const tp_msg_metric *m,
                                 size_t *out_len)
{
    uint8_t head[32];
    if (m == NULL) {
        return TP_ERR_ARG;
    }
    tp_wr_u32(head, m->step);
    tp_wr_f32(head + 4, m->loss);
    tp_wr_u32(head + 8, m->counter);
    tp_wr_u32(head + 12, m->arena_peak);
    tp_wr_u32(head + 16, m->stack_peak);
    tp_wr_u32(head + 20, m->trainable_bytes);
    tp_wr_u32(head + 24, m->static_bytes);
    head[28] = m->label;
    head[29] = m->prediction;
    head[30] = m->correct;
    head[31] = m->flags;
    return tp_frame_encode(out, cap, TP_MSG_METRIC, seq, head, sizeof head, NULL, 0, out_len);
}

tp_status tp_proto_encode_output(uint8_t *out, size_t cap, uint16_t seq, const uint8_t *data,
                                 size_t n, size_t *out_len)
{
    return tp_frame_encode(out, cap, TP_MSG_OUTPUT, seq, NULL, 0, data, n, out_len);
}

tp_status tp_proto_encode_params(uint8_t *out, size_t cap, uint16_t seq, uint32_t offset,
                                 const uint8_t *data, size_t n, size_t *out_len)
{
    uint8_t head[4];
    tp_wr_u32(head, offset);
    return tp_frame_encode(out, cap, TP_MSG_PARAMS, seq, head, sizeof head, data, n, out_len);
}

tp_status tp_proto_encode_error(uint8_t *out, size_t cap, uint16_t seq, tp_status code,
                                const char *text, size_t *out_len)
{
    uint8_t head[2];
    tp_wr_u16(head, (uint16_t)code);
    return encode_text(out, cap, TP_MSG_ERROR, seq, head, sizeof head, text, out_len);
}

tp_status tp_proto_encode_log(uint8_t *out, size_t cap, uint16_t seq, const char *text,
                              size_t *out_len)
{
    return encode_text(out, cap, TP_MSG_LOG, seq, NULL, 0, text, out_len);
}

tp_status tp_proto_encode_seen(uint8_t *out, size_t cap, uint16_t seq, const tp_msg_seen *m,
                               size_t *out_len)
{
    uint8_t head[12];
    if (m == NULL) {
        return TP_ERR_ARG;
    }
    tp_wr_u32(head, m->frame);
    tp_wr_u32(head + 4, m->capture);
    tp_wr_u32(head + 8, m->prep);
    return tp_frame_encode(out, cap, TP_MSG_SEEN, seq, head, sizeof head, NULL, 0, out_len);
}

tp_status tp_proto_encode_thumb(uint8_t *out, size_t cap, uint16_t seq, const tp_msg_thumb *m,
                                const uint8_t *data, size_t n, size_t *out_len)
{
    uint8_t head[11];
    if (m == NULL) {
        return TP_ERR_ARG;
    }
    tp_wr_u32(head, m->frame);
    tp_wr_u32(head + 4, m->offset);
    head[8] = m->width;
    head[9] = m->height;
    head[10] = m->channels;
    return tp_frame_encode(out, cap, TP_MSG_THUMB, seq, head, sizeof head, data, n, out_len);
}
