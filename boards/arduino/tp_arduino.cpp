/*
 * tp_arduino.cpp - the tp_board functions every Arduino board implements the same way: the
 * serial link (USB CDC on the Nano 33 BLE, UART0 on the ESP32), micros() as the counter, no
 * bulk files (samples come over the link), the halt at exit, yielding to the rest of the board
 * between slices of work, and (learn builds) turning the label button's presses into labels.
 */
#include <Arduino.h>

#include "tp_arduino.h"

#ifdef TP_APP_LEARN
#include <atomic>
#endif

static struct {
    uint32_t last_us; /* micros() at the last read, to extend it past 32 bits */
    uint64_t total_us;
} clock_state;

void tp_arduino_run(void)
{
#if defined(TP_APP_SELFTRAIN)
    tp_board_exit(tp_selftrain_main());
#elif defined(TP_APP_LEARN)
    tp_board_exit(tp_learn_main());
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

extern "C" int tp_board_poll(uint8_t *dst, size_t max)
{
    if (dst == NULL || max == 0) {
        return TP_BOARD_ERR_ARG;
    }
    int available = Serial.available();
    if (available <= 0) {
        return 0;
    }
    size_t n = (size_t)available < max ? (size_t)available : max;
    return (int)Serial.readBytes(reinterpret_cast<char *>(dst), n);
}

extern "C" int tp_board_read(uint8_t *dst, size_t max)
{
    int n;
    while ((n = tp_board_poll(dst, max)) == 0) {
        yield(); /* let the USB stack, Wi-Fi and the watchdog run */
    }
    return n;
}

#ifdef ESP32
/* A FreeRTOS yield only runs tasks of the loop task's priority or higher: a 1 ms sleep now and
 * then also lets this core's idle task (the task watchdog's, when it watches it) and the lower
 * ones run, at a cost of 1 %. */
#define REST_EVERY_MS 100u
static uint32_t last_rest_ms;
#endif

extern "C" void tp_board_yield(void)
{
    yield(); /* the mbed core: other threads (USB); the ESP32: tasks of the same priority */
#ifdef ESP32
    uint32_t now = millis();
    if (now - last_rest_ms >= REST_EVERY_MS) {
        delay(1);
        last_rest_ms = millis();
    }
#endif
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

#ifdef TP_APP_LEARN
static struct {
    bool down;                  /* as of the last sample */
    uint32_t down_ms;           /* when the press began */
    std::atomic<int32_t> label; /* the completed press not yet taken: the timer sets it, the
                                   application takes it, on another task or in an interrupt */
} button = {false, 0, {TP_BOARD_NO_LABEL}};

void tp_arduino_button_sample(bool pressed, uint32_t now_ms)
{
    if (pressed && !button.down) {
        button.down_ms = now_ms;
    } else if (!pressed && button.down) {
        uint32_t held = now_ms - button.down_ms;
        if (held >= TP_ARDUINO_PRESS_MS) {
            button.label.store(held < TP_ARDUINO_LONG_PRESS_MS ? 1 : 0);
        }
    }
    button.down = pressed;
}

int tp_arduino_button_label(int32_t *label)
{
    if (label == NULL) {
        return TP_BOARD_ERR_ARG;
    }
    *label = button.label.exchange(TP_BOARD_NO_LABEL);
    return TP_BOARD_OK;
}
#else
/* Cameras, buttons and LEDs are the learn build's (each board's camera.cpp): the device
 * firmware and the self-training run need no camera library, and take labels from the host. */
extern "C" int tp_board_camera_open(tp_camera_mode *mode)
{
    (void)mode;
    return TP_BOARD_ERR_UNSUPPORTED;
}

extern "C" int32_t tp_board_camera_read(uint8_t *dst, uint32_t max)
{
    (void)dst;
    (void)max;
    return TP_BOARD_ERR_UNSUPPORTED;
}

extern "C" int tp_board_label(int32_t *label)
{
    (void)label;
    return TP_BOARD_ERR_UNSUPPORTED;
}

extern "C" void tp_board_show(int32_t prediction)
{
    (void)prediction;
}
#endif
