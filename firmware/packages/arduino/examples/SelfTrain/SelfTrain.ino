/*
 * SelfTrain - the smallest run: a model and a few labelled samples compiled in, trained on
 * the board with no host; the Serial Monitor (115200 baud) shows each step's loss and
 * prediction and the accuracy before and after ("selftrain ok: ..." when the loss fell and the
 * accuracy did not).
 *
 * 1. Make the two headers in this sketch's folder, the model and 8 samples of a dataset
 *    (from a checkout of tinyprop):
 *      tinyprop convert vww_96_int8.tflite -o model.tpb --scheme auto --board nano33ble \
 *          --calib vww-mini
 *      python firmware/apps/selftrain/selftrain_headers.py model.tpb --data vww-mini \
 *          --sketch PATH/TO/SelfTrain
 *    (--board esp32 for an ESP32 board.)
 * 2. Upload this sketch and open the Serial Monitor.
 *
 * setup() and loop() are the board glue's (tinyprop_board.cpp); the settings are in
 * tinyprop_config.h.
 */
#include <tinyprop.h>
