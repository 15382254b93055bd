/*
 * tp_arduino.h - what the Arduino boards (nano33ble, esp32) share: the serial link, the
 * microsecond counter, the start-up and the label button's presses, in tp_arduino.cpp. Each
 * board's folder adds its name, SRAM, free RAM, stack peak, serial speed, flash store and
 * memory (board.cpp), its camera, button and LEDs (camera.cpp), and calls tp_arduino_run()
 * from setup().
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
#ifdef TP_APP_LEARN
#include "tp_learn.h"
#endif

/* Serial speed, set by each board (its profile.json's link.baud; platformio.ini's monitor_speed
 * matches it). USB CDC ignores it; a UART behind a USB bridge is bounded by it. */
extern const unsigned long tp_arduino_baud;

/* Open the serial link, run the device loop (which never returns on a real board: the link
 * never closes) and halt if it does. Call from setup(). Built with TP_APP_SELFTRAIN, it runs
 * the self-training application (firmware/apps/selftrain/selftrain.c) instead and halts when it
 * ends; built with TP_APP_LEARN, the learn application (firmware/apps/learn/), which
 * runs until reset on a real camera. */
void tp_arduino_run(void);

#ifdef TP_APP_LEARN
/* The label button (tp_board_label): a press held at least TP_ARDUINO_PRESS_MS, then released,
 * labels class 1 if released within TP_ARDUINO_LONG_PRESS_MS, class 0 if held longer. Shorter
 * blips are contact bounce. */
#define TP_ARDUINO_PRESS_MS 30u
#define TP_ARDUINO_LONG_PRESS_MS 1000u
/* How often the board's timer samples the button: a press far shorter than a frame's work
 * is still seen. */
#define TP_ARDUINO_BUTTON_SAMPLE_MS 10u

/* One sample of the button (pressed or not) at now_ms, from the board's timer (an interrupt
 * or a timer task: it only stores a pending label). */
void tp_arduino_button_sample(bool pressed, uint32_t now_ms);

/* *label: the last completed press not yet taken, or TP_BOARD_NO_LABEL; taking it clears it.
 * Returns TP_BOARD_OK, or TP_BOARD_ERR_ARG for a NULL label. */
int tp_arduino_button_label(int32_t *label);
#endif

#endif /* TP_ARDUINO_H */
