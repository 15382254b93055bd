/* tinyprop_config.h - this sketch's settings, read by tinyprop_app.c and tinyprop_board.cpp. */
#ifndef TINYPROP_CONFIG_H
#define TINYPROP_CONFIG_H

/* the model's header, from tinyprop convert MODEL.tflite -o model.tpb --header model.h */
#if !__has_include("model.h")
#error "no model.h in this sketch's folder: tinyprop convert ... --header model.h writes it"
#endif
/* The model (the path is relative to firmware/apps/learn/, where the learn app includes it). */
#define TP_MODEL_HEADER "../../../model.h"

/* The learn application instead of the device loop; any TP_LEARN_* setting of tp_learn.h
 * (learning rate, replay, camera mode) may be defined here. */
#define TP_APP_LEARN

#ifdef ESP32
/* The arena, the parameters and the frame from the heap (the frame in PSRAM). */
#define TP_LEARN_BOARD_BUFFERS
/* The camera board: TP_ESP32_CAM_AI_THINKER or TP_ESP32_CAM_S3_EYE. */
#define TP_ESP32_CAM_AI_THINKER
#endif

#endif /* TINYPROP_CONFIG_H */
