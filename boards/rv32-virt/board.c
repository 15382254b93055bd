/*
 * board.c - the tp_board HAL for rv32-virt: NS16550 UART0 polled (sleeping in WFI while it
 * waits), the instret CSR as an instruction count. Bulk samples and the parameter store are
 * semihosting files (boards/common/semihost.c, shared with qemu-m4); name, SRAM and stack
 * peak come from boards/common/baremetal.c.
 */
#include <stdint.h>

#include "rv32_virt.h"
#include "semihost.h"
#include "tp_board.h"

/*
 * The UART's receive interrupt is routed through the PLIC and enabled in mie only to wake the
 * core from WFI; mstatus.MIE stays clear, so no handler ever runs. Under -icount ...,sleep=off
 * a sleeping hart executes no instructions and costs no host CPU.
 */
int tp_board_init(void)
{
    /* FIFOs stay off: turning them on flushes the receiver, losing what the host sent
     * before this ran (QEMU starts the guest as the host connects and sends). */
    UART0_LCR = UART_LCR_8N1;
    UART0_MCR = UART_MCR_OUT2;
    UART0_IER = UART_IER_RX_AVAILABLE;
    PLIC_PRIORITY(UART0_IRQ) = 1u;
    PLIC_ENABLE0 = 1u << UART0_IRQ;
    PLIC_THRESHOLD0 = 0u;
    CSR_WRITE(mie, MIE_MEIE);
    return TP_BOARD_OK;
}

/* Sleep until a byte is waiting. The PLIC holds the interrupt pending until it is claimed and
 * completed: done after every wake, so the next WFI sleeps again once the data is taken. A byte
 * arriving between the check and the WFI leaves the interrupt pending, which ends the WFI. */
static void uart_wait_rx(void)
{
    while (!(UART0_LSR & UART_LSR_DATA_READY)) {
        __asm__ volatile("wfi" ::: "memory");
        uint32_t source = PLIC_CLAIM0;
        if (source != 0u) {
            PLIC_CLAIM0 = source;
        }
    }
}

/* instret with -icount shift=0: guest instructions (QEMU's virtual ns), exact. */
uint64_t tp_board_counter(void)
{
    uint32_t hi, lo;
    do {
        hi = CSR_READ(instreth);
        lo = CSR_READ(instret);
    } while (hi != CSR_READ(instreth));
    return (uint64_t)hi << 32 | lo;
}

const char *tp_board_counter_unit(void)
{
    return "instructions";
}

int tp_board_read(uint8_t *dst, size_t max)
{
    if (dst == NULL || max == 0) {
        return TP_BOARD_ERR_ARG;
    }
    if (max > INT32_MAX) {
        max = INT32_MAX;
    }
    uart_wait_rx();
    size_t n = 0;
    do {
        dst[n++] = UART0_RBR;
    } while (n < max && (UART0_LSR & UART_LSR_DATA_READY));
    return (int)n;
}

int tp_board_poll(uint8_t *dst, size_t max)
{
    if (dst == NULL || max == 0) {
        return TP_BOARD_ERR_ARG;
    }
    size_t n = 0;
    while (n < max && n < INT32_MAX && (UART0_LSR & UART_LSR_DATA_READY)) {
        dst[n++] = UART0_RBR;
    }
    return (int)n;
}

/* Transmit needs no sleep: QEMU's UART hands each byte to the socket at once. */
int tp_board_write(const uint8_t *src, size_t n)
{
    if (src == NULL && n > 0) {
        return TP_BOARD_ERR_ARG;
    }
    for (size_t i = 0; i < n; ++i) {
        while (!(UART0_LSR & UART_LSR_THR_EMPTY)) {
        }
        UART0_THR = src[i];
    }
    return TP_BOARD_OK;
}

void tp_board_exit(int status)
{
    /* Let the last byte leave the UART before QEMU goes away. */
    while (!(UART0_LSR & UART_LSR_TX_IDLE)) {
    }
    tp_sh_exit(status);
}
