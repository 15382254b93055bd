/*
 * bench_sample_path.c - the device's per-byte cost of a sample: INPUT_CHUNK frames as the host
 * sends them (27 full chunks of a 96x96x3 input), through the frame decoder (COBS, CRC), the
 * unpacker and the copy into the input tensor, as tp_device.c handles them, in READ_BLOCK-sized
 * reads. Prints "sample_path bytes B counter C UNIT" on the link and exits 0.
 *
 *   make -C boards/qemu-m4 APP=$PWD/tests/c/bench_sample_path.c APP_ENTRY=bench_sample_path
 */
#include <string.h>

#include "tp_board.h"
#include "tp_proto.h"

#define SAMPLE_BYTES (96u * 96u * 3u)
#define CHUNK (TP_PROTO_MAX_PAYLOAD - 4u)
#define READ_BLOCK 256u

static uint8_t input[SAMPLE_BYTES];
static uint8_t wire[TP_PROTO_MAX_FRAME];
static uint8_t rx[TP_PROTO_MAX_BODY];

static void put_text(const char *s)
{
    (void)tp_board_write((const uint8_t *)s, strlen(s));
}

static void put_num(uint32_t v)
{
    char digits[11];
    int n = 10;
    digits[n] = '\0';
    do {
        digits[--n] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v != 0u);
    put_text(digits + n);
}

int bench_sample_path(void)
{
    tp_frame_decoder dec;
    uint8_t head[4], data[CHUNK];
    uint32_t off, i, x = 12345u, total = 0;
    uint64_t cost = 0;
    (void)tp_board_init();
    (void)tp_frame_decoder_init(&dec, rx, sizeof rx);
    for (i = 0; i < CHUNK; i++) { /* pseudo-random pixels, zeros included */
        x = x * 1103515245u + 12345u;
        data[i] = (uint8_t)(x >> 16);
    }
    for (off = 0; off < SAMPLE_BYTES; off += CHUNK) {
        uint32_t n = SAMPLE_BYTES - off < CHUNK ? SAMPLE_BYTES - off : CHUNK;
        size_t len = 0, pos = 0;
        uint64_t t0;
        head[0] = (uint8_t)off;
        head[1] = (uint8_t)(off >> 8);
        head[2] = (uint8_t)(off >> 16);
        head[3] = 0;
        (void)tp_frame_encode(wire, sizeof wire, TP_MSG_INPUT_CHUNK, 1, head, 4, data, n, &len);
        t0 = tp_board_counter();
        while (pos < len) {
            size_t block = len - pos < READ_BLOCK ? len - pos : READ_BLOCK;
            const uint8_t *p = wire + pos;
            pos += block;
            while (block > 0) {
                size_t used = 0;
                tp_frame f;
                tp_host_msg m;
                tp_status st = tp_frame_decoder_feed(&dec, p, block, &used, &f);
                p += used;
                block -= used;
                if (st == TP_OK && tp_proto_unpack(&f, &m) == TP_OK) {
                    memcpy(input + m.u.chunk.offset, m.data, m.data_len);
                    total += (uint32_t)m.data_len;
                }
            }
        }
        cost += tp_board_counter() - t0;
    }
    put_text("sample_path bytes ");
    put_num(total);
    put_text(" counter ");
    put_num((uint32_t)cost);
    put_text(" ");
    put_text(tp_board_counter_unit());
    put_text("\n");
    return total == SAMPLE_BYTES ? 0 : 1;
}
