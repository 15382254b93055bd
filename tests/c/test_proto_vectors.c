/*
 * test_proto_vectors.c - a line-oriented driver over firmware/proto/tp_proto.c, so that
 * tests/test_protocol.py can check the C code against tests/vectors/protocol.json.
 *
 * stdin, one command a line; stdout, the results:
 *   decode CHUNK HEX          -> "frame TYPE SEQ PAYLOADHEX" | "fault NAME [TYPE SEQ]" ..., "end"
 *                                (the stream is fed CHUNK bytes at a time)
 *   unpack TYPE HEX           -> "ok [FIELD=VALUE ...]" | "fault NAME"
 *   encode TYPE SEQ K=V ...   -> "wire HEX" | "fault NAME"   (device -> host types)
 *   limits                    -> "limits MAX_PAYLOAD MAX_BODY MAX_FRAME"
 *   maxpayload CAP            -> "maxpayload N" (tp_proto_max_payload_for)
 *   unit NAME                 -> "unit N" | "fault NAME" (tp_proto_counter_unit)
 * Integers are decimal, floats %.9g, byte and text fields hex.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tp_proto.h"

#define LINE_MAX_BYTES 65536

static char line[LINE_MAX_BYTES];
static uint8_t bytes[LINE_MAX_BYTES / 2];
static uint8_t tail[LINE_MAX_BYTES / 2 + 1];
static uint8_t body[TP_PROTO_MAX_BODY]; /* exactly the documented size: ASan sees overruns */
static uint8_t out[TP_PROTO_MAX_FRAME];

static size_t from_hex(const char *hex, uint8_t *dst, size_t cap)
{
    size_t n = 0;
    unsigned v;
    while (hex[0] != '\0' && hex[1] != '\0' && n < cap && sscanf(hex, "%2x", &v) == 1) {
        dst[n++] = (uint8_t)v;
        hex += 2;
    }
    return n;
}

static void print_hex(const uint8_t *p, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        printf("%02x", p[i]);
    }
}

static void cmd_decode(char *args)
{
    char *hex;
    size_t chunk = strtoul(args, &hex, 10);
    size_t n = from_hex(hex + 1, bytes, sizeof bytes);
    size_t pos = 0;
    tp_frame_decoder d;
    if (chunk == 0 || tp_frame_decoder_init(&d, body, sizeof body) != TP_OK) {
        printf("bad command\n");
        return;
    }
    while (pos < n) {
        size_t end = pos + chunk < n ? pos + chunk : n;
        while (pos < end) {
            tp_frame f;
            size_t used = 0;
            tp_status st = tp_frame_decoder_feed(&d, bytes + pos, end - pos, &used, &f);
            pos += used;
            if (st == TP_OK) {
                printf("frame %u %u ", f.type, f.seq);
                print_hex(f.payload, f.len);
                printf("\n");
            } else if (st == TP_ERR_UNKNOWN_TYPE) {
                printf("fault %s %u %u\n", tp_status_name(st), f.type, f.seq);
            } else if (st != TP_PROTO_MORE) {
                printf("fault %s\n", tp_status_name(st));
            }
        }
    }
    printf("end\n");
}

static void print_data(const char *name, const tp_host_msg *m)
{
    printf(" %s=", name);
    print_hex(m->data, m->data_len);
}

static void cmd_unpack(char *args)
{
    char *hex;
    tp_frame f;
    tp_host_msg m;
    tp_status st;
    f.type = (uint8_t)strtoul(args, &hex, 10);
    f.seq = 0;
    f.len = (uint16_t)from_hex(hex + 1, bytes, sizeof bytes);
    f.payload = bytes;
    st = tp_proto_unpack(&f, &m);
    if (st != TP_OK) {
        printf("fault %s\n", tp_status_name(st));
        return;
    }
    printf("ok");
    switch (m.type) {
    case TP_MSG_INPUT_CHUNK:
    case TP_MSG_PUSH_PARAMS:
        printf(" offset=%lu", (unsigned long)m.u.chunk.offset);
        print_data("data", &m);
        break;
    case TP_MSG_TRAIN:
    case TP_MSG_EVAL:
        printf(" label=%u flags=%u", m.u.sample.label, m.u.sample.flags);
        break;
    case TP_MSG_SET_HPARAMS:
        printf(" lr=%.9g momentum=%.9g seed=%lu flags=%lu", (double)m.u.hparams.lr,
               (double)m.u.hparams.momentum, (unsigned long)m.u.hparams.seed,
               (unsigned long)m.u.hparams.flags);
        break;
    case TP_MSG_PULL_PARAMS:
        printf(" offset=%lu max_len=%u", (unsigned long)m.u.pull.offset, m.u.pull.max_len);
        break;
    case TP_MSG_BULK_OPEN:
        print_data("path", &m);
        break;
    case TP_MSG_BULK_SAMPLE:
        printf(" index=%lu mode=%u flags=%u", (unsigned long)m.u.bulk_sample.index,
               m.u.bulk_sample.mode, m.u.bulk_sample.flags);
        break;
    case TP_MSG_LABEL:
        printf(" label=%u", m.u.label.label);
        break;
    case TP_MSG_GET_FRAME:
        printf(" every=%u", m.u.get_frame.every);
        break;
    default:
        break;
    }
    printf("\n");
}

/* Fields of any device message, filled from K=V tokens. */
typedef struct {
    tp_msg_ready ready;
    tp_msg_metric metric;
    tp_msg_seen seen;
    tp_msg_thumb thumb;
    uint32_t acked_type, value, offset, code;
    size_t tail_len;
} fields;

static int set_field(fields *f, const char *key, const char *val)
{
    static const struct {
        const char *key;
        size_t offset;
        int kind; /* 4: u32, 2: u16, 1: u8, 'f': float */
    } table[] = {
        {"sram_bytes", offsetof(fields, ready.sram_bytes), 4},
        {"arena_bytes", offsetof(fields, ready.arena_bytes), 4},
        {"blob_id", offsetof(fields, ready.blob_id), 4},
        {"fw_version", offsetof(fields, ready.fw_version), 4},
        {"max_payload", offsetof(fields, ready.max_payload), 2},
        {"counter_unit", offsetof(fields, ready.counter_unit), 1},
        {"free_bytes", offsetof(fields, ready.free_bytes), 4},
        {"largest_block", offsetof(fields, ready.largest_block), 4},
        {"second_block", offsetof(fields, ready.second_block), 4},
        {"step", offsetof(fields, metric.step), 4},
        {"loss", offsetof(fields, metric.loss), 'f'},
        {"counter", offsetof(fields, metric.counter), 4},
        {"arena_peak", offsetof(fields, metric.arena_peak), 4},
        {"stack_peak", offsetof(fields, metric.stack_peak), 4},
        {"trainable_bytes", offsetof(fields, metric.trainable_bytes), 4},
        {"static_bytes", offsetof(fields, metric.static_bytes), 4},
        {"label", offsetof(fields, metric.label), 1},
        {"prediction", offsetof(fields, metric.prediction), 1},
        {"correct", offsetof(fields, metric.correct), 1},
        {"flags", offsetof(fields, metric.flags), 1},
        {"acked_type", offsetof(fields, acked_type), 4},
        {"value", offsetof(fields, value), 4},
        {"offset", offsetof(fields, offset), 4},
        {"code", offsetof(fields, code), 4},
        {"frame", offsetof(fields, seen.frame), 4},
        {"capture", offsetof(fields, seen.capture), 4},
        {"prep", offsetof(fields, seen.prep), 4},
        {"width", offsetof(fields, thumb.width), 1},
        {"height", offsetof(fields, thumb.height), 1},
        {"channels", offsetof(fields, thumb.channels), 1},
    };
    size_t i;
    for (i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(key, table[i].key) == 0) {
            char *p = (char *)f + table[i].offset;
            unsigned long v = strtoul(val, NULL, 10);
            if (table[i].kind == 'f') {
                float x = strtof(val, NULL);
                memcpy(p, &x, sizeof x);
            } else if (table[i].kind == 4) {
                uint32_t x = (uint32_t)v;
                memcpy(p, &x, sizeof x);
            } else if (table[i].kind == 2) {
                uint16_t x = (uint16_t)v;
                memcpy(p, &x, sizeof x);
            } else {
                *(uint8_t *)p = (uint8_t)v;
            }
            return 1;
        }
    }
    /* The one variable tail of the message: bytes, or text (made NUL-terminated here). */
    if (strcmp(key, "data") == 0 || strcmp(key, "board") == 0 || strcmp(key, "text") == 0) {
        f->tail_len = from_hex(val, tail, sizeof tail - 1);
        tail[f->tail_len] = 0;
        return 1;
    }
    return strcmp(key, "protocol_version") == 0; /* written by the encoder itself */
}

static void cmd_encode(char *args)
{
    fields f;
    char *tok;
    unsigned type, seq;
    size_t len = 0;
    tp_status st;
    memset(&f, 0, sizeof f);
    f.ready.board = (const char *)tail;
    tok = strtok(args, " ");
    type = tok ? (unsigned)strtoul(tok, NULL, 10) : 0;
    tok = strtok(NULL, " ");
    seq = tok ? (unsigned)strtoul(tok, NULL, 10) : 0;
    while ((tok = strtok(NULL, " ")) != NULL) {
        char *eq = strchr(tok, '=');
        if (eq == NULL) {
            printf("bad token %s\n", tok);
            return;
        }
        *eq = '\0';
        if (!set_field(&f, tok, eq + 1)) {
            printf("unknown field %s\n", tok);
            return;
        }
    }
    switch (type) {
    case TP_MSG_READY:
        st = tp_proto_encode_ready(out, sizeof out, (uint16_t)seq, &f.ready, &len);
        break;
    case TP_MSG_ACK:
        st = tp_proto_encode_ack(out, sizeof out, (uint16_t)seq, (uint8_t)f.acked_type, f.value,
                                 &len);
        break;
    case TP_MSG_METRIC:
        st = tp_proto_encode_metric(out, sizeof out, (uint16_t)seq, &f.metric, &len);
        break;
    case TP_MSG_OUTPUT:
        st = tp_proto_encode_output(out, sizeof out, (uint16_t)seq, tail, f.tail_len, &len);
        break;
    case TP_MSG_PARAMS:
        st = tp_proto_encode_params(out, sizeof out, (uint16_t)seq, f.offset, tail, f.tail_len,
                                    &len);
        break;
    case TP_MSG_ERROR:
        st = tp_proto_encode_error(out, sizeof out, (uint16_t)seq, (tp_status)f.code,
                                   (const char *)tail, &len);
        break;
    case TP_MSG_LOG:
        st = tp_proto_encode_log(out, sizeof out, (uint16_t)seq, (const char *)tail, &len);
        break;
    case TP_MSG_SEEN:
        st = tp_proto_encode_seen(out, sizeof out, (uint16_t)seq, &f.seen, &len);
        break;
    case TP_MSG_THUMB:
        f.thumb.frame = f.seen.frame; /* the shared keys */
        f.thumb.offset = f.offset;
        st = tp_proto_encode_thumb(out, sizeof out, (uint16_t)seq, &f.thumb, tail, f.tail_len,
                                   &len);
        break;
    default:
        printf("not a device message %u\n", type);
        return;
    }
    if (st != TP_OK) {
        printf("fault %s\n", tp_status_name(st));
        return;
    }
    printf("wire ");
    print_hex(out, len);
    printf("\n");
}

int main(void)
{
    while (fgets(line, sizeof line, stdin) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        if (strncmp(line, "decode ", 7) == 0) {
            cmd_decode(line + 7);
        } else if (strncmp(line, "unpack ", 7) == 0) {
            cmd_unpack(line + 7);
        } else if (strncmp(line, "encode ", 7) == 0) {
            cmd_encode(line + 7);
        } else if (strcmp(line, "limits") == 0) {
            printf("limits %u %u %u\n", TP_PROTO_MAX_PAYLOAD, TP_PROTO_MAX_BODY,
                   TP_PROTO_MAX_FRAME);
        } else if (strncmp(line, "maxpayload ", 11) == 0) {
            printf("maxpayload %lu\n",
                   (unsigned long)tp_proto_max_payload_for(strtoul(line + 11, NULL, 10)));
        } else if (strncmp(line, "unit ", 5) == 0) {
            uint8_t unit = 0;
            tp_status st = tp_proto_counter_unit(line + 5, &unit);
            if (st == TP_OK) {
                printf("unit %u\n", unit);
            } else {
                printf("fault %s\n", tp_status_name(st));
            }
        } else {
            printf("bad command\n");
        }
    }
    return 0;
}
