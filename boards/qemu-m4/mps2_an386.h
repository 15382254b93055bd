/*
 * mps2_an386.h - the few registers of the MPS2 AN386 FPGA image (Cortex-M4F) and the Cortex-M4
 * system control space that the qemu-m4 board uses. Written from the AN386 and ARMv7-M
 * architecture manuals instead of pulling CMSIS headers.
 */
#ifndef TP_MPS2_AN386_H
#define TP_MPS2_AN386_H

#include <stdint.h>

#define TP_REG(addr) (*(volatile uint32_t *)(addr))

/* CMSDK APB UART0 (polled; QEMU connects it to the first -serial). */
#define UART0_BASE 0x40004000u
#define UART0_DATA TP_REG(UART0_BASE + 0x00u)
#define UART0_STATE TP_REG(UART0_BASE + 0x04u)
#define UART0_CTRL TP_REG(UART0_BASE + 0x08u)
#define UART0_INTSTATUS TP_REG(UART0_BASE + 0x0Cu) /* write 1 to clear */
#define UART0_BAUDDIV TP_REG(UART0_BASE + 0x10u)
#define UART_STATE_TXFULL (1u << 0)
#define UART_STATE_RXFULL (1u << 1)
#define UART_CTRL_TXEN (1u << 0)
#define UART_CTRL_RXEN (1u << 1)
#define UART_CTRL_TXINTEN (1u << 2)
#define UART_CTRL_RXINTEN (1u << 3)
#define UART_INT_TX (1u << 0)
#define UART_INT_RX (1u << 1)
#define UART0_TX_IRQ 1u
#define UART0_RX_IRQ 0u
#define SYSCLK_HZ 25000000u

/* FPGA IO: a free-running 32-bit counter at SYSCLK (25 MHz). Under QEMU with
 * -icount shift=0 one guest instruction takes 1 ns, so it ticks once per 40 instructions. */
#define FPGAIO_COUNTER TP_REG(0x40028018u)
#define INSTRUCTIONS_PER_TICK 40u

/* NVIC: interrupt set-enable and clear-pending, IRQs 0..31. */
#define NVIC_ISER0 TP_REG(0xE000E100u)
#define NVIC_ICPR0 TP_REG(0xE000E280u)

/* System control block. */
#define SCB_CPACR TP_REG(0xE000ED88u) /* coprocessor access: CP10/CP11 = FPU */
#define SCB_SHCSR TP_REG(0xE000ED24u) /* enables for MemManage/BusFault/UsageFault */
#define SCB_CFSR TP_REG(0xE000ED28u)  /* configurable fault status */
#define SCB_HFSR TP_REG(0xE000ED2Cu)  /* hard fault status */
#define SCB_MMFAR TP_REG(0xE000ED34u) /* MemManage fault address */
#define SCB_BFAR TP_REG(0xE000ED38u)  /* bus fault address */
#define SHCSR_MEMFAULTENA (1u << 16)
#define SHCSR_BUSFAULTENA (1u << 17)
#define SHCSR_USGFAULTENA (1u << 18)

/* ARMv7-M MPU (PMSAv7): 8 regions, higher number wins where regions overlap. */
#define MPU_CTRL TP_REG(0xE000ED94u)
#define MPU_RNR TP_REG(0xE000ED98u)
#define MPU_RBAR TP_REG(0xE000ED9Cu)
#define MPU_RASR TP_REG(0xE000EDA0u)
#define MPU_CTRL_ENABLE (1u << 0)
#define MPU_CTRL_PRIVDEFENA (1u << 2) /* default memory map for privileged code elsewhere */
#define MPU_RASR_ENABLE (1u << 0)
#define MPU_RASR_SIZE(log2_bytes) (((uint32_t)(log2_bytes)-1u) << 1)
#define MPU_RASR_AP_NONE (0u << 24)
#define MPU_RASR_AP_RW (3u << 24)
#define MPU_RASR_AP_RO (6u << 24)
#define MPU_RASR_XN (1u << 28)
#define MPU_RASR_NORMAL_WB ((1u << 17) | (1u << 16)) /* C=1 B=1: normal memory, write-back */

#endif /* TP_MPS2_AN386_H */
