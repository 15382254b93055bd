/*
 * camera.cpp - the Nano 33 BLE Sense on the Arduino Tiny Machine Learning Kit's shield: the
 * OV7675 camera (Arduino_OV767X), the shield's button on D13 as the label source and the RGB
 * LED showing the prediction. Only the learn build (TP_APP_LEARN, env nano33ble-learn) has
 * them, so the device firmware needs no camera library (there boards/arduino/tp_arduino.cpp
 * answers TP_BOARD_ERR_UNSUPPORTED).
 *
 * Camera: QCIF (176x144, the board's own choice) or QQVGA (160x120), in GRAY8 (the luma of
 * the sensor's YUV422) or RGB565BE, at 5 frames a second (the Nano reads the pixels by polling
 * with interrupts off for a frame: 1 and 5 are the rates that work).
 * Button: a short press (30 ms to 1 s) labels the next frame read class 1, a long press (1 s
 * or more) class 0 (tp_arduino.h). RGB LED: green for class 1, red for class 0, blue for a
 * higher class, off for none. The orange LED stays lit: it shares D13 with the button, which
 * is driven high and read back through the pin's input buffer (a press pulls it low).
 */
#include <Arduino.h>

#include "../arduino/tp_arduino.h"

#ifdef TP_APP_LEARN
#include <Arduino_OV767X.h>
#include <mbed.h>
#include <nrf_gpio.h>

extern "C" {
#include "tp_image.h"
}

#define BUTTON_PIN 13
#define FRAMES_PER_SECOND 5

static bool camera_open;
static uint32_t frame_bytes;

extern "C" int tp_board_camera_open(tp_camera_mode *mode)
{
    if (mode == NULL) {
        return TP_BOARD_ERR_ARG;
    }
    if (mode->width == 0 && mode->height == 0 && mode->format == 0) {
        mode->width = 176;
        mode->height = 144;
        mode->format = TP_IMAGE_GRAY8;
    }
    int resolution, format, bytes_per_pixel;
    if (mode->width == 176 && mode->height == 144) {
        resolution = QCIF;
    } else if (mode->width == 160 && mode->height == 120) {
        resolution = QQVGA;
    } else {
        return TP_BOARD_ERR_UNSUPPORTED;
    }
    if (mode->format == TP_IMAGE_GRAY8) {
        format = GRAYSCALE;
        bytes_per_pixel = 1;
    } else if (mode->format == TP_IMAGE_RGB565BE) {
        format = RGB565; /* the sensor sends each pixel's high byte first */
        bytes_per_pixel = 2;
    } else {
        return TP_BOARD_ERR_UNSUPPORTED;
    }
    if (camera_open) {
        Camera.end();
        camera_open = false;
    }
    if (!Camera.begin(resolution, format, FRAMES_PER_SECOND, OV7675)) {
        return TP_BOARD_ERR_IO; /* no answer from the sensor: the shield or its ribbon */
    }
    camera_open = true;
    frame_bytes = mode->width * mode->height * (uint32_t)bytes_per_pixel;
    mode->flags = 0;
    return TP_BOARD_OK;
}

extern "C" int32_t tp_board_camera_read(uint8_t *dst, uint32_t max)
{
    if (!camera_open || dst == NULL) {
        return TP_BOARD_ERR_ARG;
    }
    if (frame_bytes > max) {
        return TP_BOARD_ERR_TOO_BIG;
    }
    Camera.readFrame(dst);
    return (int32_t)frame_bytes;
}

/* Sampled from a timer interrupt, so a press is timed while the application computes. */
static mbed::Ticker button_ticker;
static bool button_started;

static void sample_button(void)
{
    tp_arduino_button_sample(nrf_gpio_pin_read(digitalPinToPinName(BUTTON_PIN)) == 0, millis());
}

extern "C" int tp_board_label(int32_t *label)
{
    if (!button_started) {
        /* Driven high with the input buffer connected: the shield's button pulls it low. */
        pinMode(BUTTON_PIN, OUTPUT);
        digitalWrite(BUTTON_PIN, HIGH);
        nrf_gpio_cfg(digitalPinToPinName(BUTTON_PIN), NRF_GPIO_PIN_DIR_OUTPUT,
                     NRF_GPIO_PIN_INPUT_CONNECT, NRF_GPIO_PIN_PULLUP, NRF_GPIO_PIN_S0S1,
                     NRF_GPIO_PIN_NOSENSE);
        button_ticker.attach(sample_button, std::chrono::milliseconds(TP_ARDUINO_BUTTON_SAMPLE_MS));
        button_started = true;
    }
    return tp_arduino_button_label(label);
}

/* The RGB LED's pins are active low. */
extern "C" void tp_board_show(int32_t prediction)
{
    static const int leds[3] = {LEDR, LEDG, LEDB}; /* class 0, 1, higher */
    static bool leds_ready;
    int on = prediction < 0 ? -1 : prediction > 1 ? 2 : (int)prediction;
    for (int i = 0; i < 3; i++) {
        if (!leds_ready) {
            pinMode(leds[i], OUTPUT);
        }
        digitalWrite(leds[i], i == on ? LOW : HIGH);
    }
    leds_ready = true;
}

#endif
