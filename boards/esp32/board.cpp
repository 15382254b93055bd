/*
 * board.cpp - ESP32 (esp32dev: 520 KB SRAM, of which 320 KB is data RAM) with the Arduino
 * core: the arena and params record from the heap (a static .bss this large overflows the
 * DRAM segment; platformio.ini builds with TP_DEVICE_BOARD_BUFFERS), the parameter store as a
 * LittleFS file in the flash's data partition (the default NVS partition, 20 KB, is too small
 * for a 67 KB record). The serial link and counter are boards/arduino/tp_arduino.cpp.
 * Built with TP_APP_SELFTRAIN (env esp32dev-wokwi) it runs the self-training application
 * (firmware/apps/selftrain/selftrain.c, what boards/esp32/scenario.yaml checks in Wokwi) instead of the
 * device loop, with its arena and params from the heap too.
 */
#include <Arduino.h>
#include <LittleFS.h>
#include <esp_heap_caps.h>

#include "../arduino/tp_arduino.h"

#define STORE_PATH "/tinyprop.store"
#define STORE_TMP_PATH "/tinyprop.tmp"
#define BOOT_LINE "tinyprop esp32: device loop"

#ifdef TP_APP_SELFTRAIN
uint8_t *tp_selftrain_arena;
uint8_t *tp_selftrain_params;
#else
uint8_t *tp_device_arena;
uint8_t *tp_device_record;
#endif

static bool store_ready;

static bool store_init(void)
{
    /* true: format the partition on first use, when it holds no file system yet */
    if (!store_ready) {
        store_ready = LittleFS.begin(true);
    }
    return store_ready;
}

extern "C" int tp_board_store_save(const uint8_t *src, uint32_t n)
{
    if (src == NULL && n > 0) {
        return TP_BOARD_ERR_ARG;
    }
    if (!store_init()) {
        return TP_BOARD_ERR_IO;
    }
    /* A temporary file renamed over the store: a reset mid-save keeps the previous record. */
    File f = LittleFS.open(STORE_TMP_PATH, "w");
    if (!f) {
        return TP_BOARD_ERR_IO;
    }
    size_t written = f.write(src, n);
    f.close();
    if (written != n || !LittleFS.rename(STORE_TMP_PATH, STORE_PATH)) {
        return TP_BOARD_ERR_IO;
    }
    return TP_BOARD_OK;
}

extern "C" int tp_board_store_load(uint8_t *dst, uint32_t max, uint32_t *n)
{
    if (n == NULL || (dst == NULL && max > 0)) {
        return TP_BOARD_ERR_ARG;
    }
    if (!store_init()) {
        return TP_BOARD_ERR_IO;
    }
    if (!LittleFS.exists(STORE_PATH)) {
        return TP_BOARD_ERR_NOT_FOUND;
    }
    File f = LittleFS.open(STORE_PATH, "r");
    if (!f) {
        return TP_BOARD_ERR_IO;
    }
    *n = (uint32_t)f.size();
    int status = TP_BOARD_OK;
    if (*n > max) {
        status = TP_BOARD_ERR_TOO_BIG;
    } else if (f.read(dst, *n) != *n) {
        status = TP_BOARD_ERR_IO;
    }
    f.close();
    return status;
}

extern "C" const char *tp_board_name(void)
{
    return "esp32";
}

extern "C" uint32_t tp_board_sram_bytes(void)
{
    return 320u * 1024u;
}

/* FreeRTOS keeps the loop task's stack high-water mark (in bytes on the ESP32). */
extern "C" uint32_t tp_board_stack_peak(void)
{
    return (uint32_t)(getArduinoLoopTaskStackSize() - uxTaskGetStackHighWaterMark(NULL));
}

static uint8_t *heap_buffer(uint32_t bytes)
{
    return static_cast<uint8_t *>(heap_caps_aligned_alloc(8, bytes, MALLOC_CAP_8BIT));
}

void setup()
{
    Serial.begin(TP_ARDUINO_BAUD);
#ifdef TP_APP_SELFTRAIN /* the self-training run (platformio.ini's esp32dev-wokwi env) */
    tp_selftrain_arena = heap_buffer(tp_selftrain_arena_bytes);
    tp_selftrain_params = heap_buffer(tp_selftrain_params_bytes);
    bool buffers = tp_selftrain_arena != NULL && tp_selftrain_params != NULL;
#else
    tp_device_arena = heap_buffer(tp_device_arena_bytes);
    tp_device_record = heap_buffer(tp_device_record_bytes);
    bool buffers = tp_device_arena != NULL && tp_device_record != NULL;
#endif
    if (!buffers) {
        Serial.println("tinyprop esp32: not enough heap for the arena and params");
        tp_board_exit(1);
    }
#ifndef TP_APP_SELFTRAIN
    /* One text line before the frames (the host's decoder skips it, as it skips the ROM's
     * boot messages), for a person on a serial monitor. */
    Serial.println(BOOT_LINE);
#endif
    tp_arduino_run();
}

void loop()
{
}
