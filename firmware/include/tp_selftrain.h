/*
 * selftrain.h - the self-training application (selftrain.c): trains the compiled-in blob on the
 * compiled-in samples and prints the run as text lines on the board link.
 */
#ifndef TP_SELFTRAIN_H
#define TP_SELFTRAIN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Boards whose static RAM cannot hold the arena and params (ESP32: its DRAM segment is smaller
 * than the heap) build with TP_SELFTRAIN_BOARD_BUFFERS and point these at buffers of at least
 * the given sizes, 8-byte aligned, before calling tp_selftrain_main(). */
#ifdef TP_SELFTRAIN_BOARD_BUFFERS
extern uint8_t *tp_selftrain_arena;
extern uint8_t *tp_selftrain_params;
extern const uint32_t tp_selftrain_arena_bytes;
extern const uint32_t tp_selftrain_params_bytes;
#endif

/* Bring the board up, train, print; returns the exit status (0: the run passed its checks). */
int tp_selftrain_main(void);

#ifdef __cplusplus
}
#endif
#endif /* TP_SELFTRAIN_H */
