/*
 * startup.c - qemu-m4 reset and fault handling: vector table, FPU on before any float
 * instruction, then tp_start (boards/common/baremetal.c: .data/.bss, stack painting, the
 * application entry), which calls back here for the MPU guards.
 * Any fault ends QEMU with TP_BOARD_FAULT_STATUS (134) and a line on the semihosting console,
 * so a wild pointer or a stack overflow is a failed run, never a hang.
 */
#include <stdint.h>

#include "baremetal.h"
#include "mps2_an386.h"
#include "semihost.h"
#include "tp_board.h"

void tp_reset_handler(void);
void tp_fault_handler(void);

#define AN386_IRQS 32u
#define VECTORS (16u + AN386_IRQS)

/* Entry 0 is the initial stack pointer; every exception other than reset is unexpected here
 * (the board polls, it enables no interrupt), so all of them are reported as faults. */
__attribute__((section(".vectors"), used)) static void (*const vector_table[VECTORS])(void) = {
    [0] = (void (*)(void))__stack_top,
    [1] = tp_reset_handler,
    [2 ... VECTORS - 1] = tp_fault_handler,
};

/* Naked: the FPU must be on before compiled C code runs, since the hard-float ABI lets the
 * compiler use FP registers anywhere. */
__attribute__((naked, noreturn)) void tp_reset_handler(void)
{
    __asm__ volatile("cpsid i\n"             /* PRIMASK: no interrupt handler ever runs */
                     "ldr r0, =0xE000ED88\n" /* CPACR */
                     "ldr r1, [r0]\n"
                     "orr r1, r1, #(0xF << 20)\n" /* CP10, CP11: full access */
                     "str r1, [r0]\n"
                     "dsb\n"
                     "isb\n"
                     "b tp_start\n");
}

/* Naked: the fault may come from a stack overflow, so move SP back to the top of the stack
 * (which this dying program no longer needs) before running C. */
__attribute__((naked, noreturn)) void tp_fault_handler(void)
{
    __asm__ volatile("mrs r0, ipsr\n"
                     "ldr r1, =__stack_top\n"
                     "mov sp, r1\n"
                     "b tp_fault_report\n");
}

__attribute__((noreturn, used)) void tp_fault_report(uint32_t exception)
{
    /* "TP FAULT exc=XXXXXXXX cfsr=XXXXXXXX hfsr=XXXXXXXX mmfar=XXXXXXXX bfar=XXXXXXXX\n" */
    static char line[] = "TP FAULT exc=00000000 cfsr=00000000 hfsr=00000000 mmfar=00000000 "
                         "bfar=00000000\n";
    tp_put_hex(line + 13, exception);
    tp_put_hex(line + 27, SCB_CFSR);
    tp_put_hex(line + 41, SCB_HFSR);
    tp_put_hex(line + 56, SCB_MMFAR);
    tp_put_hex(line + 70, SCB_BFAR);
    tp_sh_write0(line);
    tp_sh_exit(TP_BOARD_FAULT_STATUS);
}

static void mpu_region(uint32_t number, uint32_t base, uint32_t log2_size, uint32_t attributes)
{
    MPU_RNR = number;
    MPU_RBAR = base;
    MPU_RASR = attributes | MPU_RASR_SIZE(log2_size) | MPU_RASR_ENABLE;
}

/* Region 0: flash read-only. Region 1: all of SSRAM2/3 and its mirror no-access. Region 2:
 * the 256 KB the linker script allows, read-write, not executable. Region 3: 32 bytes under
 * the stack no-access, so a stack overflow faults instead of corrupting .bss. Privileged code
 * keeps the default map elsewhere (peripherals, system space). MemManage faults stay disabled:
 * they escalate to HardFault, whose stacking runs with the MPU off (HFNMIENA = 0), so even an
 * overflow into the guard can be reported. */
void tp_baremetal_protect(void)
{
    mpu_region(0, 0x00000000u, 20, MPU_RASR_AP_RO | MPU_RASR_NORMAL_WB);
    mpu_region(1, 0x20000000u, 25, MPU_RASR_AP_NONE | MPU_RASR_XN);
    mpu_region(2, 0x20000000u, 18, MPU_RASR_AP_RW | MPU_RASR_XN | MPU_RASR_NORMAL_WB);
    mpu_region(3, (uint32_t)__stack_guard, 5, MPU_RASR_AP_NONE | MPU_RASR_XN);
    MPU_CTRL = MPU_CTRL_ENABLE | MPU_CTRL_PRIVDEFENA;
    __asm__ volatile("dsb\nisb" ::: "memory");
}
