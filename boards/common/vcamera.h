/*
 * vcamera.h - the virtual camera and label script of the boards that read host files (qemu-m4
 * and rv32-virt through semihosting, host through POSIX): tp_board_camera_open/_read and
 * tp_board_label (tp_board.h) playing what `tinyprop learn` (tinyprop.learn.camera) writes into
 * the board's working directory:
 *
 *   tinyprop.camera  "TPCM" | width u16 | height u16 | format u8 | flags u8 | reserved u16 |
 *                    count u32 | count frames of width x height pixels (tp_image_format), rows
 *                    packed; all little-endian. flags: TP_CAMERA_WAIT_HOST, and
 *                    TP_VCAMERA_LIVE: the host is still adding frames at its pace (a person
 *                    labels them as they come): a read waits until `count` passes it, or
 *                    until the host sets TP_VCAMERA_DONE.
 *   tinyprop.labels  optional: count bytes, frame i's class index or 0xFF for no label.
 *
 * The board implements the two file calls below on its own file access; vcamera.c the rest.
 */
#ifndef TP_VCAMERA_H
#define TP_VCAMERA_H

#include <stdint.h>

#define TP_VCAMERA_FILE "tinyprop.camera"
#define TP_VLABELS_FILE "tinyprop.labels"
#define TP_VCAMERA_MAGIC 0x4D435054u /* "TPCM" */
#define TP_VCAMERA_HEADER 16u
#define TP_VCAMERA_LIVE 0x4u
#define TP_VCAMERA_DONE 0x8u

/* Open `name` (relative to the working directory) as file `slot` (0: the camera, 1: the labels)
 * for reads, closing what the slot had. Returns its size (>= 0) or a negative tp_board status
 * (TP_BOARD_ERR_NOT_FOUND when there is no such file). */
int32_t tp_vfile_open(uint32_t slot, const char *name);

/* Read n bytes at offset of file `slot`: the count read (< n only at the end) or a negative
 * status. */
int32_t tp_vfile_read(uint32_t slot, uint32_t offset, uint8_t *dst, uint32_t n);

#endif /* TP_VCAMERA_H */
