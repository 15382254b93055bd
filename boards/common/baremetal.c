/* baremetal.c - see baremetal.h. */
#include "baremetal.h"

#include <string.h>

#include "tp_board.h"

/* Chosen by the Makefile (APP_ENTRY); tp_device_main for the device firmware. */
#ifndef APP_ENTRY
#error "APP_ENTRY must name the application's int entry(void)"
#endif
int APP_ENTRY(void);

/* The board's folder name, set by boards/common/baremetal.mk. */
#ifndef TP_BOARD_NAME
#error "TP_BOARD_NAME must be the board's name string"
#endif

/* Fill the stack from its limit up to 64 bytes below this frame with TP_STACK_PAINT. Not
 * inlined, so its frame is the deepest one live during the fill; its frame address is a
 * portable stand-in for sp (within one small frame of it on ARM and RISC-V). */
static __attribute__((noinline)) void paint_stack(void)
{
    uint32_t *word = __stack_limit;
    uint32_t *end = (uint32_t *)((uintptr_t)__builtin_frame_address(0) - 64u);
    while (word < end) {
        *word++ = TP_STACK_PAINT;
    }
}

__attribute__((noreturn, used)) void tp_start(void)
{
    memcpy(__data_start, __data_load, (size_t)((char *)__data_end - (char *)__data_start));
    memset(__bss_start, 0, (size_t)((char *)__bss_end - (char *)__bss_start));
    paint_stack();
    tp_baremetal_protect();
    tp_board_exit(APP_ENTRY());
    for (;;) {
    }
}

void tp_put_hex(char *dst, uint32_t v)
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 7; i >= 0; --i) {
        dst[i] = digits[v & 0xFu];
        v >>= 4;
    }
}

const char *tp_board_name(void)
{
    return TP_BOARD_NAME;
}

uint32_t tp_board_sram_bytes(void)
{
    return (uint32_t)((char *)__ram_end - (char *)__ram_start);
}

/* No heap: what no section uses lies between .bss and the stack guard, in one piece. */
void tp_board_free_ram(tp_board_ram *ram)
{
    ram->free_bytes = (uint32_t)((char *)__free_end - (char *)__free_start);
    ram->largest_block = ram->free_bytes;
    ram->second_block = ram->free_bytes;
}

uint32_t tp_board_stack_peak(void)
{
    const uint32_t *word = __stack_limit;
    while (word < __stack_top && *word == TP_STACK_PAINT) {
        ++word;
    }
    return (uint32_t)((const char *)__stack_top - (const char *)word);
}

/* Nothing else runs on these boards, and nothing shows a prediction. */
void tp_board_yield(void)
{
}

void tp_board_show(int32_t prediction)
{
    (void)prediction;
}
