/*
 * baremetal.h - what the bare-metal emulated boards (qemu-m4, rv32-virt) share: the linker
 * script's symbols, the C start-up after the CPU-specific reset code (RAM set-up, stack painting,
 * the application entry), and the fault line's hex digits. baremetal.c also implements the
 * tp_board functions that depend only on the linker symbols (name, SRAM size, free RAM, stack
 * peak).
 * Each board keeps its vectors or trap entry, memory protection, UART, counter and exit.
 */
#ifndef TP_BAREMETAL_H
#define TP_BAREMETAL_H

#include <stdint.h>

/* Word the start-up code paints the stack with; tp_board_stack_peak() scans for it. */
#define TP_STACK_PAINT 0xA5C3A5C3u

/* Linker script symbols (addresses only); every bare-metal link.ld defines them. */
extern uint32_t __data_start[], __data_end[], __data_load[];
extern uint32_t __bss_start[], __bss_end[];
extern uint32_t __ram_start[], __ram_end[];
extern uint32_t __stack_guard[], __stack_limit[], __stack_top[];
extern uint32_t __free_start[], __free_end[];

/* The board's reset code jumps here once sp (and, on RISC-V, gp) is valid and C may run:
 * copies .data, zeroes .bss, paints the stack, calls tp_baremetal_protect(), runs the
 * application (APP_ENTRY) and passes its status to tp_board_exit(). */
void tp_start(void) __attribute__((noreturn));

/* Implemented by each board: turn on its memory protection (MPU, PMP) over the RAM just set
 * up, before the application runs. */
void tp_baremetal_protect(void);

/* Write v as 8 lower-case hex digits at dst (no NUL): the fields of a fault report line. */
void tp_put_hex(char *dst, uint32_t v);

#endif /* TP_BAREMETAL_H */
