/*
 * tp_arduino.h - what the Arduino boards (nano33ble, esp32) share: the serial link, the
 * microsecond counter and the start-up, in tp_arduino.cpp. Each board's folder adds its name,
 * SRAM, free RAM, stack peak, serial speed, flash store and memory (board.cpp) and calls
 * tp_arduino_run() from setup().
 */
#ifndef TP_ARDUINO_H
#define TP_ARDUINO_H

#include <stdint.h>

extern "C" {
#include "tinyprop.h"
#include "tp_board.h"
#include "tp_device.h"
#include "tp_proto.h"
}
#ifdef TP_APP_SELFTRAIN
#include "tp_selftrain.h"
#endif

/* Serial speed, set by each board (its profile.json's link.baud; platformio.ini's monitor_speed
 * matches it). USB CDC ignores it; a UART behind a USB bridge is bounded by it. */
extern const unsigned long tp_arduino_baud;

/* Open the serial link, run the device loop (which never returns on a real board: the link
 * never closes) and halt if it does. Call from setup(). Built with TP_APP_SELFTRAIN, it runs
 * the self-training application (firmware/apps/selftrain/selftrain.c) instead and halts when it
 * ends. */
void tp_arduino_run(void);

#endif /* TP_ARDUINO_H */
