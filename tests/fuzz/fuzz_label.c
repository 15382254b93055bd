/*
 * fuzz_label.c - libFuzzer harness for the learn application's inputs (firmware/apps/learn/
 * learn.c, compiled into this file over a board of fuzzed inputs): the host's bytes (LABEL,
 * GET_FRAME, PULL_PARAMS, SAVE_PARAMS, HELLO, anything), the camera's frames and mode, the
 * labels a button gives, and the record the store holds at boot. Run it with
 * tests/fuzz/run.sh label; the model is a generated one compiled in.
 *
 * Input: a 7-byte header, then chunks "kind, length, bytes" that the board plays in order:
 *   kind 0  raw host bytes              kind 1  a host frame with a good CRC: type, then payload
 *   kind 2  a camera frame of `length`  kind 3  a frame of the mode's size, no label
 *   kind 4  a frame of the mode's size, labelled by its first byte (any int8: out of range too)
 * Header: byte 0 the camera format (0-2) in bits 0-1, wait for the host (bit 2), the store's
 * record at boot (bits 3-4: none, this blob's, this blob's with a byte flipped, raw bytes),
 * saves fail (bit 5), no camera (bit 6); bytes 1-2 camera width and height (1-64); bytes 3-6
 * the stored record's step. Every save must be a sealed, intact record of the blob. A run reads at
 * most FRAME_LIMIT camera frames (then the camera is closed): a 2-byte chunk is a whole frame and
 * a training step, and inputs of thousands of them slowed the fuzzer from 1,000 runs a second to
 * 30 while reaching no state that a few dozen frames do not.
 */
// FUZZ_SOURCES: @core
// FUZZ_MODEL: fc_flatten last:2
// FUZZ_NO_COVERAGE: firmware/core/kernels firmware/core/tp_crc32.c firmware/core/tp_fmath.c
// FUZZ_NO_COVERAGE: firmware/core/tp_optim.c firmware/core/tp_quant.c
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "tp_board.h"
#include "tp_le.h"
#include "tp_proto.h"
#include "tp_record.h"

/* Small buffers, so the frame checks and the replay are reached: frames up to 48 x 48 RGB (a
 * larger mode is refused at boot), two kept frames, a save every third labelled frame. */
#define TP_LEARN_FRAME_BYTES (48u * 48u * 3u)
#define TP_LEARN_REPLAY 2u
#define TP_LEARN_SAVE_EVERY 3u
#include "../../firmware/apps/learn/learn.c"

#define HEADER 7u
#define FRAME_LIMIT 32u

static struct {
    const uint8_t *data;
    size_t size, pos;                                    /* the next chunk */
    uint8_t host[TP_PROTO_WIRE_SIZE(TP_PROTO_MAX_BODY)]; /* host bytes not read yet */
    size_t host_len, host_pos;
    int32_t label;   /* of the frame read last */
    uint32_t frames; /* camera reads so far */
    uint64_t counter;
} board;

/* The next chunk: kind, its bytes. 0 at the end of the input. */
static int next_chunk(uint8_t *kind, const uint8_t **bytes, size_t *len)
{
    if (board.pos + 2u > board.size) {
        board.pos = board.size;
        return 0;
    }
    *kind = board.data[board.pos] % 5u;
    *len = board.data[board.pos + 1u];
    *bytes = board.data + board.pos + 2u;
    if (*len > board.size - board.pos - 2u) {
        *len = board.size - board.pos - 2u;
    }
    return 1;
}

/* Host bytes from the chunk at pos, if it is one (kinds 0 and 1): into board.host. */
static int take_host_chunk(void)
{
    uint8_t kind;
    const uint8_t *bytes;
    size_t len, n = 0;
    if (!next_chunk(&kind, &bytes, &len) || kind > 1u) {
        return 0;
    }
    board.pos += 2u + len;
    if (kind == 0u) {
        memcpy(board.host, bytes, len);
        n = len;
    } else if (len >= 1u) {
        CHECK(tp_frame_encode(board.host, sizeof board.host, bytes[0], (uint16_t)board.pos,
                              bytes + 1, len - 1u, NULL, 0, &n) == TP_OK);
    }
    board.host_len = n;
    board.host_pos = 0;
    return 1;
}

static size_t give_host(uint8_t *dst, size_t max)
{
    size_t n = board.host_len - board.host_pos < max ? board.host_len - board.host_pos : max;
    memcpy(dst, board.host + board.host_pos, n);
    board.host_pos += n;
    return n;
}

int tp_board_poll(uint8_t *dst, size_t max)
{
    CHECK(dst != NULL && max > 0u);
    while (board.host_pos == board.host_len) {
        if (board.pos >= board.size) {
            return TP_BOARD_ERR_CLOSED;
        }
        if (!take_host_chunk()) {
            return 0; /* a camera frame comes first */
        }
    }
    return (int)give_host(dst, max);
}

/* Waiting for the host: the frames before its next bytes go by unseen. */
int tp_board_read(uint8_t *dst, size_t max)
{
    int got;
    while ((got = tp_board_poll(dst, max)) == 0) {
        uint8_t kind;
        const uint8_t *bytes;
        size_t len;
        if (next_chunk(&kind, &bytes, &len)) {
            board.pos += 2u + len;
        }
    }
    return got;
}

int tp_board_write(const uint8_t *src, size_t n)
{
    CHECK(src != NULL || n == 0u);
    return (int)n;
}

int tp_board_camera_open(tp_camera_mode *mode)
{
    if (board.data[0] & 0x40u) {
        return TP_BOARD_ERR_UNSUPPORTED;
    }
    mode->format = board.data[0] % 4u == 3u ? TP_IMAGE_RGB565BE : board.data[0] % 4u;
    mode->width = board.data[1] % 64u + 1u;
    mode->height = board.data[2] % 64u + 1u;
    mode->flags = TP_CAMERA_VIRTUAL | ((board.data[0] & 4u) ? TP_CAMERA_WAIT_HOST : 0u);
    return TP_BOARD_OK;
}

/* The chunk at pos as a frame; a host chunk here is a failed read (the app retries). */
int32_t tp_board_camera_read(uint8_t *dst, uint32_t max)
{
    uint8_t kind;
    const uint8_t *bytes;
    size_t len, k, n;
    board.label = TP_BOARD_NO_LABEL;
    if (++board.frames > FRAME_LIMIT || !next_chunk(&kind, &bytes, &len)) {
        return TP_BOARD_ERR_CLOSED;
    }
    board.pos += 2u + len;
    if (kind <= 1u) {
        return TP_BOARD_ERR_IO;
    }
    n = kind == 2u ? len : frame_bytes_of(&app.mode);
    if (n > max) {
        return TP_BOARD_ERR_TOO_BIG;
    }
    for (k = 0; k < n; k++) {
        dst[k] = len ? bytes[k % len] : (uint8_t)k;
    }
    if (kind == 4u && len >= 1u) {
        board.label = (int8_t)bytes[0];
    }
    return (int32_t)n;
}

int tp_board_label(int32_t *label)
{
    *label = board.label;
    return TP_BOARD_OK;
}

/* At boot, dst holds the blob's params after the header: the store's record is written over it. */
int tp_board_store_load(uint8_t *dst, uint32_t max, uint32_t *n)
{
    uint32_t kind = (board.data[0] >> 3) & 3u, k;
    if (kind == 0u) {
        return TP_BOARD_ERR_NOT_FOUND;
    }
    CHECK(max == TP_RECORD_HEADER + TP_MODEL_PARAMS_BYTES);
    *n = max;
    if (kind == 3u) { /* raw bytes: the record header and then some */
        for (k = 0; k < max; k++) {
            dst[k] = board.data[3u + k % (board.size - 3u)];
        }
        *n = tp_rd_u32(board.data + 3) % (max + 1u);
        return TP_BOARD_OK;
    }
    tp_wr_u32(dst, TP_RECORD_MAGIC);
    tp_wr_u32(dst + 4, TP_MODEL_BLOB_ID);
    tp_wr_u32(dst + 8, TP_MODEL_PARAMS_BYTES);
    tp_wr_u32(dst + 12, tp_rd_u32(board.data + 3));
    tp_wr_u32(dst + 16, 0u);
    tp_wr_u32(dst + 20,
              tp_crc32(tp_crc32(0, dst, 20u), dst + TP_RECORD_HEADER, TP_MODEL_PARAMS_BYTES));
    if (kind == 2u) {
        dst[board.data[4] % max] ^= (uint8_t)(1u << (board.data[5] % 8u));
    }
    return TP_BOARD_OK;
}

int tp_board_store_save(const uint8_t *src, uint32_t n)
{
    CHECK(n == TP_RECORD_HEADER + TP_MODEL_PARAMS_BYTES && tp_rd_u32(src) == TP_RECORD_MAGIC);
    CHECK(tp_rd_u32(src + 4) == TP_MODEL_BLOB_ID && tp_rd_u32(src + 8) == TP_MODEL_PARAMS_BYTES);
    CHECK(tp_rd_u32(src + 20) ==
          tp_crc32(tp_crc32(0, src, 20u), src + TP_RECORD_HEADER, TP_MODEL_PARAMS_BYTES));
    return (board.data[0] & 0x20u) ? TP_BOARD_ERR_IO : TP_BOARD_OK;
}

int tp_board_init(void)
{
    return TP_BOARD_OK;
}

const char *tp_board_name(void)
{
    return "fuzz";
}

uint32_t tp_board_sram_bytes(void)
{
    return 256u << 10;
}

void tp_board_free_ram(tp_board_ram *ram)
{
    memset(ram, 0, sizeof *ram);
}

uint64_t tp_board_counter(void)
{
    return board.counter += 40u;
}

const char *tp_board_counter_unit(void)
{
    return "instructions";
}

uint32_t tp_board_stack_peak(void)
{
    return 0u;
}

void tp_board_yield(void)
{
}

void tp_board_show(int32_t prediction)
{
    CHECK(prediction >= 0 && (uint32_t)prediction < app.s.b.req.n_classes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int status;
    if (size < HEADER) {
        return 0;
    }
    memset(&board, 0, sizeof board);
    memset(&app, 0, sizeof app); /* every run boots afresh */
    board.data = data;
    board.size = size;
    board.pos = HEADER;
    status = tp_learn_main();
    /* 0: the frames ran out; else a tp_status (a boot refusal, a camera that keeps failing) */
    CHECK(status >= 0 && tp_status_name((tp_status)status)[0] != '\0');
    return 0;
}
