/* tinyprop_config.h - this sketch's settings, read by tinyprop_app.c and tinyprop_board.cpp. */
#ifndef TINYPROP_CONFIG_H
#define TINYPROP_CONFIG_H

/* the model's and the samples' headers, from selftrain_headers.py MODEL.tpb --data DIR --sketch
 * THIS_FOLDER (SelfTrain.ino) */
#if !__has_include("model.h") || !__has_include("samples.h")
#error "no model.h or samples.h in this sketch's folder: selftrain_headers.py --sketch writes them"
#endif
/* The model and the samples (the paths are relative to firmware/apps/selftrain/, where the
 * application includes them). */
#define TP_MODEL_HEADER "../../../model.h"
#define TP_SAMPLES_HEADER "../../../samples.h"

/* The self-training application instead of the device loop. */
#define TP_APP_SELFTRAIN

/* The ESP32's static RAM cannot hold the arena and the parameters: the glue takes them from
 * the heap. */
#ifdef ESP32
#define TP_SELFTRAIN_BOARD_BUFFERS
#endif

#endif /* TINYPROP_CONFIG_H */
