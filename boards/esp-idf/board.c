/*
 * board.c - the tp_board.h HAL on an ESP32 under ESP-IDF 5.3+ (tp_esp_idf.h): UART0 through the
 * UART driver, esp_timer's microseconds, the parameter store in a data partition, FreeRTOS for
 * yields and the stack. No camera, button or LED (the learn application is the Arduino
 * library's). The tests do not build it (no ESP-IDF there): `idf.py build` of the example does.
 */
#include <stddef.h>
#include <stdint.h>

#include <driver/uart.h>
#include <esp_partition.h>
#include <esp_timer.h>
#include <freertos/FreeRTOS.h>
#include <freertos/task.h>
#include <sdkconfig.h>

#include "tinyprop.h"
#include "tp_board.h"
#include "tp_esp_heap.h"
#include "tp_esp_idf.h"

#define LINK_UART UART_NUM_0
#define RX_BUFFER_BYTES 4096 /* four full frames while the device loop is busy */
#define STORE_LABEL "tinyprop"
#define STORE_MAGIC 0x54535054u /* "TPST" */
/* A FreeRTOS yield only runs tasks of the same priority or higher: a 1 ms sleep now and then
 * lets the idle task (and its watchdog) run too. */
#define REST_EVERY_US 100000

struct store_header {
    uint32_t magic;
    uint32_t length;
    uint32_t crc; /* CRC32 of the record: a save cut short by a reset is seen as such */
};

static tp_board_ram heap_at_boot;
static int64_t last_rest_us;

void tp_esp_idf_measure_heap(void)
{
    heap_at_boot = tp_esp_heap_measure();
}

int tp_board_init(void)
{
    const uart_config_t config = {
        .baud_rate = TP_ESP_IDF_BAUD,
        .data_bits = UART_DATA_8_BITS,
        .parity = UART_PARITY_DISABLE,
        .stop_bits = UART_STOP_BITS_1,
        .flow_ctrl = UART_HW_FLOWCTRL_DISABLE,
        .source_clk = UART_SCLK_DEFAULT,
    };
    if (uart_driver_install(LINK_UART, RX_BUFFER_BYTES, 0, 0, NULL, 0) != ESP_OK ||
        uart_param_config(LINK_UART, &config) != ESP_OK) {
        return TP_BOARD_ERR_IO;
    }
    last_rest_us = esp_timer_get_time();
    return TP_BOARD_OK;
}

int tp_board_poll(uint8_t *dst, size_t max)
{
    if (dst == NULL || max == 0) {
        return TP_BOARD_ERR_ARG;
    }
    int n = uart_read_bytes(LINK_UART, dst, (uint32_t)max, 0);
    return n < 0 ? TP_BOARD_ERR_IO : n;
}

int tp_board_read(uint8_t *dst, size_t max)
{
    if (dst == NULL || max == 0) {
        return TP_BOARD_ERR_ARG;
    }
    int n;
    do { /* blocked in the driver: the other tasks and the idle task run meanwhile */
        n = uart_read_bytes(LINK_UART, dst, (uint32_t)max, pdMS_TO_TICKS(100));
    } while (n == 0);
    return n < 0 ? TP_BOARD_ERR_IO : n;
}

int tp_board_write(const uint8_t *src, size_t n)
{
    if (src == NULL && n > 0) {
        return TP_BOARD_ERR_ARG;
    }
    return n == 0 || uart_write_bytes(LINK_UART, src, n) == (int)n ? TP_BOARD_OK : TP_BOARD_ERR_IO;
}

void tp_board_yield(void)
{
    int64_t now = esp_timer_get_time();
    if (now - last_rest_us >= REST_EVERY_US) {
        vTaskDelay(1);
        last_rest_us = esp_timer_get_time();
    } else {
        taskYIELD();
    }
}

/* The chip's profile is the esp32 board's (boards/esp32/profile.json): the same memory. */
const char *tp_board_name(void)
{
    return "esp32";
}

uint32_t tp_board_sram_bytes(void)
{
    return 320u * 1024u; /* the data RAM of the ESP32's 520 KB */
}

void tp_board_free_ram(tp_board_ram *ram)
{
    *ram = heap_at_boot;
}

uint64_t tp_board_counter(void)
{
    return (uint64_t)esp_timer_get_time();
}

const char *tp_board_counter_unit(void)
{
    return "us";
}

/* The main task's stack high-water mark (in bytes under ESP-IDF). */
uint32_t tp_board_stack_peak(void)
{
    return (uint32_t)(CONFIG_ESP_MAIN_TASK_STACK_SIZE - uxTaskGetStackHighWaterMark(NULL));
}

void tp_board_exit(int status)
{
    (void)status; /* nobody to tell on a real board: stay halted until reset */
    for (;;) {
        vTaskDelay(pdMS_TO_TICKS(1000));
    }
}

int32_t tp_board_bulk_open(const char *name)
{
    (void)name;
    return TP_BOARD_ERR_UNSUPPORTED;
}

int32_t tp_board_bulk_read(uint32_t offset, uint8_t *dst, uint32_t n)
{
    (void)offset;
    (void)dst;
    (void)n;
    return TP_BOARD_ERR_UNSUPPORTED;
}

static const esp_partition_t *store_partition(void)
{
    return esp_partition_find_first(ESP_PARTITION_TYPE_DATA, ESP_PARTITION_SUBTYPE_ANY,
                                    STORE_LABEL);
}

/* Record first, header last: the header's CRC only matches once all of it is written. */
int tp_board_store_save(const uint8_t *src, uint32_t n)
{
    const esp_partition_t *p = store_partition();
    struct store_header h = {STORE_MAGIC, n, 0u};
    if (src == NULL && n > 0) {
        return TP_BOARD_ERR_ARG;
    }
    if (p == NULL) {
        return TP_BOARD_ERR_UNSUPPORTED;
    }
    if (n > p->size - sizeof h) {
        return TP_BOARD_ERR_TOO_BIG;
    }
    h.crc = tp_crc32(0, src, n);
    size_t erase = (sizeof h + n + p->erase_size - 1u) / p->erase_size * p->erase_size;
    if (esp_partition_erase_range(p, 0, erase) != ESP_OK ||
        (n > 0 && esp_partition_write(p, sizeof h, src, n) != ESP_OK) ||
        esp_partition_write(p, 0, &h, sizeof h) != ESP_OK) {
        return TP_BOARD_ERR_IO;
    }
    return TP_BOARD_OK;
}

int tp_board_store_load(uint8_t *dst, uint32_t max, uint32_t *n)
{
    const esp_partition_t *p = store_partition();
    struct store_header h;
    if (n == NULL || (dst == NULL && max > 0)) {
        return TP_BOARD_ERR_ARG;
    }
    if (p == NULL) {
        return TP_BOARD_ERR_UNSUPPORTED;
    }
    if (esp_partition_read(p, 0, &h, sizeof h) != ESP_OK) {
        return TP_BOARD_ERR_IO;
    }
    if (h.magic != STORE_MAGIC || h.length > p->size - sizeof h) {
        return TP_BOARD_ERR_NOT_FOUND;
    }
    *n = h.length;
    if (h.length > max) {
        return TP_BOARD_ERR_TOO_BIG;
    }
    if (esp_partition_read(p, sizeof h, dst, h.length) != ESP_OK) {
        return TP_BOARD_ERR_IO;
    }
    return tp_crc32(0, dst, h.length) == h.crc ? TP_BOARD_OK : TP_BOARD_ERR_NOT_FOUND;
}

int tp_board_camera_open(tp_camera_mode *mode)
{
    (void)mode;
    return TP_BOARD_ERR_UNSUPPORTED;
}

int32_t tp_board_camera_read(uint8_t *dst, uint32_t max)
{
    (void)dst;
    (void)max;
    return TP_BOARD_ERR_UNSUPPORTED;
}

int tp_board_label(int32_t *label)
{
    (void)label;
    return TP_BOARD_ERR_UNSUPPORTED;
}

void tp_board_show(int32_t prediction)
{
    (void)prediction;
}
