/*
 * cyclebench.c - microbenchmarks whose cycle counts the Cortex-M4 Technical Reference Manual
 * fixes (APP=<this file> APP_ENTRY=tp_cyclebench_main, Cortex-M4F boards only). Each benchmark
 * is a loop in assembly, so the instructions are exactly the ones written; it runs N and then
 * 2N iterations between two counter reads each, and tinyprop.bench.cycles models the trace of
 * the two runs: their difference over N is one iteration, the same code around both cancelling
 * out.
 *
 * Output, on the board link, text lines: "<name> <N> <cost of N> <cost of 2N>" (tp_board_counter
 * units) a benchmark, then "end <count>". The costs are kept until every benchmark has run, so
 * no UART wait (during which the emulator's clock jumps) falls between two counter reads.
 */
#include <stdint.h>
#include <string.h>

#include "tp_board.h"

int tp_cyclebench_main(void);

#if defined(__ARM_ARCH_7EM__) && defined(__ARM_FP)

#define ITERATIONS 50u

/* Each benchmark: r0 = iterations, r1 = a word buffer (buffer[0] holds its own address, for
 * the dependent load chain); the loop ends `subs r0, r0, #1; bne 1b` (1 + 1+P cycles). */
#define BENCH(name, setup, body)                                                      \
    __asm__(".text\n.balign 4\n.thumb_func\n.type " #name ", %function\n" #name ":\n" \
            "push {r4-r11, lr}\n" setup "1:\n" body "subs r0, r0, #1\nbne 1b\n"       \
            "pop {r4-r11, pc}\n.size " #name ", .-" #name "\n");                      \
    void name(uint32_t n, uint32_t *buf)

#define X2(s) s s
#define X4(s) X2(s) X2(s)
#define X8(s) X4(s) X4(s)

BENCH(cb_ldr_chain, "", X8("ldr r1, [r1]\n"));
BENCH(cb_ldr_independent, "",
      X2("ldr r2, [r1]\nldr r3, [r1, #4]\nldr r4, [r1, #8]\nldr r5, [r1, #12]\n"));
BENCH(cb_ldr_str_imm, "", X4("ldr r2, [r1, #4]\nstr r2, [r1, #8]\n"));
BENCH(cb_ldr_str_reg, "movs r3, #8\n", X4("ldr r2, [r1, #4]\nstr r2, [r1, r3]\n"));
BENCH(cb_str_imm, "", X8("str r2, [r1, #8]\n"));
BENCH(cb_str_reg, "movs r3, #8\n", X8("str r2, [r1, r3]\n"));
BENCH(cb_str_ldr, "", X4("str r2, [r1, #8]\nldr r3, [r1, #4]\n"));
BENCH(cb_alu_address, "", X4("add r2, r1, #4\nldr r3, [r2]\n"));
BENCH(cb_ldrb_ldrh, "", X4("ldrb r2, [r1, #4]\nldrsh r3, [r1, #6]\n"));
BENCH(cb_ldrd_strd, "", X2("ldrd r2, r3, [r1, #8]\nstrd r2, r3, [r1, #16]\n"));
BENCH(cb_ldm_stm_4, "", X2("ldm r1, {r2-r5}\nstm r1, {r2-r5}\n"));
BENCH(cb_push_pop_4, "", X2("push {r2-r5}\npop {r2-r5}\n"));
BENCH(cb_smlad, "movs r2, #3\nmovs r3, #5\n", X8("smlad r4, r2, r3, r4\n"));
BENCH(cb_multiply, "movs r2, #3\nmovs r3, #5\n",
      X2("mul r4, r2, r3\nmla r4, r2, r3, r4\nsmull r4, r5, r2, r3\nsmlal r4, r5, r2, r3\n"));
BENCH(cb_divide, "movs r2, #100\nmovs r3, #7\n", X4("sdiv r4, r2, r3\n"));
BENCH(cb_branch_not_taken, "", X4("cmp r1, r1\nbne 2f\n") "2:\n");
BENCH(cb_branch_taken, "", X4("b 3f\n3:\n"));
BENCH(cb_call_return, "", "bl 4f\nb 5f\n4:\nbx lr\n5:\n");
BENCH(cb_cbz, "", "cbz r1, 6f\nnop\n6:\ncbnz r1, 7f\nnop\n7:\n");
BENCH(cb_it, "cmp r1, r1\n", X4("it eq\naddeq r2, r2, #1\n"));
BENCH(cb_vadd_vmul, "", X4("vadd.f32 s0, s1, s2\nvmul.f32 s3, s1, s2\n"));
BENCH(cb_vmla, "", X4("vmla.f32 s0, s1, s2\n"));
BENCH(cb_vdiv_vsqrt, "vmov.f32 s1, #1.0\nvmov.f32 s2, #2.0\n",
      "vdiv.f32 s0, s1, s2\nvsqrt.f32 s3, s2\n");
BENCH(cb_vldr_vstr, "", X4("vldr s0, [r1, #4]\nvstr s0, [r1, #8]\n"));
BENCH(cb_vldm_vstm_4, "", "vldm r1, {s0-s3}\nvstm r1, {s0-s3}\n");
BENCH(cb_vmov_core, "", X4("vmov s0, r2\nvmov r3, s0\n"));

typedef void (*bench_fn)(uint32_t, uint32_t *);
static const struct {
    const char *name;
    bench_fn run;
} benches[] = {
    {"ldr_chain", cb_ldr_chain},
    {"ldr_independent", cb_ldr_independent},
    {"ldr_str_imm", cb_ldr_str_imm},
    {"ldr_str_reg", cb_ldr_str_reg},
    {"str_imm", cb_str_imm},
    {"str_reg", cb_str_reg},
    {"str_ldr", cb_str_ldr},
    {"alu_address", cb_alu_address},
    {"ldrb_ldrh", cb_ldrb_ldrh},
    {"ldrd_strd", cb_ldrd_strd},
    {"ldm_stm_4", cb_ldm_stm_4},
    {"push_pop_4", cb_push_pop_4},
    {"smlad", cb_smlad},
    {"multiply", cb_multiply},
    {"divide", cb_divide},
    {"branch_not_taken", cb_branch_not_taken},
    {"branch_taken", cb_branch_taken},
    {"call_return", cb_call_return},
    {"cbz_cbnz", cb_cbz},
    {"it", cb_it},
    {"vadd_vmul", cb_vadd_vmul},
    {"vmla", cb_vmla},
    {"vdiv_vsqrt", cb_vdiv_vsqrt},
    {"vldr_vstr", cb_vldr_vstr},
    {"vldm_vstm_4", cb_vldm_vstm_4},
    {"vmov_core", cb_vmov_core},
};
#define N_BENCHES (sizeof benches / sizeof benches[0])

static uint32_t buffer[16];

static void put(const char *s)
{
    (void)tp_board_write((const uint8_t *)s, strlen(s));
}

static void put_u32(uint32_t v)
{
    char text[11];
    int i = 10;
    text[i] = '\0';
    do {
        text[--i] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v != 0u);
    put(&text[i]);
}

/* One function around both runs, so the code around the loop is the same and cancels out. */
__attribute__((noinline)) static uint32_t timed(bench_fn run, uint32_t iterations)
{
    uint64_t t0 = tp_board_counter();
    run(iterations, buffer);
    return (uint32_t)(tp_board_counter() - t0);
}

int tp_cyclebench_main(void)
{
    static uint32_t costs[N_BENCHES][2];
    uint32_t i;
    (void)tp_board_init();
    buffer[0] = (uint32_t)(uintptr_t)buffer;
    for (i = 0; i < N_BENCHES; i++) {
        costs[i][0] = timed(benches[i].run, ITERATIONS);
        costs[i][1] = timed(benches[i].run, 2u * ITERATIONS);
    }
    for (i = 0; i < N_BENCHES; i++) {
        put(benches[i].name);
        put(" ");
        put_u32(ITERATIONS);
        put(" ");
        put_u32(costs[i][0]);
        put(" ");
        put_u32(costs[i][1]);
        put("\n");
    }
    put("end ");
    put_u32((uint32_t)N_BENCHES);
    put("\n");
    return 0;
}

#else /* not a Cortex-M4F: nothing to measure */

int tp_cyclebench_main(void)
{
    (void)tp_board_init();
    (void)tp_board_write((const uint8_t *)"end 0\n", 6u);
    return 1;
}

#endif
