/*
 * DeviceLoop - the tinyprop device loop: the board holds a model and trains it on samples the
 * host sends over USB serial, and keeps what it learned in its flash.
 *
 * 1. Make the model header in this sketch's folder (without one the sketch still builds, and
 *    the board answers "no model" to training requests):
 *      tinyprop convert vww_96_int8.tflite -o model.tpb --scheme auto --board nano33ble \
 *          --calib vww-mini --header model.h
 *    (--board esp32 for an ESP32 board.)
 * 2. Upload this sketch (Arduino Nano 33 BLE, or an ESP32 board), close the Serial Monitor.
 * 3. Train from the host, on the port the board is on:
 *      tinyprop train model.tpb --data vww-mini --board /dev/ttyACM0
 *
 * setup() and loop() are the board glue's (tinyprop_board.cpp); the settings are in
 * tinyprop_config.h.
 */
#include <tinyprop.h>
