/*
 * board.cpp - ESP32 (esp32dev: 520 KB SRAM, of which 320 KB is data RAM) with the Arduino
 * core: the arena and params record from the heap (a static .bss this large overflows the
 * DRAM segment; platformio.ini builds with TP_DEVICE_BOARD_BUFFERS), the parameter store as a
 * LittleFS file in the flash's data partition (the default NVS partition, 20 KB, is too small
 * for a 67 KB record). The serial link and counter are boards/arduino/tp_arduino.cpp.
 * Built with TP_APP_SELFTRAIN (env esp32dev-wokwi) it runs the self-training application
 * (firmware/apps/selftrain/selftrain.c, what boards/esp32/scenario.yaml checks in Wokwi) instead of
 * the device loop, with its arena and params from the heap too; built with TP_APP_LEARN (envs
 * esp32cam-learn, esp32s3eye-learn) the learn application on the board's camera (camera.cpp),
 * its arena, params record and frame from the heap.
 */
#include <Arduino.h>
#include <LittleFS.h>
#include <esp_heap_caps.h>

#include "../arduino/tp_arduino.h"
#include "../esp-idf/tp_esp_heap.h"

#define STORE_PATH "/tinyprop.store"
#define STORE_TMP_PATH "/tinyprop.tmp"
#define BOOT_LINE "tinyprop esp32: device loop"

#if defined(TP_APP_SELFTRAIN)
uint8_t *tp_selftrain_arena;
uint8_t *tp_selftrain_params;
#elif defined(TP_APP_LEARN)
uint8_t *tp_learn_arena;
uint8_t *tp_learn_record;
uint8_t *tp_learn_frame;
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

/* UART0 through the USB bridge: the link's speed is the baud rate (profile.json). 921,600 is
 * what esptool uploads at; CP2102 and CH340 bridges carry it. The self-training run prints text
 * lines for Wokwi's serial monitor, at its default speed. */
#ifdef TP_APP_SELFTRAIN
const unsigned long tp_arduino_baud = 115200;
#else
const unsigned long tp_arduino_baud = 921600;
#endif
/* Bytes the UART driver buffers while the device loop is busy: four full frames. */
#define RX_BUFFER_BYTES 4096

/* The heap as it was before setup() allocated the arena and params record. */
static tp_board_ram heap_at_boot;

extern "C" void tp_board_free_ram(tp_board_ram *ram)
{
    *ram = heap_at_boot;
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

/* Two buffers, the larger first: it gets a block at least as large as the other needs, so both
 * fit whenever the larger fits the largest block and the smaller the second (what the host
 * checks against READY and profile.json). NULL for a buffer that did not fit. */
static bool allocate(uint8_t **a, uint32_t a_bytes, uint8_t **b, uint32_t b_bytes)
{
    if (a_bytes >= b_bytes) {
        *a = heap_buffer(a_bytes);
        *b = heap_buffer(b_bytes);
    } else {
        *b = heap_buffer(b_bytes);
        *a = heap_buffer(a_bytes);
    }
    return *a != NULL && *b != NULL;
}

#ifdef TP_APP_LEARN
/* The frame in PSRAM where there is some (the camera boards have 4 or 8 MB): only copied in
 * and fitted to the model's input once a frame, it leaves internal RAM to the arena. */
static uint8_t *frame_buffer(uint32_t bytes)
{
    void *p = heap_caps_aligned_alloc(8, bytes, MALLOC_CAP_SPIRAM | MALLOC_CAP_8BIT);
    return p != NULL ? static_cast<uint8_t *>(p) : heap_buffer(bytes);
}
#endif

void setup()
{
    Serial.setRxBufferSize(RX_BUFFER_BYTES);
    Serial.begin(tp_arduino_baud);
    heap_at_boot = tp_esp_heap_measure();
#if defined(TP_APP_SELFTRAIN) /* the self-training run (platformio.ini's esp32dev-wokwi env) */
    if (!allocate(&tp_selftrain_arena, tp_selftrain_arena_bytes, &tp_selftrain_params,
                  tp_selftrain_params_bytes)) {
        Serial.println("tinyprop esp32: not enough heap for the arena and params");
        tp_board_exit(1);
    }
#elif defined(TP_APP_LEARN) /* the learn application (esp32cam-learn, esp32s3eye-learn) */
    if (!allocate(&tp_learn_arena, tp_learn_arena_bytes, &tp_learn_record, tp_learn_record_bytes) ||
        (tp_learn_frame = frame_buffer(tp_learn_frame_bytes)) == NULL) {
        Serial.println("tinyprop esp32: not enough heap for the arena, params record and frame");
        tp_board_exit(1);
    }
#else
    /* One text line before the frames (the host's decoder skips it, as it skips the ROM's
     * boot messages), for a person on a serial monitor. */
    Serial.println(BOOT_LINE);
    /* Without its buffers the device loop still runs: it refuses the blob's requests, and READY
     * tells the host how much heap there was, so tinyprop train can say what fits. */
    if (!allocate(&tp_device_arena, tp_device_arena_bytes, &tp_device_record,
                  tp_device_record_bytes)) {
        Serial.println("tinyprop esp32: not enough heap for the arena and params record");
    }
#endif
    tp_arduino_run();
}

void loop()
{
}
