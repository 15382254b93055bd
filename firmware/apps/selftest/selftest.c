/*
 * selftest.c - a board self-test application that uses only tp_board.h, so every board can run
 * it (APP=selftest). The host drives it over the link with one-byte commands followed by
 * little-endian arguments; replies are text lines, followed by raw bytes where noted.
 *
 *   'i'                      -> "info name=<board> unit=<counter unit> sram=<bytes>"
 *   'e' u32 n, n bytes       -> the same n bytes back (echo)
 *   't' u32 n                -> n bytes (i & 0xff), then "tx n=<n> cost=<counter delta>"
 *   'k' u32 n                -> "work n=<n> cost=<counter delta> result=<n>" (int + float work)
 *   'o' u32 depth            -> "deep depth=<depth> sum=<s> peak=<stack peak>" (recursion)
 *   'p'                      -> "stack peak=<stack peak>"
 *   'w' u32 addr             -> stores a word at addr, then "wrote" (if that did not fault)
 *   'b' name NUL u32 off u32 n -> "bulk size=<s> got=<g>" then g bytes
 *   's' u32 n, n bytes       -> "save status=<s>"
 *   'l'                      -> "load status=<s> n=<n>" then n bytes (if status is 0)
 *   'x' u8 status            -> tp_board_exit(status)
 *   'q' u8 status            -> returns status from the entry function
 */
#include "tinyprop.h"
#include <stdint.h>
#include <string.h>

#include "tp_board.h"

int tp_selftest_main(void);

#define BUF_BYTES 4096u

static uint8_t buffer[BUF_BYTES];

/* Read exactly n bytes; ends the program if the link closes. */
static void read_exact(uint8_t *dst, uint32_t n)
{
    while (n > 0) {
        int got = tp_board_read(dst, n);
        if (got < 0) {
            tp_board_exit(0);
        }
        dst += got;
        n -= (uint32_t)got;
    }
}

static uint32_t read_u32(void)
{
    uint8_t b[4];
    read_exact(b, 4);
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint8_t read_u8(void)
{
    uint8_t b;
    read_exact(&b, 1);
    return b;
}

/* Reply lines are built with these instead of snprintf, which in newlib-nano pulls in malloc. */
typedef struct {
    char text[160];
    size_t n;
} line_t;

static void put_str(line_t *line, const char *s)
{
    while (*s != '\0' && line->n < sizeof line->text) {
        line->text[line->n++] = *s++;
    }
}

static void put_int(line_t *line, const char *key, int64_t value)
{
    char digits[24];
    size_t n = 0;
    uint64_t magnitude = value < 0 ? 0u - (uint64_t)value : (uint64_t)value;
    put_str(line, key);
    if (value < 0) {
        put_str(line, "-");
    }
    do {
        digits[n++] = (char)('0' + magnitude % 10u);
        magnitude /= 10u;
    } while (magnitude > 0);
    while (n > 0 && line->n < sizeof line->text) {
        line->text[line->n++] = digits[--n];
    }
}

static void send_line(line_t *line)
{
    put_str(line, "\n");
    tp_board_write((const uint8_t *)line->text, line->n);
}

static void reply(const char *text)
{
    tp_board_write((const uint8_t *)text, strlen(text));
}

/* Integer and float arithmetic whose result is fixed by n: the float part also proves the FPU
 * is enabled (a disabled FPU faults on the first float instruction). */
static uint32_t work(uint32_t n)
{
    uint32_t x = 12345u;
    float acc = 0.0f;
    for (uint32_t i = 0; i < n; ++i) {
        x = x * 1664525u + 1013904223u;
        acc = acc * 0.5f + (float)(x >> 24);
    }
    uint32_t bits;
    memcpy(&bits, &acc, sizeof bits);
    return x ^ bits;
}

/* Each level keeps a 64-byte frame alive across the call, so depth d uses > 64 d bytes. */
static uint32_t recurse(uint32_t depth)
{
    volatile uint8_t frame[64];
    frame[0] = (uint8_t)depth;
    frame[63] = (uint8_t)(depth >> 8);
    if (depth == 0) {
        return frame[0];
    }
    return recurse(depth - 1) + frame[0] + frame[63];
}

static void cmd_echo(void)
{
    uint32_t left = read_u32();
    while (left > 0) {
        int got = tp_board_read(buffer, left < BUF_BYTES ? left : BUF_BYTES);
        if (got < 0) {
            tp_board_exit(0);
        }
        tp_board_write(buffer, (size_t)got);
        left -= (uint32_t)got;
    }
}

static void cmd_tx(void)
{
    line_t line = {.n = 0};
    uint32_t n = read_u32();
    uint64_t start = tp_board_counter();
    for (uint32_t i = 0; i < n; ++i) {
        uint8_t b = (uint8_t)i;
        tp_board_write(&b, 1);
    }
    put_int(&line, "tx n=", n);
    put_int(&line, " cost=", (int64_t)(tp_board_counter() - start));
    send_line(&line);
}

static void cmd_work(void)
{
    line_t line = {.n = 0};
    uint32_t n = read_u32();
    uint64_t start = tp_board_counter();
    uint32_t result = work(n);
    uint64_t cost = tp_board_counter() - start;
    put_int(&line, "work n=", n);
    put_int(&line, " cost=", (int64_t)cost);
    put_int(&line, " result=", result);
    send_line(&line);
}

static void cmd_bulk(void)
{
    char name[128];
    line_t line = {.n = 0};
    size_t len = 0;
    do {
        read_exact((uint8_t *)&name[len], 1);
    } while (name[len] != '\0' && ++len < sizeof name - 1);
    name[len] = '\0';
    uint32_t offset = read_u32();
    uint32_t n = read_u32();
    int32_t size = tp_board_bulk_open(name);
    int32_t got = size < 0 ? size
                           : tp_board_bulk_read(offset, buffer, n < BUF_BYTES ? n : BUF_BYTES);
    put_int(&line, "bulk size=", size);
    put_int(&line, " got=", got);
    send_line(&line);
    if (got > 0) {
        tp_board_write(buffer, (size_t)got);
    }
}

static void cmd_save(void)
{
    line_t line = {.n = 0};
    uint32_t n = read_u32();
    if (n > BUF_BYTES) {
        tp_board_exit(2);
    }
    read_exact(buffer, n);
    put_int(&line, "save status=", tp_board_store_save(buffer, n));
    send_line(&line);
}

static void cmd_load(void)
{
    line_t line = {.n = 0};
    uint32_t n = 0;
    int status = tp_board_store_load(buffer, BUF_BYTES, &n);
    put_int(&line, "load status=", status);
    put_int(&line, " n=", n);
    send_line(&line);
    if (status == TP_BOARD_OK) {
        tp_board_write(buffer, n);
    }
}

int tp_selftest_main(void)
{
    if (tp_board_init() != TP_BOARD_OK) {
        return 1;
    }
    for (;;) {
        line_t line = {.n = 0};
        uint8_t cmd = read_u8();
        switch (cmd) {
        case 'i':
            put_str(&line, "info name=");
            put_str(&line, tp_board_name());
            put_str(&line, " unit=");
            put_str(&line, tp_board_counter_unit());
            put_int(&line, " sram=", tp_board_sram_bytes());
            send_line(&line);
            break;
        case 'e':
            cmd_echo();
            break;
        case 't':
            cmd_tx();
            break;
        case 'k':
            cmd_work();
            break;
        case 'o': {
            uint32_t depth = read_u32();
            uint32_t sum = recurse(depth);
            put_int(&line, "deep depth=", depth);
            put_int(&line, " sum=", sum);
            put_int(&line, " peak=", tp_board_stack_peak());
            send_line(&line);
            break;
        }
        case 'p':
            put_int(&line, "stack peak=", tp_board_stack_peak());
            send_line(&line);
            break;
        case 'w':
            *(volatile uint32_t *)(uintptr_t)read_u32() = 0xDEADBEEFu;
            reply("wrote\n");
            break;
        case 'b':
            cmd_bulk();
            break;
        case 's':
            cmd_save();
            break;
        case 'l':
            cmd_load();
            break;
        case 'x':
            tp_board_exit(read_u8());
            break;
        case 'q':
            return read_u8();
        default:
            reply("unknown\n");
            break;
        }
    }
}
