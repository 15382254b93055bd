/* vcamera.c - see vcamera.h: the virtual camera and the label script on two host files. */
#include "vcamera.h"

#include "tp_board.h"
#include "tp_le.h"

#define SLOT_CAMERA 0u
#define SLOT_LABELS 1u
#define LABEL_NONE 0xFFu

static struct {
    tp_camera_mode mode;
    uint32_t frame_bytes; /* 0: not open */
    uint32_t count;       /* frames in the file */
    uint32_t next;        /* the frame the next read returns */
    uint32_t live;        /* the host still adds frames (TP_VCAMERA_LIVE) */
    int32_t labels;       /* bytes in the label file, or -1: none */
} cam;

static uint32_t pixel_bytes(uint32_t format)
{
    return format == TP_IMAGE_GRAY8 ? 1u : format == TP_IMAGE_RGB888 ? 3u : 2u;
}

int tp_board_camera_open(tp_camera_mode *mode)
{
    uint8_t h[TP_VCAMERA_HEADER];
    int32_t size;
    uint32_t frame;
    if (mode == NULL) {
        return TP_BOARD_ERR_ARG;
    }
    cam.frame_bytes = 0;
    size = tp_vfile_open(SLOT_CAMERA, TP_VCAMERA_FILE);
    if (size == TP_BOARD_ERR_NOT_FOUND) {
        return TP_BOARD_ERR_UNSUPPORTED; /* no frames to play: no camera */
    }
    if (size < (int32_t)TP_VCAMERA_HEADER ||
        tp_vfile_read(SLOT_CAMERA, 0, h, TP_VCAMERA_HEADER) != (int32_t)TP_VCAMERA_HEADER ||
        tp_rd_u32(h) != TP_VCAMERA_MAGIC || h[8] > TP_IMAGE_RGB565BE) {
        return size < 0 ? size : TP_BOARD_ERR_IO;
    }
    frame = (uint32_t)tp_rd_u16(h + 4) * tp_rd_u16(h + 6) * pixel_bytes(h[8]);
    cam.count = tp_rd_u32(h + 12);
    cam.live = (h[9] & TP_VCAMERA_LIVE) != 0u;
    if (frame == 0u || ((uint32_t)size - TP_VCAMERA_HEADER) % frame != 0u ||
        (((uint32_t)size - TP_VCAMERA_HEADER) / frame != cam.count && !cam.live)) {
        return TP_BOARD_ERR_IO; /* a torn or foreign file */
    }
    if ((mode->width | mode->height | mode->format) != 0u &&
        (mode->width != tp_rd_u16(h + 4) || mode->height != tp_rd_u16(h + 6) ||
         mode->format != h[8])) {
        return TP_BOARD_ERR_UNSUPPORTED; /* the frames are in another mode */
    }
    cam.mode.width = tp_rd_u16(h + 4);
    cam.mode.height = tp_rd_u16(h + 6);
    cam.mode.format = h[8];
    cam.mode.flags = TP_CAMERA_VIRTUAL | (h[9] & TP_CAMERA_WAIT_HOST);
    cam.frame_bytes = frame;
    cam.next = 0;
    cam.labels = tp_vfile_open(SLOT_LABELS, TP_VLABELS_FILE);
    *mode = cam.mode;
    return TP_BOARD_OK;
}

/* A live camera: wait, as for a sensor, until the host has added frame `next` or is done. */
static int wait_for_frame(void)
{
    uint8_t h[TP_VCAMERA_HEADER];
    while (cam.next >= cam.count) {
        if (tp_vfile_read(SLOT_CAMERA, 0u, h, TP_VCAMERA_HEADER) != (int32_t)TP_VCAMERA_HEADER) {
            return TP_BOARD_ERR_IO;
        }
        cam.count = tp_rd_u32(h + 12);
        if ((h[9] & TP_VCAMERA_DONE) && cam.next >= cam.count) {
            return TP_BOARD_ERR_CLOSED;
        }
    }
    return TP_BOARD_OK;
}

int32_t tp_board_camera_read(uint8_t *dst, uint32_t max)
{
    int st;
    if (cam.frame_bytes == 0u || dst == NULL) {
        return TP_BOARD_ERR_ARG;
    }
    st = cam.live ? wait_for_frame() : TP_BOARD_OK;
    if (st != TP_BOARD_OK) {
        return st;
    }
    if (cam.next >= cam.count) {
        return TP_BOARD_ERR_CLOSED;
    }
    if (cam.frame_bytes > max) {
        return TP_BOARD_ERR_TOO_BIG;
    }
    if (tp_vfile_read(SLOT_CAMERA, TP_VCAMERA_HEADER + cam.next * cam.frame_bytes, dst,
                      cam.frame_bytes) != (int32_t)cam.frame_bytes) {
        return TP_BOARD_ERR_IO;
    }
    cam.next++;
    return (int32_t)cam.frame_bytes;
}

int tp_board_label(int32_t *label)
{
    uint8_t y = LABEL_NONE;
    if (label == NULL) {
        return TP_BOARD_ERR_ARG;
    }
    *label = TP_BOARD_NO_LABEL;
    if (cam.frame_bytes == 0u || cam.next == 0u || cam.labels < (int32_t)cam.next) {
        return TP_BOARD_OK; /* no frame read yet, or no script line for it */
    }
    if (tp_vfile_read(SLOT_LABELS, cam.next - 1u, &y, 1u) != 1) {
        return TP_BOARD_ERR_IO;
    }
    *label = y == LABEL_NONE ? TP_BOARD_NO_LABEL : (int32_t)y;
    return TP_BOARD_OK;
}
