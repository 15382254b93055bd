/*
 * CameraLearn - the board learns from its own camera, with no host: each frame is classified
 * (the RGB LED or LED shows the class), and a button press labels the next frame and trains
 * on it (a short press: class 1, a press of a second or more: class 0). What it learned is
 * saved to flash every 10 labelled frames and restored at boot.
 *
 * Boards: the Arduino Nano 33 BLE Sense on the Tiny Machine Learning Kit's shield (OV7675
 * camera through the Arduino_OV767X library, the shield's button), or an ESP32 camera board:
 * AI-Thinker ESP32-CAM (a button from GPIO13 to GND) or ESP32-S3-EYE (choose it in
 * tinyprop_config.h; PSRAM enabled in the Tools menu).
 *
 * 1. Make the model header in this sketch's folder:
 *      tinyprop convert vww_96_int8.tflite -o model.tpb --scheme auto --board nano33ble \
 *          --calib vww-mini --header model.h
 *    (--board esp32 for an ESP32 camera board.)
 * 2. Upload this sketch; the Serial Monitor shows a line per frame (its prediction) and per
 *    labelled frame (the training step).
 *
 * setup() and loop() are the board glue's (tinyprop_board.cpp); the settings are in
 * tinyprop_config.h.
 */
#include <tinyprop.h>
