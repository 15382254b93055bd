/* tinyprop_config.h - this sketch's settings, read by tinyprop_app.c and tinyprop_board.cpp. */
#ifndef TINYPROP_CONFIG_H
#define TINYPROP_CONFIG_H

/* The model: the header `tinyprop convert ... --header model.h` wrote into this folder (the
 * path is relative to firmware/apps/device/, where the device loop includes it). */
#if __has_include("model.h")
#define TP_MODEL_HEADER "../../../model.h"
#endif

/* Save the trained parameters to flash every 50 steps, so a reset loses at most 50. */
#define TP_DEVICE_SAVE_EVERY 50

/* The ESP32's static RAM cannot hold the arena and the parameters: the glue takes them from
 * the heap. */
#ifdef ESP32
#define TP_DEVICE_BOARD_BUFFERS
#endif

#endif /* TINYPROP_CONFIG_H */
