/*
 * board.cpp - Arduino Nano 33 BLE (nRF52840, Cortex-M4F, 256 KB SRAM, 1 MB flash) over the
 * Arduino mbed core: the parameter store in the last 160 KB of internal flash through
 * mbed::FlashIAP, in two slots written in turn, so a reset during a save keeps the previous
 * record. The serial link and counter are boards/arduino/tp_arduino.cpp.
 *
 * The firmware (code + the compiled-in blob) must end below the store: tinyprop flash checks
 * nothing here, the VWW firmware is about 600 KB of the 864 KB left.
 */
#include <Arduino.h>
#include <malloc.h>
#include <mbed.h>

#include "../arduino/tp_arduino.h"

/* A slot: header, then the record. 80 KB holds the largest record tp_device keeps (72 KB
 * of parameters + its header). */
#define SLOT_BYTES (80u * 1024u)
#define SLOT_MAGIC 0x54535054u /* "TPST" */

struct slot_header {
    uint32_t magic;
    uint32_t sequence; /* the newer intact slot wins */
    uint32_t length;
    uint32_t crc; /* CRC32 of the record: a torn write is seen as such */
};

static mbed::FlashIAP flash;
static uint32_t store_base; /* the first slot; the second follows it */

static uint32_t slot_address(int slot)
{
    return store_base + (uint32_t)slot * SLOT_BYTES;
}

/* The header of `slot` if it holds an intact record, else 0. */
static int read_slot(int slot, slot_header *h)
{
    if (flash.read(h, slot_address(slot), sizeof *h) != 0 || h->magic != SLOT_MAGIC ||
        h->length > SLOT_BYTES - sizeof *h) {
        return 0;
    }
    uint8_t chunk[256];
    uint32_t crc = 0;
    for (uint32_t done = 0; done < h->length; done += sizeof chunk) {
        uint32_t n = h->length - done < sizeof chunk ? h->length - done : sizeof chunk;
        if (flash.read(chunk, slot_address(slot) + sizeof *h + done, n) != 0) {
            return 0;
        }
        crc = tp_crc32(crc, chunk, n);
    }
    return crc == h->crc;
}

/* The slot with the newest intact record, or -1. */
static int newest_slot(slot_header *h)
{
    slot_header a, b;
    int ok_a = read_slot(0, &a), ok_b = read_slot(1, &b);
    if (!ok_a && !ok_b) {
        return -1;
    }
    int slot = ok_a && (!ok_b || (int32_t)(a.sequence - b.sequence) > 0) ? 0 : 1;
    *h = slot == 0 ? a : b;
    return slot;
}

static int store_init(void)
{
    if (flash.init() != 0) {
        return TP_BOARD_ERR_IO;
    }
    store_base = flash.get_flash_start() + flash.get_flash_size() - 2u * SLOT_BYTES;
    return TP_BOARD_OK;
}

extern "C" int tp_board_store_save(const uint8_t *src, uint32_t n)
{
    slot_header h;
    if (src == NULL && n > 0) {
        return TP_BOARD_ERR_ARG;
    }
    if (n > SLOT_BYTES - sizeof h) {
        return TP_BOARD_ERR_TOO_BIG;
    }
    if (store_base == 0 && store_init() != TP_BOARD_OK) {
        return TP_BOARD_ERR_IO;
    }
    slot_header newest;
    int current = newest_slot(&newest);
    int slot = current == 0 ? 1 : 0;
    uint32_t address = slot_address(slot);
    uint32_t page = flash.get_page_size(); /* the program unit: 4 bytes on the nRF52840 */
    uint8_t tail[16];
    if (page > sizeof tail) {
        return TP_BOARD_ERR_IO;
    }
    /* Record first, header last: the header's CRC only matches once all of it is written. */
    uint32_t whole = n / page * page;
    if (flash.erase(address, SLOT_BYTES) != 0 ||
        (whole > 0 && flash.program(src, address + sizeof h, whole) != 0)) {
        return TP_BOARD_ERR_IO;
    }
    if (whole < n) {
        memset(tail, 0xFF, sizeof tail);
        memcpy(tail, src + whole, n - whole);
        if (flash.program(tail, address + sizeof h + whole, page) != 0) {
            return TP_BOARD_ERR_IO;
        }
    }
    h.magic = SLOT_MAGIC;
    h.sequence = current < 0 ? 1u : newest.sequence + 1u;
    h.length = n;
    h.crc = tp_crc32(0, src, n);
    return flash.program(&h, address, sizeof h) == 0 ? TP_BOARD_OK : TP_BOARD_ERR_IO;
}

extern "C" int tp_board_store_load(uint8_t *dst, uint32_t max, uint32_t *n)
{
    slot_header h;
    if (n == NULL || (dst == NULL && max > 0)) {
        return TP_BOARD_ERR_ARG;
    }
    if (store_base == 0 && store_init() != TP_BOARD_OK) {
        return TP_BOARD_ERR_IO;
    }
    int slot = newest_slot(&h);
    if (slot < 0) {
        return TP_BOARD_ERR_NOT_FOUND;
    }
    *n = h.length;
    if (h.length > max) {
        return TP_BOARD_ERR_TOO_BIG;
    }
    return flash.read(dst, slot_address(slot) + sizeof h, h.length) == 0 ? TP_BOARD_OK
                                                                         : TP_BOARD_ERR_IO;
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
