/*
 * fuzz_proto.c - libFuzzer harness for firmware/proto/tp_proto.c: the streaming decoder, the host
 * message unpacker and the device message encoders. Run it with tests/fuzz/run.sh proto.
 *
 * The first input byte picks what to drive (modes 0-3 below); buffers are malloc'ed at their exact
 * size so ASan sees any write past a caller's capacity.
 */
// FUZZ_SOURCES: firmware/proto/tp_proto.c firmware/core/tp_crc32.c firmware/core/tp_status.c
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "tp_proto.h"

/* Unpack a frame and check that the message's tail lies inside the payload. */
static void unpack_and_check(const tp_frame *f)
{
    tp_host_msg m;
    tp_status st = tp_proto_unpack(f, &m);
    CHECK(strcmp(tp_status_name(st), "TP_ERR_UNKNOWN") != 0); /* a status of the table */
    if (st == TP_OK) {
        CHECK(m.type == f->type && m.seq == f->seq);
        CHECK(m.data_len <= f->len);
        CHECK(m.data == NULL ||
              (m.data >= f->payload && m.data + m.data_len <= f->payload + f->len));
    }
}

/* Re-encode a decoded frame and decode it again: the same frame must come back. */
static void round_trip(const tp_frame *f)
{
    size_t cap = TP_PROTO_WIRE_SIZE((size_t)f->len + TP_PROTO_OVERHEAD);
    uint8_t *wire = malloc(cap);
    uint8_t *body = malloc(TP_PROTO_MAX_BODY);
    size_t n = 0, used = 0;
    tp_frame_decoder d;
    tp_frame g;
    CHECK(wire && body);
    CHECK(tp_frame_encode(wire, cap, f->type, f->seq, f->payload, f->len, NULL, 0, &n) == TP_OK);
    CHECK(n <= cap && memchr(wire, 0, n) == wire + n - 1);
    CHECK(tp_frame_decoder_init(&d, body, TP_PROTO_MAX_BODY) == TP_OK);
    CHECK(tp_frame_decoder_feed(&d, wire, n, &used, &g) == TP_OK && used == n);
    CHECK(g.type == f->type && g.seq == f->seq && g.len == f->len);
    CHECK(memcmp(g.payload, f->payload, f->len) == 0);
    free(wire);
    free(body);
}

/* Mode 0: a raw byte stream, fed in chunks of a fuzzed size, into a buffer of fuzzed size. */
static void drive_decoder(const uint8_t *data, size_t size)
{
    size_t cap, chunk, pos = 2;
    uint8_t *buf;
    tp_frame_decoder d;
    if (size < 2) {
        return;
    }
    cap = data[0] < 8 ? TP_PROTO_MAX_BODY : (size_t)data[0] * 4u;
    chunk = (size_t)data[1] + 1u;
    buf = malloc(cap);
    CHECK(buf != NULL);
    CHECK(tp_frame_decoder_init(&d, buf, cap) == TP_OK);
    while (pos < size) {
        size_t end = pos + chunk < size ? pos + chunk : size;
        while (pos < end) {
            tp_frame f;
            size_t used = 0;
            tp_status st = tp_frame_decoder_feed(&d, data + pos, end - pos, &used, &f);
            CHECK(used >= 1 && used <= end - pos);
            pos += used;
            /* OK, MORE or a decoder fault: the first rows of the protocol's range */
            CHECK(st == TP_OK || (st >= TP_PROTO_MORE && st <= TP_ERR_UNKNOWN_TYPE));
            if (st == TP_OK) {
                CHECK((size_t)f.len + TP_PROTO_OVERHEAD <= cap);
                unpack_and_check(&f);
                round_trip(&f);
            }
        }
    }
    free(buf);
}

/* Mode 1: a payload straight into the unpacker (no CRC to get past). */
static void drive_unpack(const uint8_t *data, size_t size)
{
    tp_frame f;
    uint8_t *copy;
    if (size < 1 || size - 1 > TP_PROTO_MAX_PAYLOAD) {
        return;
    }
    copy = malloc(size); /* exact size: the payload ends where ASan's red zone starts */
    CHECK(copy != NULL);
    memcpy(copy, data + 1, size - 1);
    f.type = data[0];
    f.seq = 7;
    f.len = (uint16_t)(size - 1);
    f.payload = copy;
    unpack_and_check(&f);
    free(copy);
}

static uint32_t u32_at(const uint8_t *p, size_t size, size_t i)
{
    uint32_t v = 0;
    size_t k;
    for (k = 0; k < 4; k++) {
        v = (v << 8) | (i + k < size ? p[i + k] : 0u);
    }
    return v;
}

/* Mode 2: every encoder, fields and text from the input, into an output of fuzzed size. */
static void drive_encoders(const uint8_t *data, size_t size)
{
    size_t cap, n = 0, tlen = size > 40 ? size - 40 : 0;
    uint8_t *out;
    char *text;
    tp_msg_ready r;
    tp_msg_metric m;
    uint16_t seq = (uint16_t)u32_at(data, size, 2);
    if (size < 2) {
        return;
    }
    cap = ((size_t)data[0] << 4 | data[1]) & 0xFFFu;
    out = malloc(cap ? cap : 1);
    text = malloc(tlen + 1);
    CHECK(out && text);
    memcpy(text, data + (size - tlen), tlen);
    text[tlen] = '\0';
    r.sram_bytes = u32_at(data, size, 4);
    r.arena_bytes = u32_at(data, size, 8);
    r.blob_id = u32_at(data, size, 12);
    r.fw_version = u32_at(data, size, 16);
    r.max_payload = (uint16_t)u32_at(data, size, 20);
    if (tp_proto_counter_unit(text, &r.counter_unit) != TP_OK) {
        r.counter_unit = (uint8_t)u32_at(data, size, 24);
    }
    r.free_bytes = u32_at(data, size, 28);
    r.largest_block = u32_at(data, size, 32);
    r.second_block = u32_at(data, size, 36);
    r.board = text;
    memset(&m, 0, sizeof m);
    m.step = u32_at(data, size, 28);
    {
        uint32_t bits = u32_at(data, size, 32);
        memcpy(&m.loss, &bits, sizeof bits); /* any bit pattern, NaN included */
    }
    m.flags = (uint8_t)u32_at(data, size, 36);
    {
        const tp_status results[] = {
            tp_proto_encode_ready(out, cap, seq, &r, &n),
            tp_proto_encode_metric(out, cap, seq, &m, &n),
            tp_proto_encode_ack(out, cap, seq, data[0], r.blob_id, &n),
            tp_proto_encode_error(out, cap, seq, (uint16_t)r.sram_bytes, text, &n),
            tp_proto_encode_log(out, cap, seq, text, &n),
            tp_proto_encode_output(out, cap, seq, (const uint8_t *)text, tlen, &n),
            tp_proto_encode_params(out, cap, seq, r.arena_bytes, (const uint8_t *)text, tlen, &n),
        };
        size_t i;
        for (i = 0; i < sizeof results / sizeof results[0]; i++) {
            CHECK(results[i] == TP_OK || results[i] == TP_ERR_NO_SPACE || results[i] == TP_ERR_ARG);
        }
    }
    /* A text frame that fits must decode to the (possibly cut) text. */
    if (tp_proto_encode_log(out, cap, seq, text, &n) == TP_OK) {
        uint8_t *body = malloc(TP_PROTO_MAX_BODY);
        tp_frame_decoder d;
        tp_frame f;
        size_t used = 0;
        CHECK(body != NULL && n <= cap);
        CHECK(tp_frame_decoder_init(&d, body, TP_PROTO_MAX_BODY) == TP_OK);
        CHECK(tp_frame_decoder_feed(&d, out, n, &used, &f) == TP_OK);
        CHECK(f.type == TP_MSG_LOG && f.seq == seq && f.len <= tlen);
        CHECK(memcmp(f.payload, text, f.len) == 0);
        free(body);
    }
    free(out);
    free(text);
}

/* Mode 3: a frame with a good CRC built from the input (type, seq, payload), sent twice
 * through mode 0, so fuzzed payloads reach the unpacker through the decoder. */
static void drive_valid_frames(const uint8_t *data, size_t size)
{
    size_t len, n = 0, cap;
    uint8_t *stream;
    if (size < 3) {
        return;
    }
    len = size - 3 < TP_PROTO_MAX_PAYLOAD ? size - 3 : TP_PROTO_MAX_PAYLOAD;
    cap = TP_PROTO_WIRE_SIZE(len + TP_PROTO_OVERHEAD);
    stream = malloc(2 + 2 * cap);
    CHECK(stream != NULL);
    stream[0] = 0; /* full-size decoder buffer */
    stream[1] = data[1];
    CHECK(tp_frame_encode(stream + 2, cap, data[0], (uint16_t)(data[1] | data[2] << 8), data + 3,
                          len, NULL, 0, &n) == TP_OK);
    memcpy(stream + 2 + n, stream + 2, n);
    drive_decoder(stream, 2 + 2 * n);
    free(stream);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    switch (data[0] % 4u) {
    case 0:
        drive_decoder(data + 1, size - 1);
        break;
    case 1:
        drive_unpack(data + 1, size - 1);
        break;
    case 2:
        drive_encoders(data + 1, size - 1);
        break;
    default:
        drive_valid_frames(data + 1, size - 1);
        break;
    }
    return 0;
}
