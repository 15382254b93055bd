/*
 * tp_esp_store.h - the parameter store (tp_store.h) in the ESP32's `tinyprop` data partition, for
 * both ESP32 boards (boards/esp32 on Arduino-ESP32, boards/esp-idf): the flash HAL over
 * esp_partition, whose calls both cores have (ESP-IDF 4.4 under Arduino-ESP32 2.0, and 5.3+).
 * The partition tables this repository uses have the partition (boards/esp32/partitions.csv,
 * the ESP-IDF example's partitions.csv); without one the store is unsupported. C and C++.
 */
#ifndef TP_ESP_STORE_H
#define TP_ESP_STORE_H

#include <esp_partition.h>

#include "tp_board.h"
#include "tp_store.h"

#define TP_ESP_STORE_LABEL "tinyprop"
#define TP_ESP_STORE_SECTOR 4096u /* the flash's erase unit (SPI_FLASH_SEC_SIZE) */
#define TP_ESP_STORE_WORD 16u     /* the unit flash encryption writes: aligned either way */

static inline int tp_esp_store_erase(void *ctx, uint32_t page)
{
    return esp_partition_erase_range((const esp_partition_t *)ctx,
                                     (size_t)page * TP_ESP_STORE_SECTOR,
                                     TP_ESP_STORE_SECTOR) != ESP_OK;
}

static inline int tp_esp_store_program(void *ctx, uint32_t offset, const uint8_t *src, uint32_t n)
{
    return esp_partition_write((const esp_partition_t *)ctx, offset, src, n) != ESP_OK;
}

static inline int tp_esp_store_read(void *ctx, uint32_t offset, uint8_t *dst, uint32_t n)
{
    return esp_partition_read((const esp_partition_t *)ctx, offset, dst, n) != ESP_OK;
}

/* The store's flash, or NULL when the partition table has no `tinyprop` partition. */
static inline const tp_flash *tp_esp_store_flash(void)
{
    static tp_flash flash;
    const esp_partition_t *p = esp_partition_find_first(ESP_PARTITION_TYPE_DATA,
                                                        ESP_PARTITION_SUBTYPE_ANY,
                                                        TP_ESP_STORE_LABEL);
    if (p == NULL) {
        return NULL;
    }
    flash.ctx = (void *)p;
    flash.page_bytes = TP_ESP_STORE_SECTOR;
    flash.word_bytes = TP_ESP_STORE_WORD;
    flash.pages = (uint32_t)(p->size / TP_ESP_STORE_SECTOR);
    flash.erase = tp_esp_store_erase;
    flash.program = tp_esp_store_program;
    flash.read = tp_esp_store_read;
    return &flash;
}

/* tp_board_store_save and tp_board_store_load of both boards. */
static inline int tp_esp_store_save(const uint8_t *src, uint32_t n)
{
    const tp_flash *f = tp_esp_store_flash();
    return f != NULL ? -(int)tp_store_save(f, src, n) : TP_BOARD_ERR_UNSUPPORTED;
}

static inline int tp_esp_store_load(uint8_t *dst, uint32_t max, uint32_t *n)
{
    const tp_flash *f = tp_esp_store_flash();
    return f != NULL ? -(int)tp_store_load(f, dst, max, n) : TP_BOARD_ERR_UNSUPPORTED;
}

#endif /* TP_ESP_STORE_H */
