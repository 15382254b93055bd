/*
 * board.cpp - Arduino Nano 33 BLE (nRF52840, Cortex-M4F, 256 KB SRAM, 1 MB flash) over the
 * Arduino mbed core: the parameter store (tp_store.h: a ring of records, a power cut at any
 * instant of a save keeps the record saved before) in the last 192 KB of internal flash through
 * mbed::FlashIAP. The serial link and counter are boards/arduino/tp_arduino.cpp.
 *
 * The firmware (code + the compiled-in blob) must end below the store: tinyprop flash checks
 * nothing here, the VWW firmware is about 600 KB of the 768 KB between the bootloader's 64 KB and
 * the store.
 */
#include <Arduino.h>
#include <malloc.h>
#include <mbed.h>

#include "../arduino/tp_arduino.h"
#include "tp_store.h"

/* The store's region: 48 pages of 4 KB, a ring of records (tp_store.h) of up to 96 KB (two side
 * by side; tp_device keeps 72 KB of parameters and a header at most). 48 pages, not the 40 that
 * hold two such records: a save erases its pages in turn, and the more pages, the longer they
 * last (docs/boards.md "Wear"). */
#define STORE_BYTES (192u * 1024u)

static mbed::FlashIAP flash;
static uint32_t store_base; /* the region's first address; 0 until the flash is up */

static int store_erase(void *, uint32_t page)
{
    uint32_t bytes = flash.get_sector_size(store_base); /* the region's pages are all 4 KB */
    return flash.erase(store_base + page * bytes, bytes);
}

static int store_program(void *, uint32_t offset, const uint8_t *src, uint32_t n)
{
    return flash.program(src, store_base + offset, n);
}

static int store_read(void *, uint32_t offset, uint8_t *dst, uint32_t n)
{
    return flash.read(dst, store_base + offset, n);
}

/* The geometry is FlashIAP's, asked once the flash is up. */
static tp_flash store = {NULL, 0u, 0u, 0u, store_erase, store_program, store_read};

/* The store's flash, or NULL when FlashIAP does not start. */
static const tp_flash *store_flash(void)
{
    if (store_base == 0) {
        if (flash.init() != 0) {
            return NULL;
        }
        store_base = flash.get_flash_start() + flash.get_flash_size() - STORE_BYTES;
        store.page_bytes = flash.get_sector_size(store_base); /* the erase unit: 4 KB */
        store.word_bytes = flash.get_page_size();             /* the program unit: 4 bytes */
        store.pages = STORE_BYTES / store.page_bytes;
    }
    return &store;
}

extern "C" int tp_board_store_save(const uint8_t *src, uint32_t n)
{
    const tp_flash *f = store_flash();
    return f != NULL ? -(int)tp_store_save(f, src, n) : TP_BOARD_ERR_IO;
}

extern "C" int tp_board_store_load(uint8_t *dst, uint32_t max, uint32_t *n)
{
    const tp_flash *f = store_flash();
    return f != NULL ? -(int)tp_store_load(f, dst, max, n) : TP_BOARD_ERR_IO;
}

extern "C" const char *tp_board_name(void)
{
    return "nano33ble";
}

extern "C" uint32_t tp_board_sram_bytes(void)
{
    return 256u * 1024u;
}

/* USB CDC: the host's baud rate setting is ignored. */
const unsigned long tp_arduino_baud = 115200;

/* The heap mbed's _sbrk hands out, between these (variants/ARDUINO_NANO33BLE/linker_script.ld). */
extern "C" uint32_t __mbed_sbrk_start, __mbed_krbs_start;

/* Static board: unused RAM is the heap no one took, whether newlib has claimed it from sbrk
 * (its free chunks) or not. */
extern "C" void tp_board_free_ram(tp_board_ram *ram)
{
    struct mallinfo heap = mallinfo();
    uint32_t size = (uint32_t)((uintptr_t)&__mbed_krbs_start - (uintptr_t)&__mbed_sbrk_start);
    uint32_t claimed = (uint32_t)heap.arena;
    ram->free_bytes = (size > claimed ? size - claimed : 0u) + (uint32_t)heap.fordblks;
    ram->largest_block = ram->free_bytes;
    ram->second_block = ram->free_bytes;
}

/* mbed does not expose the main thread's painted stack to sketches: not measured here. */
extern "C" uint32_t tp_board_stack_peak(void)
{
    return 0;
}

void setup()
{
    tp_arduino_run();
}

void loop()
{
}
