/*
 * tp_device.h - the device main loop: the firmware every board runs (APP=device).
 *
 * tp_device_main() brings the board up, binds the model blob compiled into flash to static
 * memory, and serves protocol frames (docs/protocol.md) until the link closes. Build it with
 * the board Makefile's BLOB=path/to/model_tpb.h (a header as written by tinyprop.boards, or
 * tinyprop.blob.c_header); without BLOB the device has no model and answers NOT_LOADED.
 *
 * Memory, all static (or the board's, see TP_DEVICE_BOARD_BUFFERS): the arena and the params
 * record are sized from the header's
 * TP_MODEL_ARENA_BYTES and TP_MODEL_PARAMS_BYTES when it defines them, else from the defaults
 * below (a blob that needs more is answered with an ERROR at every request that needs it).
 *
 * The params record (tp_record.h): PULL_PARAMS, PUSH_PARAMS and the parameter store address
 * one record. A record for another blob is refused by PUSH_PARAMS and ignored at boot.
 * PUSH_PARAMS at offset 0 must carry the whole header; the params after it are written in
 * place (the CRC is checked for the store, where a torn file is possible, not for a push).
 */
#ifndef TP_DEVICE_H
#define TP_DEVICE_H

#include <stdint.h>

/* Work units of one tp_train_continue call in a training step (the step runs in slices, with
 * tp_board_yield between them, so a watchdog or a radio is served during it). */
#ifndef TP_DEVICE_SLICE
#define TP_DEVICE_SLICE 8u
#endif

/* Save the params record to the board's store after every N-th training step as well as on
 * SAVE_PARAMS (0: only on SAVE_PARAMS). Real boards set it, so a reset loses at most N steps... */
#ifndef TP_DEVICE_SAVE_EVERY
#define TP_DEVICE_SAVE_EVERY 0
#endif
/* ...or the steps of M minutes: at most one such save every M minutes (0: no limit), on boards
 * whose counter is a clock, so that the flash lasts (tp_learn.h's TP_LEARN_SAVE_MINUTES). */
#ifndef TP_DEVICE_SAVE_MINUTES
#define TP_DEVICE_SAVE_MINUTES 120u
#endif

/* Boards whose static RAM cannot hold the arena and the params record (ESP32: its DRAM
 * segment is smaller than the heap) build with TP_DEVICE_BOARD_BUFFERS and point these at
 * buffers of at least the given sizes, 8-byte aligned, before calling tp_device_main(). */
#ifdef TP_DEVICE_BOARD_BUFFERS
extern uint8_t *tp_device_arena;
extern uint8_t *tp_device_record;
extern const uint32_t tp_device_arena_bytes;
extern const uint32_t tp_device_record_bytes;
#endif

#ifndef TP_DEVICE_DEFAULT_ARENA_BYTES
#define TP_DEVICE_DEFAULT_ARENA_BYTES (96u * 1024u)
#endif
#ifndef TP_DEVICE_DEFAULT_PARAMS_BYTES
#define TP_DEVICE_DEFAULT_PARAMS_BYTES (72u * 1024u)
#endif

/* Serve the host until the link closes; returns the exit status (0). */
int tp_device_main(void);

#endif /* TP_DEVICE_H */
