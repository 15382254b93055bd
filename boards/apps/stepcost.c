/*
 * stepcost.c - what a training step costs on the board: tp_board_counter around one inference
 * and each of a few training steps, the stack a step uses, and a CRC32 of the parameters after
 * the steps (any change to the arithmetic changes it: a cheap bit-exactness check when tuning
 * the kernels). Uses the selftrain headers (boards/apps/selftrain_headers.py writes both):
 *
 *   make -C boards/qemu-m4 APP=$PWD/boards/apps/stepcost.c APP_ENTRY=tp_stepcost_main \
 *        BLOB_CFLAGS='-DSTEPCOST_MODEL="\"<model_tpb.h>\"" -DSTEPCOST_SAMPLES="\"<samples.h>\""'
 *
 * (BLOB_CFLAGS and macro names of its own rather than BLOB=/SAMPLES=: the device loop, built in
 * with any other APP, would define the compiled-in blob a second time. Rebuild from clean when
 * the headers change.)
 * Output lines: "infer <n>", "step <i> <n> loss_bits <%08x>", "stack <bytes>", "params_crc32
 * <%08x>", n in tp_board_counter_unit() units. Exit status 0, or the failing call's status.
 */
#include <stdint.h>
#include <string.h>

#define TP_ERR_NOT_LOADED TP_STATUS_NOT_LOADED
#include "tinyprop.h"
#undef TP_ERR_NOT_LOADED
#include "tp_board.h"
#include "tp_proto.h"

#include STEPCOST_MODEL
#include STEPCOST_SAMPLES

static union {
    uint64_t align;
    uint8_t bytes[TP_MODEL_ARENA_BYTES];
} arena;
static union {
    uint64_t align;
    uint8_t bytes[TP_MODEL_PARAMS_BYTES];
} params;

static char line[96];
static uint32_t line_n;

static void put(const char *s)
{
    while (*s != '\0' && line_n < sizeof line) {
        line[line_n++] = *s++;
    }
}

static void put_u32(uint32_t v)
{
    char d[10];
    uint32_t n = 0;
    do {
        d[n++] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v > 0u);
    while (n > 0u && line_n < sizeof line) {
        line[line_n++] = d[--n];
    }
}

static void put_hex32(uint32_t v)
{
    static const char hex[] = "0123456789abcdef";
    int shift;
    for (shift = 28; shift >= 0 && line_n < sizeof line; shift -= 4) {
        line[line_n++] = hex[(v >> shift) & 0xfu];
    }
}

static void send(void)
{
    put("\n");
    (void)tp_board_write((const uint8_t *)line, line_n);
    line_n = 0;
}

/* The stack is painted below the caller's frame before the steps; the deepest word no longer
 * holding the paint is the peak. __stack_limit: boards/qemu-m4/link.ld. */
#define PAINT 0xA5C3E1F7u
extern uint32_t __stack_limit[];

static __attribute__((noinline)) void paint_stack(void)
{
    uint32_t here;
    uintptr_t end = (uintptr_t)&here - 256u; /* stop short of this frame */
    uint32_t *p = __stack_limit;
    while ((uintptr_t)p < end) {
        *p++ = PAINT;
    }
}

static uint32_t stack_used(void)
{
    extern uint32_t __stack_top[];
    uint32_t *p = __stack_limit;
    while (p < __stack_top && *p == PAINT) {
        p++;
    }
    return (uint32_t)((uintptr_t)__stack_top - (uintptr_t)p);
}

#define STEPS 3u


int tp_stepcost_main(void)
{
    static tp_session s;
    tp_result r;
    tp_status st;
    uint64_t t0;
    uint32_t i;
    const tp_hparams hp = {.lr = TP_SELFTRAIN_LR, .seed = TP_SELFTRAIN_SEED};
    uint32_t cost[STEPS + 1], bits[STEPS];
    if (tp_board_init() != TP_BOARD_OK) {
        return 1;
    }
    st = tp_session_init(&s, tp_model_blob, tp_model_blob_len, arena.bytes, TP_MODEL_ARENA_BYTES,
                         params.bytes, TP_MODEL_PARAMS_BYTES);
    if (st != TP_OK) {
        return (int)st;
    }
    tp_set_hparams(&s, &hp);
    paint_stack();
    memcpy(tp_input(&s), tp_selftrain_samples, TP_SAMPLES_INPUT_BYTES);
    t0 = tp_board_counter();
    st = tp_infer(&s, &r);
    cost[0] = (uint32_t)(tp_board_counter() - t0);
    for (i = 0; i < STEPS && st == TP_OK; i++) {
        uint32_t k = i % TP_SAMPLES_COUNT;
        memcpy(tp_input(&s), tp_selftrain_samples + (size_t)k * TP_SAMPLES_INPUT_BYTES,
               TP_SAMPLES_INPUT_BYTES);
        t0 = tp_board_counter();
        st = tp_train_step(&s, (int32_t)tp_selftrain_labels[k], &r);
        cost[i + 1] = (uint32_t)(tp_board_counter() - t0);
        memcpy(&bits[i], &r.loss, 4);
    }
    if (st != TP_OK) {
        return (int)st;
    }
    put("infer ");
    put_u32(cost[0]);
    send();
    for (i = 0; i < STEPS; i++) {
        put("step ");
        put_u32(i);
        put(" ");
        put_u32(cost[i + 1]);
        put(" loss_bits ");
        put_hex32(bits[i]);
        send();
    }
    put("stack ");
    put_u32(stack_used());
    send();
    put("params_crc32 ");
    put_hex32(tp_crc32(0, params.bytes, TP_MODEL_PARAMS_BYTES));
    send();
    return 0;
}
