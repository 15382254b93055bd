/*
 * tp_arduino.cpp - the tp_board functions every Arduino board implements the same way: the
 * serial link (USB CDC on the Nano 33 BLE, UART0 on the ESP32), micros() as the counter, no
 * bulk files (samples come over the link), and the halt at exit.
 */
#include <Arduino.h>

#include "tp_arduino.h"

static struct {
    uint32_t last_us; /* micros() at the last read, to extend it past 32 bits */
    uint64_t total_us;
} clock_state;

void tp_arduino_run(void)
{
#ifdef TP_APP_SELFTRAIN
    tp_board_exit(tp_selftrain_main());
#else
    tp_board_exit(tp_device_main());
#endif
}

extern "C" int tp_board_init(void)
{
    Serial.begin(tp_arduino_baud);
    while (!Serial) { /* USB CDC: wait for the host to open the port */
        delay(10);
    }
    clock_state.last_us = micros();
    return TP_BOARD_OK;
}

extern "C" int tp_board_read(uint8_t *dst, size_t max)
{
    if (dst == NULL || max == 0) {
        return TP_BOARD_ERR_ARG;
    }
    int available;
    while ((available = Serial.available()) <= 0) {
        yield(); /* let the USB stack, Wi-Fi and the watchdog run */
    }
    size_t n = (size_t)available < max ? (size_t)available : max;
    return (int)Serial.readBytes(reinterpret_cast<char *>(dst), n);
}

extern "C" int tp_board_write(const uint8_t *src, size_t n)
{
    if (src == NULL && n > 0) {
        return TP_BOARD_ERR_ARG;
    }
    while (n > 0) {
        size_t sent = Serial.write(src, n);
        src += sent;
        n -= sent;
    }
    return TP_BOARD_OK;
}

/* micros() wraps every 71 minutes; a training step is far shorter than that. */
extern "C" uint64_t tp_board_counter(void)
{
    uint32_t now = micros();
    clock_state.total_us += (uint32_t)(now - clock_state.last_us);
    clock_state.last_us = now;
    return clock_state.total_us;
}

extern "C" const char *tp_board_counter_unit(void)
{
    return "us";
}

extern "C" void tp_board_exit(int status)
{
    (void)status; /* nobody to tell on a real board: stay halted until reset */
    for (;;) {
        delay(1000);
    }
}

extern "C" int32_t tp_board_bulk_open(const char *name)
{
    (void)name;
    return TP_BOARD_ERR_UNSUPPORTED;
}

extern "C" int32_t tp_board_bulk_read(uint32_t offset, uint8_t *dst, uint32_t n)
{
    (void)offset;
    (void)dst;
    (void)n;
    return TP_BOARD_ERR_UNSUPPORTED;
}
