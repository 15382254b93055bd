/*
 * tinyprop_board.cpp - the board's tinyprop HAL (tp_board.h) and the sketch's setup() and
 * loop(), which start the application (tinyprop_app.c): the Arduino glue under boards/,
 * compiled here with the sketch's settings (tinyprop_config.h). The board is the one the IDE
 * builds for. Same in every example.
 */
#include "tinyprop_config.h"

#include "boards/arduino/tp_arduino.cpp"

#if defined(ARDUINO_ARCH_MBED)
/* Arduino Nano 33 BLE (Sense): the mbed core */
#include "boards/nano33ble/board.cpp"
#ifdef TP_APP_LEARN
#include "boards/nano33ble/camera.cpp"
#endif
#elif defined(ESP32)
#include "boards/esp32/board.cpp"
#ifdef TP_APP_LEARN
#include "boards/esp32/camera.cpp"
#endif
#else
#error "tinyprop's examples run on the Arduino Nano 33 BLE (mbed core) and the ESP32 boards"
#endif
