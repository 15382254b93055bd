/*
 * rv32_virt.h - the few devices of QEMU's RISC-V `virt` machine that the rv32-virt board uses
 * (addresses from QEMU's hw/riscv/virt.c memory map), and the machine-mode CSR helpers.
 */
#ifndef TP_RV32_VIRT_H
#define TP_RV32_VIRT_H

#include <stdint.h>

#define TP_REG8(addr) (*(volatile uint8_t *)(addr))
#define TP_REG32(addr) (*(volatile uint32_t *)(addr))

/* NS16550A UART0, byte registers (QEMU connects it to the first -serial). */
#define UART0_BASE 0x10000000u
#define UART0_RBR TP_REG8(UART0_BASE + 0u) /* read: received byte */
#define UART0_THR TP_REG8(UART0_BASE + 0u) /* write: byte to send */
#define UART0_IER TP_REG8(UART0_BASE + 1u)
#define UART0_LCR TP_REG8(UART0_BASE + 3u)
#define UART0_MCR TP_REG8(UART0_BASE + 4u)
#define UART0_LSR TP_REG8(UART0_BASE + 5u)
#define UART0_IRQ 10u
#define UART_IER_RX_AVAILABLE 0x01u
#define UART_LCR_8N1 0x03u
#define UART_MCR_OUT2 0x08u /* routes the interrupt on a real 16550 */
#define UART_LSR_DATA_READY 0x01u
#define UART_LSR_THR_EMPTY 0x20u
#define UART_LSR_TX_IDLE 0x40u

/* PLIC, context 0 = hart 0 machine mode. */
#define PLIC_BASE 0x0C000000u
#define PLIC_PRIORITY(src) TP_REG32(PLIC_BASE + 4u * (src))
#define PLIC_ENABLE0 TP_REG32(PLIC_BASE + 0x2000u)
#define PLIC_THRESHOLD0 TP_REG32(PLIC_BASE + 0x200000u)
#define PLIC_CLAIM0 TP_REG32(PLIC_BASE + 0x200004u)

/* mie.MEIE: machine external interrupts may wake WFI (mstatus.MIE stays 0: no handler runs). */
#define MIE_MEIE (1u << 11)

/* End of the machine's DRAM with QEMU's default -m 128M. */
#define VIRT_DRAM_END 0x88000000u

/* PMP configuration bits. */
#define PMP_R 0x01u
#define PMP_W 0x02u
#define PMP_X 0x04u
#define PMP_TOR 0x08u
#define PMP_NAPOT 0x18u
#define PMP_LOCK 0x80u /* applies the entry to machine mode too */

#define CSR_READ(name)                                  \
    __extension__({                                     \
        uint32_t v_;                                    \
        __asm__ volatile("csrr %0, " #name : "=r"(v_)); \
        v_;                                             \
    })
#define CSR_WRITE(name, value) __asm__ volatile("csrw " #name ", %0" ::"r"((uint32_t)(value)))

#endif /* TP_RV32_VIRT_H */
