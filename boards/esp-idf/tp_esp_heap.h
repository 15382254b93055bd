/*
 * tp_esp_heap.h - the heap READY reports on the ESP32 boards (boards/esp32 on Arduino-ESP32,
 * boards/esp-idf): measured before the arena and params record are taken from it, so the host
 * sees the room a blob's buffers have. C and C++.
 */
#ifndef TP_ESP_HEAP_H
#define TP_ESP_HEAP_H

#include <esp_heap_caps.h>

#include "tp_board.h"
#include "tp_proto.h" /* TP_RAM_UNKNOWN */

static inline tp_board_ram tp_esp_heap_measure(void)
{
    tp_board_ram ram;
    size_t largest = heap_caps_get_largest_free_block(MALLOC_CAP_8BIT);
    ram.free_bytes = (uint32_t)heap_caps_get_free_size(MALLOC_CAP_8BIT);
    ram.largest_block = (uint32_t)largest;
    /* the second block: the largest left while the largest is held */
    void *held = largest > 0 ? heap_caps_malloc(largest, MALLOC_CAP_8BIT) : NULL;
    ram.second_block = held != NULL ? (uint32_t)heap_caps_get_largest_free_block(MALLOC_CAP_8BIT)
                                    : TP_RAM_UNKNOWN;
    heap_caps_free(held);
    return ram;
}

#endif /* TP_ESP_HEAP_H */
