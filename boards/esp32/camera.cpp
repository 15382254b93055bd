/*
 * camera.cpp - the ESP32 camera boards' camera (espressif/esp32-camera, which Arduino-ESP32
 * carries), label button and LED for the learn build (TP_APP_LEARN: platformio.ini's
 * esp32cam-learn and esp32s3eye-learn, which name the board). Other builds have no camera
 * (boards/arduino/tp_arduino.cpp answers TP_BOARD_ERR_UNSUPPORTED).
 *
 * Camera (OV2640 on both boards): 96x96 (the board's own choice), QQVGA (160x120) or QCIF
 * (176x144), in GRAY8 or RGB565BE; two frame buffers in PSRAM (both boards have it), the
 * latest frame kept, so a frame read is never older than the one before.
 * Button: a short press (30 ms to 1 s) labels the next frame read class 1, a long press (1 s
 * or more) class 0 (tp_arduino.h). LED: on for class 1, off otherwise.
 *   - AI-Thinker ESP32-CAM: its only buttons are RESET and, on the ESP32-CAM-MB programmer,
 *     IO0, which this board uses as the camera's clock (XCLK): the label button is one wired
 *     from GPIO13 to GND (free while no SD card is used). LED: the red one on GPIO33 (lit low;
 *     GPIO4's is the flash).
 *   - ESP32-S3-EYE: the BOOT button (GPIO0). LED: the status LED on GPIO3.
 */
#include <Arduino.h>

#include "../arduino/tp_arduino.h"

#ifdef TP_APP_LEARN
#include <esp_camera.h>
#include <esp_timer.h>

extern "C" {
#include "tp_image.h"
}

#if defined(TP_ESP32_CAM_AI_THINKER)
#define LABEL_PIN 13
#define LED_PIN 33
#define LED_ON LOW
static void set_pins(camera_config_t *c)
{
    c->pin_pwdn = 32;
    c->pin_reset = -1;
    c->pin_xclk = 0;
    c->pin_sccb_sda = 26;
    c->pin_sccb_scl = 27;
    c->pin_d7 = 35;
    c->pin_d6 = 34;
    c->pin_d5 = 39;
    c->pin_d4 = 36;
    c->pin_d3 = 21;
    c->pin_d2 = 19;
    c->pin_d1 = 18;
    c->pin_d0 = 5;
    c->pin_vsync = 25;
    c->pin_href = 23;
    c->pin_pclk = 22;
}
#elif defined(TP_ESP32_CAM_S3_EYE)
#define LABEL_PIN 0
#define LED_PIN 3
#define LED_ON HIGH
static void set_pins(camera_config_t *c)
{
    c->pin_pwdn = -1;
    c->pin_reset = -1;
    c->pin_xclk = 15;
    c->pin_sccb_sda = 4;
    c->pin_sccb_scl = 5;
    c->pin_d7 = 16;
    c->pin_d6 = 17;
    c->pin_d5 = 18;
    c->pin_d4 = 12;
    c->pin_d3 = 10;
    c->pin_d2 = 8;
    c->pin_d1 = 9;
    c->pin_d0 = 11;
    c->pin_vsync = 6;
    c->pin_href = 7;
    c->pin_pclk = 13;
}
#else
/* platformio.ini's esp32cam-learn and esp32s3eye-learn name theirs */
#error "which camera board: -DTP_ESP32_CAM_AI_THINKER or -DTP_ESP32_CAM_S3_EYE"
#endif

static bool camera_open;
static uint32_t frame_width, frame_height, frame_bytes;

extern "C" int tp_board_camera_open(tp_camera_mode *mode)
{
    if (mode == NULL) {
        return TP_BOARD_ERR_ARG;
    }
    if (mode->width == 0 && mode->height == 0 && mode->format == 0) {
        mode->width = 96;
        mode->height = 96;
        mode->format = TP_IMAGE_GRAY8;
    }
    camera_config_t config = {};
    if (mode->width == 96 && mode->height == 96) {
        config.frame_size = FRAMESIZE_96X96;
    } else if (mode->width == 160 && mode->height == 120) {
        config.frame_size = FRAMESIZE_QQVGA;
    } else if (mode->width == 176 && mode->height == 144) {
        config.frame_size = FRAMESIZE_QCIF;
    } else {
        return TP_BOARD_ERR_UNSUPPORTED;
    }
    uint32_t bytes_per_pixel;
    if (mode->format == TP_IMAGE_GRAY8) {
        config.pixel_format = PIXFORMAT_GRAYSCALE;
        bytes_per_pixel = 1;
    } else if (mode->format == TP_IMAGE_RGB565BE) {
        config.pixel_format = PIXFORMAT_RGB565; /* the sensor's byte order: high byte first */
        bytes_per_pixel = 2;
    } else {
        return TP_BOARD_ERR_UNSUPPORTED;
    }
    set_pins(&config);
    config.xclk_freq_hz = 20000000;
    config.ledc_timer = LEDC_TIMER_0;
    config.ledc_channel = LEDC_CHANNEL_0;
    config.fb_count = 2;
    config.fb_location = psramFound() ? CAMERA_FB_IN_PSRAM : CAMERA_FB_IN_DRAM;
    config.grab_mode = CAMERA_GRAB_LATEST;
    if (camera_open) {
        esp_camera_deinit();
        camera_open = false;
    }
    if (esp_camera_init(&config) != ESP_OK) {
        return TP_BOARD_ERR_IO; /* no answer from the sensor, or no room for its buffers */
    }
    camera_open = true;
    frame_width = mode->width;
    frame_height = mode->height;
    frame_bytes = mode->width * mode->height * bytes_per_pixel;
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
    camera_fb_t *fb = esp_camera_fb_get();
    if (fb == NULL) {
        return TP_BOARD_ERR_IO;
    }
    int32_t status = (int32_t)frame_bytes;
    if (fb->width != frame_width || fb->height != frame_height || fb->len != frame_bytes) {
        status = TP_BOARD_ERR_IO; /* the driver delivered another mode than it was opened in */
    } else {
        memcpy(dst, fb->buf, frame_bytes);
    }
    esp_camera_fb_return(fb);
    return status;
}

/* Sampled from an esp_timer task, so a press is timed while the application computes. */
static esp_timer_handle_t button_timer;

static void sample_button(void *arg)
{
    (void)arg;
    tp_arduino_button_sample(digitalRead(LABEL_PIN) == LOW, millis());
}

extern "C" int tp_board_label(int32_t *label)
{
    if (button_timer == NULL) {
        pinMode(LABEL_PIN, INPUT_PULLUP);
        esp_timer_create_args_t args = {};
        args.callback = sample_button;
        args.name = "tp_button";
        if (esp_timer_create(&args, &button_timer) != ESP_OK ||
            esp_timer_start_periodic(button_timer, TP_ARDUINO_BUTTON_SAMPLE_MS * 1000u) != ESP_OK) {
            return TP_BOARD_ERR_IO;
        }
    }
    return tp_arduino_button_label(label);
}

extern "C" void tp_board_show(int32_t prediction)
{
    static bool led_ready;
    if (!led_ready) {
        pinMode(LED_PIN, OUTPUT);
        led_ready = true;
    }
    digitalWrite(LED_PIN, prediction == 1 ? LED_ON : !LED_ON);
}
#endif
