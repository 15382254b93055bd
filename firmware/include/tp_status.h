/*
 * tp_status.h - every status tinyprop reports, in one table: the core's (tinyprop.h), the
 * protocol's and the device loop's (tp_proto.h, tp_device.c) and the board HAL's (tp_board.h).
 *
 * One numbering, in disjoint ranges: 0x00..0x3F the core, 0x40..0x5F the protocol and the
 * device loop, 0x60..0x7F the board HAL (whose functions return minus the code, since their
 * non-negative results are counts). An ERROR frame's code is the status itself, so a status
 * reaches the host as it was (docs/protocol.md). The host reads this file itself
 * (host/tinyprop/status.py, checked against the compiled tp_status_name and tp_status_message
 * by tests/test_status.py), as does the PlatformIO monitor filter: add a status here, never a
 * number elsewhere.
 *
 * Each row: name, code, kind, message. kind says who can fix it: INPUT (what the caller
 * passed: the CLI exits 2), FAULT (the link, the board or a bug: the CLI exits 1), or OK. The
 * message is one line naming what was wrong and what to do; the host prints it with the
 * detail the device or binding adds.
 */
#ifndef TP_STATUS_H
#define TP_STATUS_H

/* The largest learning rate tp_set_hparams takes (a finite guard: the update scales by it). */
#define TP_LR_MAX 1e30f

/* clang-format off */
#define TP_STATUS_TABLE(X)                                                                         \
    X(TP_OK, 0x00, OK, "success")                                                                  \
    /* the blob loader (docs/blob-format.md) */                                                    \
    X(TP_ERR_BLOB_TRUNCATED, 0x01, INPUT,                                                          \
      "the blob is shorter than a header or than the size it declares: copy the whole .tpb "       \
      "again")                                                                                     \
    X(TP_ERR_BLOB_MAGIC, 0x02, INPUT,                                                              \
      "not a tinyprop blob: pass the .tpb written by tinyprop convert")                            \
    X(TP_ERR_BLOB_VERSION, 0x03, INPUT,                                                            \
      "a blob format this firmware does not read: convert it with the tinyprop of the firmware")   \
    X(TP_ERR_BLOB_SIZE, 0x04, INPUT,                                                               \
      "the blob's length differs from its header: copy the whole .tpb again")                      \
    X(TP_ERR_BLOB_CRC, 0x05, INPUT,                                                                \
      "the blob is corrupted (CRC mismatch): copy the .tpb again")                                 \
    X(TP_ERR_BLOB_BOUNDS, 0x06, INPUT,                                                             \
      "a section, tensor or parameter array lies outside its region: convert the model again")     \
    X(TP_ERR_BLOB_INVALID, 0x07, INPUT,                                                            \
      "the blob's fields contradict each other: convert the model again, report a bug if it "      \
      "persists")                                                                                  \
    /* memory */                                                                                   \
    X(TP_ERR_ARENA_TOO_SMALL, 0x08, INPUT,                                                         \
      "the arena is smaller than the blob needs: give it tp_blob_requirements' arena bytes, or "   \
      "convert for a smaller budget")                                                              \
    X(TP_ERR_PARAMS_TOO_SMALL, 0x09, INPUT,                                                        \
      "the params region is smaller than the blob needs: give it tp_blob_requirements' params "    \
      "bytes")                                                                                     \
    /* use */                                                                                      \
    X(TP_ERR_BAD_LABEL, 0x0A, INPUT,                                                               \
      "the label is not one of the model's classes: pass 0 to n_classes - 1")                      \
    X(TP_ERR_BAD_INPUT, 0x0B, INPUT,                                                               \
      "no whole sample to run (none written, a wrong size, or its row source failed): write the"   \
      " whole input tensor first")                                                                 \
    X(TP_ERR_NOT_LOADED, 0x0C, INPUT,                                                              \
      "no blob is bound: bind one with tp_session_init (a board: flash firmware built with the "   \
      "blob)")                                                                                     \
    X(TP_ERR_NONFINITE, 0x0D, INPUT,                                                               \
      "the loss or a gradient was not finite, so the update was skipped: lower the learning "      \
      "rate")                                                                                      \
    X(TP_ERR_NO_TRAIN, 0x0E, INPUT,                                                                \
      "the blob has no training program: convert it with a training plan to train it")             \
    X(TP_ERR_ARG, 0x0F, INPUT,                                                                     \
      "an invalid argument (a null pointer, a buffer moved or resized, an unknown flag or "        \
      "mode): check the call")                                                                     \
    /* hyper-parameters (tp_set_hparams) */                                                        \
    X(TP_ERR_BAD_LR, 0x10, INPUT,                                                                  \
      "the learning rate must be finite, >= 0 and at most 1e30: pass e.g. --lr 0.005")             \
    X(TP_ERR_BAD_MOMENTUM, 0x11, INPUT,                                                            \
      "momentum must be in [0, 1): pass e.g. --momentum 0.9, or 0 for plain SGD")                  \
    X(TP_ERR_NO_OPTIMIZER, 0x12, INPUT,                                                            \
      "momentum needs optimizer state in the blob: convert it with --momentum, or train without"   \
      " momentum")                                                                                 \
    X(TP_ERR_BAD_HP_FLAGS, 0x13, INPUT,                                                            \
      "unknown hyper-parameter flags: pass only TP_HP_NO_QAS")                                     \
    /* a training step in slices (tp_train_begin, tp_train_continue) */                           \
    X(TP_STEP_PENDING, 0x14, OK,                                                                   \
      "the training step has work left: call tp_train_continue again")                             \
    X(TP_ERR_NO_STEP, 0x15, INPUT,                                                                 \
      "no training step is under way (none begun, it ended, or another call on the session "       \
      "abandoned it): begin one with tp_train_begin")                                              \
    /* the protocol (tp_proto.h) */                                                                \
    X(TP_PROTO_MORE, 0x40, OK,                                                                     \
      "the decoder used every byte and no frame is complete yet: feed it more")                    \
    X(TP_ERR_BAD_COBS, 0x41, FAULT,                                                                \
      "a frame's COBS blocks run past its end (line noise): check the link, the host resends")     \
    X(TP_ERR_FRAME_TOO_LONG, 0x42, FAULT,                                                          \
      "a frame larger than the receiver's buffer: send chunks of at most READY's max_payload")     \
    X(TP_ERR_FRAME_TRUNCATED, 0x43, FAULT,                                                         \
      "a frame shorter than its header and CRC, or than its length field (line noise): check "     \
      "the link")                                                                                  \
    X(TP_ERR_LENGTH_MISMATCH, 0x44, FAULT,                                                         \
      "a frame longer than its length field says (line noise): check the link")                    \
    X(TP_ERR_BAD_CRC, 0x45, FAULT,                                                                 \
      "a frame failed its CRC (corrupted on the line): check the cable and the baud rate")         \
    X(TP_ERR_UNKNOWN_TYPE, 0x46, FAULT,                                                            \
      "a message type the receiver does not handle: use the same tinyprop on host and firmware")   \
    X(TP_ERR_BAD_PAYLOAD, 0x47, FAULT,                                                             \
      "a payload of the wrong size or content for its message type: use the same tinyprop on "     \
      "host and firmware")                                                                         \
    X(TP_ERR_NO_SPACE, 0x48, FAULT,                                                                \
      "the frame does not fit the output buffer: give the encoder TP_PROTO_MAX_FRAME bytes")       \
    /* the device loop (tp_device.c) */                                                            \
    X(TP_ERR_BAD_STATE, 0x49, FAULT,                                                               \
      "a request out of order (a params chunk before its header, a bulk sample before "            \
      "BULK_OPEN): send the first part first")                                                     \
    X(TP_ERR_BAD_OFFSET, 0x4A, FAULT,                                                              \
      "an offset or index outside its target (input, params record, bulk file): stay within the"   \
      " sizes READY and ACK gave")                                                                 \
    X(TP_ERR_WRONG_SAMPLE_SIZE, 0x4B, INPUT,                                                       \
      "the sample's bytes differ from the model's input tensor: send the whole input, or a bulk"   \
      " file of label + input records")                                                            \
    X(TP_ERR_RECORD_MISMATCH, 0x4C, INPUT,                                                         \
      "a params record of another blob (its id or size differ): push the params trained with "     \
      "this board's blob")                                                                         \
    /* the board HAL (tp_board.h: its functions return minus these) */                             \
    X(TP_ERR_UNSUPPORTED, 0x60, INPUT,                                                             \
      "this board cannot do it (no host files, no store): use a board that can, e.g. qemu-m4 or"   \
      " host")                                                                                     \
    X(TP_ERR_CLOSED, 0x61, FAULT,                                                                  \
      "the host link is closed: reconnect the board")                                              \
    X(TP_ERR_IO, 0x62, FAULT,                                                                      \
      "the host, file system or store refused the operation: check the board's files and "         \
      "storage")                                                                                   \
    X(TP_ERR_NOT_FOUND, 0x63, INPUT,                                                               \
      "no such file, or nothing stored yet: check the path (relative to the board's working "      \
      "directory)")                                                                                \
    X(TP_ERR_TOO_BIG, 0x64, FAULT,                                                                 \
      "the data is larger than the caller's buffer: give a buffer as large as the stored record")
/* clang-format on */

#endif /* TP_STATUS_H */
