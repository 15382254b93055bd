/*
 * startup.c - rv32-virt reset and trap handling: gp and sp, the trap vector, then tp_start
 * (boards/common/baremetal.c: .data/.bss, stack painting, the application entry), which calls
 * back here for the PMP guards. Any trap (the board enables no interrupt handler, so every one
 * is a fault: bad access, PMP violation, illegal instruction) ends QEMU with
 * TP_BOARD_FAULT_STATUS (134) and a line on the semihosting console.
 */
#include <stdint.h>

#include "baremetal.h"
#include "rv32_virt.h"
#include "semihost.h"
#include "tp_board.h"

/* Linker script symbols of this board only (the common ones are in baremetal.h). */
extern uint32_t __flash_start[], __flash_size[], __ram_size[];

void tp_reset_handler(void);
void tp_trap_entry(void);

/* Naked and first in flash (QEMU starts the hart at 0x80000000): no C runs before sp and gp
 * are set. gp must be loaded without relaxation, which would make it relative to itself. */
__attribute__((naked, noreturn, section(".text.entry"))) void tp_reset_handler(void)
{
    __asm__ volatile(".option push\n"
                     ".option norelax\n"
                     "la gp, __global_pointer$\n"
                     ".option pop\n"
                     "la sp, __stack_top\n"
                     "la t0, tp_trap_entry\n"
                     "csrw mtvec, t0\n"
                     "j tp_start\n");
}

/* Naked: the trap may come from a stack overflow, so move sp back to the top of the stack
 * (which this dying program no longer needs) before running C. Direct-mode mtvec needs a
 * 4-byte aligned address. */
__attribute__((naked, noreturn, aligned(4))) void tp_trap_entry(void)
{
    __asm__ volatile("la sp, __stack_top\n"
                     "csrr a0, mcause\n"
                     "csrr a1, mepc\n"
                     "csrr a2, mtval\n"
                     "j tp_fault_report\n");
}

__attribute__((noreturn, used)) void tp_fault_report(uint32_t mcause, uint32_t mepc, uint32_t mtval)
{
    /* "TP FAULT mcause=XXXXXXXX mepc=XXXXXXXX mtval=XXXXXXXX\n" */
    static char line[] = "TP FAULT mcause=00000000 mepc=00000000 mtval=00000000\n";
    tp_put_hex(line + 16, mcause);
    tp_put_hex(line + 30, mepc);
    tp_put_hex(line + 45, mtval);
    tp_sh_write0(line);
    tp_sh_exit(TP_BOARD_FAULT_STATUS);
}

/* pmpaddr value of a naturally aligned power-of-two region (size >= 8). */
static uint32_t napot(const void *base, uint32_t size)
{
    return ((uint32_t)base >> 2) | ((size >> 3) - 1u);
}

/* Locked entries, so they bind machine mode too; the lowest-numbered match wins.
 *   0  stack guard, 32 B under the stack: no access (a stack overflow faults, .bss survives)
 *   1  flash: read + execute (a stray write faults)
 *   2  the 256 KB of RAM: read + write, no execute
 *   3/4  from the end of RAM to the end of DRAM: no access (nothing past 256 KB is usable)
 * Anything else (devices) keeps machine mode's default full access. */
void tp_baremetal_protect(void)
{
    CSR_WRITE(pmpaddr0, napot(__stack_guard, 32u));
    CSR_WRITE(pmpaddr1, napot(__flash_start, (uint32_t)__flash_size));
    CSR_WRITE(pmpaddr2, napot(__ram_start, (uint32_t)__ram_size));
    CSR_WRITE(pmpaddr3, (uint32_t)__ram_end >> 2);
    CSR_WRITE(pmpaddr4, VIRT_DRAM_END >> 2);
    CSR_WRITE(pmpcfg1, PMP_LOCK | PMP_TOR);
    CSR_WRITE(pmpcfg0, (uint32_t)(PMP_LOCK | PMP_NAPOT) |
                           (uint32_t)(PMP_LOCK | PMP_NAPOT | PMP_R | PMP_X) << 8 |
                           (uint32_t)(PMP_LOCK | PMP_NAPOT | PMP_R | PMP_W) << 16);
    __asm__ volatile("fence" ::: "memory");
}
