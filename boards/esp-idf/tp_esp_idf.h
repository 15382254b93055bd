/*
 * tp_esp_idf.h - the ESP-IDF board (board.c): the tp_board.h HAL on an ESP32 under ESP-IDF,
 * for the ESP-IDF component `tinyprop package esp-idf` assembles. Plain C99 against ESP-IDF's
 * own headers (ESP-IDF 5.3 or later); not built by the tests: they run without ESP-IDF.
 *
 * Link: UART0 at TP_ESP_IDF_BAUD (the USB bridge's port; the console and log must be off on it,
 * the example's sdkconfig.defaults does that). Store: the data partition labelled "tinyprop"
 * (the example's partitions.csv). Arena and params record from the heap: the component builds
 * the device loop with TP_DEVICE_BOARD_BUFFERS and app_main() allocates them.
 */
#ifndef TP_ESP_IDF_H
#define TP_ESP_IDF_H

/* The link's speed: what the esp32 board profile (boards/esp32/profile.json) says. */
#define TP_ESP_IDF_BAUD 921600

/* Measure the heap as READY reports it (before the arena and params record are taken from
 * it). Call first in app_main(). */
void tp_esp_idf_measure_heap(void);

#endif /* TP_ESP_IDF_H */
