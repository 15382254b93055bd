/*
 * tinyprop_app.c - the sketch's tinyprop application, compiled here with the sketch's settings
 * (tinyprop_config.h): the Arduino IDE compiles a library's src/ once, with no per-sketch
 * defines, so the parts a sketch configures (the compiled-in model, the application) are built
 * in the sketch folder from the copies under firmware/. Same in every example.
 */
#include "tinyprop_config.h"

#if defined(TP_APP_LEARN)
#include "firmware/apps/learn/learn.c"
#elif defined(TP_APP_SELFTRAIN)
#include "firmware/apps/selftrain/selftrain.c"
#else
#include "firmware/apps/device/tp_device.c"
#endif
