/*
 * tp_board.h - the board HAL: the only functions the portable core and the device main loop
 * call to reach the outside world.
 *
 * A board is one folder under boards/<name>/ that implements every function below (startup,
 * link, timer, storage). Functions a board cannot provide return TP_BOARD_ERR_UNSUPPORTED;
 * none of them allocates, and every buffer belongs to the caller.
 *
 * Application entry: the board's startup (reset handler, or main() on a hosted board) sets up
 * the C runtime and calls the application entry chosen at build time (APP_ENTRY in the board
 * Makefile, tp_device_main by default), declared as `int entry(void)`. Its return value is
 * passed to tp_board_exit(). The application calls tp_board_init() before anything else.
 */
#ifndef TP_BOARD_H
#define TP_BOARD_H

#include <stddef.h>
#include <stdint.h>

#include "tinyprop.h"
#include "tp_image.h"

/* Status codes: 0 is success, a failure is minus its tp_status (tp_status.h's board range), as
 * functions that return a count return it as a non-negative value instead of TP_BOARD_OK. */
#define TP_BOARD_OK 0
#define TP_BOARD_ERR_UNSUPPORTED (-(int)TP_ERR_UNSUPPORTED) /* no such facility on this board */
#define TP_BOARD_ERR_CLOSED (-(int)TP_ERR_CLOSED)       /* the host link is closed (end of file) */
#define TP_BOARD_ERR_IO (-(int)TP_ERR_IO)               /* the host or file system refused it */
#define TP_BOARD_ERR_NOT_FOUND (-(int)TP_ERR_NOT_FOUND) /* no such bulk file, or nothing stored */
#define TP_BOARD_ERR_TOO_BIG (-(int)TP_ERR_TOO_BIG)     /* data larger than the caller's buffer */
#define TP_BOARD_ERR_ARG (-(int)TP_ERR_ARG)             /* null pointer, no bulk file open */

/* Exit status a board reports for a CPU fault (MPU violation, stack overflow, bad access):
 * 128 + SIGABRT, the same status a crashed POSIX process gives a shell. */
#define TP_BOARD_FAULT_STATUS 134

/* Bring up the host link (UART, pipe), the cost counter and the storage back ends.
 * Returns TP_BOARD_OK or a negative status. Call once, first. */
int tp_board_init(void);

/* Block until at least one byte arrives from the host, then return what is already available,
 * up to max bytes (max >= 1). Returns the number of bytes read (>= 1), or TP_BOARD_ERR_CLOSED
 * when the link is closed for good, or TP_BOARD_ERR_ARG. */
int tp_board_read(uint8_t *dst, size_t max);

/* Send n bytes to the host; blocks until all are handed to the link.
 * Returns TP_BOARD_OK, TP_BOARD_ERR_CLOSED or TP_BOARD_ERR_IO. */
int tp_board_write(const uint8_t *src, size_t n);

/* Short board name sent in the ready frame, e.g. "qemu-m4" or "host". Static storage. */
const char *tp_board_name(void);

/* Bytes of SRAM the firmware may use in total (.data + .bss + stack + arena); the budget the
 * memory planner must fit, e.g. 262144 on qemu-m4. */
uint32_t tp_board_sram_bytes(void);

/* RAM the application can still give its large buffers (the device loop's arena and params
 * record), in bytes. */
typedef struct {
    uint32_t free_bytes;    /* all of it */
    uint32_t largest_block; /* the largest one buffer can have */
    uint32_t second_block;  /* the largest left for a second buffer once that one is taken */
} tp_board_ram;

/* Fill *ram. Static boards report the RAM no one uses (bare metal: between .bss and the stack
 * guard, from the linker symbols; one region, so the three are equal); the host board standing
 * for a board smaller than its program reports the shortfall wrapped below 0 (modulo 2^32).
 * Boards that allocate the application's buffers from a heap (TP_DEVICE_BOARD_BUFFERS) report
 * the heap as it was just before they did, since after that it is the buffers'. */
void tp_board_free_ram(tp_board_ram *ram);

/* A monotonic cost counter, read before and after a piece of work. Deterministic where the
 * board allows it (qemu-m4: guest instructions, exact to a 40-instruction tick), wall time
 * otherwise. The unit is given by tp_board_counter_unit(). */
uint64_t tp_board_counter(void);

/* Unit of tp_board_counter(): "instructions" or "us". Static storage. */
const char *tp_board_counter_unit(void);

/* Deepest stack use so far in bytes, found by scanning the stack region the startup code
 * painted with a known pattern. 0 if the board cannot paint its stack. */
uint32_t tp_board_stack_peak(void);

/* End the program with the given status (0 = success) as seen by the host: QEMU's exit code
 * through semihosting, the process exit code on POSIX. Never returns. */
void tp_board_exit(int status);

/* Bulk samples: a board that can read host files directly (semihosting, POSIX) opens the file
 * `name` (relative to the board's working directory) for random-access reads, closing any file
 * opened before. Returns its size in bytes (>= 0) or a negative status
 * (TP_BOARD_ERR_UNSUPPORTED on boards with no file access, TP_BOARD_ERR_NOT_FOUND). */
int32_t tp_board_bulk_open(const char *name);

/* Read n bytes at byte offset `offset` of the open bulk file into dst. Returns the number of
 * bytes read (< n only at the end of the file) or a negative status. */
int32_t tp_board_bulk_read(uint32_t offset, uint8_t *dst, uint32_t n);

/* Persistent parameter storage: one opaque record that survives a restart of the board (a file
 * in the working directory on qemu-m4, the path in $TINYPROP_STORE on host). Saving replaces the
 * previous record. The board adds no header: callers that need integrity checks put them in
 * the record. Returns TP_BOARD_OK or a negative status. */
int tp_board_store_save(const uint8_t *src, uint32_t n);

/* Load the stored record into dst (capacity max) and its length into *n. Returns TP_BOARD_OK,
 * TP_BOARD_ERR_NOT_FOUND if nothing was saved, TP_BOARD_ERR_TOO_BIG if the record exceeds max
 * (*n is still set to its length), or another negative status. */
int tp_board_store_load(uint8_t *dst, uint32_t max, uint32_t *n);

/* ---- Camera, labels and long work (the learn application, firmware/apps/learn/) ---- */

/* What a camera delivers: width x height pixels of a tp_image_format, rows packed. */
typedef struct {
    uint32_t width, height, format;
    uint32_t flags; /* TP_CAMERA_* below, set by the board */
} tp_camera_mode;

/* A camera that plays recorded frames (the virtual camera of qemu-m4, rv32-virt and host): its
 * frames run out (TP_BOARD_ERR_CLOSED), and a run over them is repeatable. */
#define TP_CAMERA_VIRTUAL 0x1u
/* Its player asks the application to wait for the host's HELLO before the first frame, so an
 * attached host sees every frame's result. */
#define TP_CAMERA_WAIT_HOST 0x2u

/* Start the camera. *mode holds the wanted width, height and format, or all three 0 for the
 * board's own choice; on success it holds what the camera delivers. Returns TP_BOARD_OK,
 * TP_BOARD_ERR_UNSUPPORTED (no camera on this board, or not in that mode), TP_BOARD_ERR_ARG,
 * or another negative status. */
int tp_board_camera_open(tp_camera_mode *mode);

/* Capture the next frame into dst (capacity max). Returns its size in bytes (width x height x
 * the format's bytes a pixel), TP_BOARD_ERR_CLOSED when a virtual camera has played its last
 * frame, TP_BOARD_ERR_TOO_BIG when a frame exceeds max, TP_BOARD_ERR_ARG when the camera is not
 * open, or another negative status. */
int32_t tp_board_camera_read(uint8_t *dst, uint32_t max);

/* No label for the frame (tp_board_label). */
#define TP_BOARD_NO_LABEL (-1)

/* The label a person (a button press, a key) or a script gives the frame read last: *label is
 * its class index, or TP_BOARD_NO_LABEL. Buttons map their presses to classes as the board's
 * notes say. Returns TP_BOARD_OK, TP_BOARD_ERR_UNSUPPORTED (no label source: labels come from
 * the host only) or another negative status. */
int tp_board_label(int32_t *label);

/* What has already arrived from the host, up to max bytes, without waiting: 0 when nothing has.
 * Returns the count, TP_BOARD_ERR_CLOSED when the link is closed for good, or TP_BOARD_ERR_ARG. */
int tp_board_poll(uint8_t *dst, size_t max);

/* Let the rest of the board run (feed a watchdog, an RTOS tick, BLE, the camera's DMA): called
 * by the applications between slices of a training step (tp_train_continue). May do nothing. */
void tp_board_yield(void);

/* Show a prediction where a person sees it (an LED: on for class 1; a display), or
 * TP_BOARD_NO_LABEL for none. May do nothing. */
void tp_board_show(int32_t prediction);

#endif /* TP_BOARD_H */
