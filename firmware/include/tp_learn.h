/*
 * tp_learn.h - the learn application (firmware/apps/learn/learn.c): the board learns from its
 * own camera with no host. Each frame: capture (tp_board_camera_read), fit to the model's
 * input (tp_image.h, the host's rule), infer, show the prediction (tp_board_show, a text line
 * or a METRIC frame); when a label arrives for it (tp_board_label: a button, a key, a script;
 * or the host's LABEL), one training step on that frame, run in slices (tp_train_continue)
 * with tp_board_yield between them, then optionally steps on a few recent labelled frames
 * (the replay buffer); the parameters saved to the board's store every TP_LEARN_SAVE_EVERY
 * labelled steps, at most every TP_LEARN_SAVE_MINUTES (tp_store.h's tp_save_policy), and
 * restored at boot, so a power cycle keeps what it learned.
 *
 * Output: text lines on the link (a serial monitor) until the host says HELLO; from then on
 * protocol frames (docs/protocol.md "The learn application"). The configuration is fixed at
 * build time: the macros below, or a header named by TP_LEARN_CONFIG (what `tinyprop learn`
 * writes), which may define any of them.
 */
#ifndef TP_LEARN_H
#define TP_LEARN_H

#include <stdint.h>

#ifdef TP_LEARN_CONFIG
#include TP_LEARN_CONFIG
#endif

#ifndef TP_LEARN_LR
#define TP_LEARN_LR 0.005f /* plain SGD, the demo's rate */
#endif
#ifndef TP_LEARN_SEED
#define TP_LEARN_SEED 0u /* the stochastic rounding's */
#endif
/* Save the parameters after every N-th labelled step (0: only at the end of a virtual camera's
 * frames and on the host's SAVE_PARAMS)... */
#ifndef TP_LEARN_SAVE_EVERY
#define TP_LEARN_SAVE_EVERY 10u
#endif
/* ...but at most once every M minutes (0: no limit), on boards whose counter is a clock
 * (microseconds; the emulated boards count instructions and have no limit): saving every few
 * steps would wear a board's flash out in weeks; 120 minutes keeps the Nano 33 BLE's store
 * 5.8 to 6.8 years under continuous learning (docs/boards.md "Wear"). A step held back counts:
 * the save comes with the first labelled step after the limit. */
#ifndef TP_LEARN_SAVE_MINUTES
#define TP_LEARN_SAVE_MINUTES 120u
#endif
/* Recent labelled frames kept (as the model's int8 inputs) and trained on again: after each
 * labelled frame's step, one step on each kept frame (oldest first), then the new frame is
 * kept, the oldest dropped. 0: none (online learning only). Each costs the input's bytes. */
#ifndef TP_LEARN_REPLAY
#define TP_LEARN_REPLAY 0u
#endif
/* The camera mode asked for (all 0: the board's own choice, tp_board_camera_open). */
#ifndef TP_LEARN_CAMERA_WIDTH
#define TP_LEARN_CAMERA_WIDTH 0u
#endif
#ifndef TP_LEARN_CAMERA_HEIGHT
#define TP_LEARN_CAMERA_HEIGHT 0u
#endif
#ifndef TP_LEARN_CAMERA_FORMAT
#define TP_LEARN_CAMERA_FORMAT 0u
#endif
/* The frame buffer: the largest frame the camera may deliver (default: QCIF in RGB565, which
 * holds every mode tinyprop learn plays). */
#ifndef TP_LEARN_FRAME_BYTES
#define TP_LEARN_FRAME_BYTES (176u * 144u * 2u)
#endif
/* Work units of one tp_train_continue call between two tp_board_yield calls. */
#ifndef TP_LEARN_SLICE
#define TP_LEARN_SLICE 8u
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Boards whose static RAM cannot hold the arena, the params record and the frame (ESP32) build
 * with TP_LEARN_BOARD_BUFFERS and point these at buffers of at least the given sizes, 8-byte
 * aligned, before calling tp_learn_main(). */
#ifdef TP_LEARN_BOARD_BUFFERS
extern uint8_t *tp_learn_arena;
extern uint8_t *tp_learn_record;
extern uint8_t *tp_learn_frame;
extern const uint32_t tp_learn_arena_bytes;
extern const uint32_t tp_learn_record_bytes;
extern const uint32_t tp_learn_frame_bytes;
#endif

/* Bring the board up and learn until a virtual camera's frames run out (then save and return
 * 0) or forever; a nonzero return is a tp_status that stopped it at boot. */
int tp_learn_main(void);

#ifdef __cplusplus
}
#endif
#endif /* TP_LEARN_H */
