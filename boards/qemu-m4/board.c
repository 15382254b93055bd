/*
 * board.c - the tp_board HAL for qemu-m4: CMSDK UART0 polled, the FPGAIO counter as an
 * instruction count. Bulk samples and the parameter store are semihosting files, and name,
 * SRAM and stack peak come from the linker symbols (boards/common/: semihost.c, baremetal.c).
 */
#include <stdint.h>

#include "mps2_an386.h"
#include "semihost.h"
#include "tp_board.h"

static struct {
    uint32_t last_ticks; /* FPGAIO counter at the last read, to extend it past 32 bits */
    uint64_t ticks;
} board = {0, 0};

/*
 * The UART is polled, but the board sleeps (WFI) while it waits: the UART interrupts are
 * enabled in the UART and the NVIC only to wake the core, and PRIMASK (set at reset) keeps
 * their handlers from ever running. Under -icount ...,sleep=off a sleeping core executes no
 * instructions (QEMU's idle host threads stay idle too), though guest time still jumps ahead
 * to pending timer deadlines.
 */
int tp_board_init(void)
{
    /* QEMU ignores the divisor but warns below 16; 25 MHz / 217 = 115200 baud on hardware. */
    UART0_BAUDDIV = SYSCLK_HZ / 115200u;
    UART0_CTRL = UART_CTRL_TXEN | UART_CTRL_RXEN | UART_CTRL_TXINTEN | UART_CTRL_RXINTEN;
    NVIC_ISER0 = (1u << UART0_TX_IRQ) | (1u << UART0_RX_IRQ);
    board.last_ticks = FPGAIO_COUNTER;
    board.ticks = 0;
    return TP_BOARD_OK;
}

/* Fold the 32-bit hardware counter into a 64-bit total. It wraps every 2^32 ticks (172e9
 * instructions), far longer than any step between two reads. QEMU 7.2 can step it back a few
 * hundred ticks around the guest's first sleep; a backward step is dropped, not taken for a
 * wrap, so the total stays monotonic. */
static void counter_update(void)
{
    uint32_t now = FPGAIO_COUNTER;
    uint32_t delta = now - board.last_ticks;
    if (delta < 0x80000000u) {
        board.ticks += delta;
    }
    board.last_ticks = now;
}

/* Sleep until UART state `bit` is set (want_set 1) or clear (want_set 0). The interrupt
 * is cleared before each check, so one arriving between the check and the WFI still wakes it. */
static void uart_wait(uint32_t bit, uint32_t want_set, uint32_t interrupt, uint32_t irq)
{
    for (;;) {
        UART0_INTSTATUS = interrupt;
        NVIC_ICPR0 = 1u << irq;
        if (((UART0_STATE & bit) != 0) == (want_set != 0)) {
            return;
        }
        __asm__ volatile("wfi" ::: "memory");
        counter_update(); /* guest time runs on while asleep: keep up with wraps */
    }
}

uint64_t tp_board_counter(void)
{
    counter_update();
    return board.ticks * INSTRUCTIONS_PER_TICK;
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
    uart_wait(UART_STATE_RXFULL, 1, UART_INT_RX, UART0_RX_IRQ);
    size_t n = 0;
    do {
        dst[n++] = (uint8_t)UART0_DATA;
    } while (n < max && (UART0_STATE & UART_STATE_RXFULL));
    return (int)n;
}

int tp_board_poll(uint8_t *dst, size_t max)
{
    if (dst == NULL || max == 0) {
        return TP_BOARD_ERR_ARG;
    }
    size_t n = 0;
    while (n < max && n < INT32_MAX && (UART0_STATE & UART_STATE_RXFULL)) {
        dst[n++] = (uint8_t)UART0_DATA;
    }
    return (int)n;
}

int tp_board_write(const uint8_t *src, size_t n)
{
    if (src == NULL && n > 0) {
        return TP_BOARD_ERR_ARG;
    }
    for (size_t i = 0; i < n; ++i) {
        uart_wait(UART_STATE_TXFULL, 0, UART_INT_TX, UART0_TX_IRQ);
        UART0_DATA = src[i];
    }
    return TP_BOARD_OK;
}

void tp_board_exit(int status)
{
    /* Let the last byte leave the UART before QEMU goes away. */
    uart_wait(UART_STATE_TXFULL, 0, UART_INT_TX, UART0_TX_IRQ);
    tp_sh_exit(status);
}
