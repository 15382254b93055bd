/* main.c - the tinyprop device loop as an ESP-IDF application: the arena and params record
 * from the heap (the ESP32's static RAM cannot hold them), then the loop, which serves the host
 * until reset. */
#include <stdint.h>

#include <esp_heap_caps.h>

#include "tp_board.h"
#include "tp_device.h"
#include "tp_esp_idf.h"

uint8_t *tp_device_arena;
uint8_t *tp_device_record;

void app_main(void)
{
    tp_esp_idf_measure_heap();
    /* a buffer the heap had no block for stays NULL: the device loop answers the requests
     * that need it with an error saying so */
    tp_device_arena = heap_caps_aligned_alloc(8, tp_device_arena_bytes, MALLOC_CAP_8BIT);
    tp_device_record = heap_caps_aligned_alloc(8, tp_device_record_bytes, MALLOC_CAP_8BIT);
    tp_board_exit(tp_device_main());
}
