/*
 * tp_mpy_link.h - the frames the MicroPython binding exchanges with the host monitor
 * (docs/protocol.md), in plain C: modtinyprop.c does the stream I/O, this file decides the
 * bytes, so a host test builds the same code without MicroPython (tests/test_micropython.py).
 *
 * The binding only streams: it answers HELLO with READY (what `tinyprop monitor PORT` waits
 * for), sends METRIC after each step and LOG on request, and answers any other request with
 * ERROR UNSUPPORTED (the script, not the host, drives training).
 */
#ifndef TP_MPY_LINK_H
#define TP_MPY_LINK_H

#include <stddef.h>
#include <stdint.h>

#include "tinyprop.h"
#include "tp_proto.h"

/* Receive buffer: a HELLO body is 9 bytes; longer requests only need their seq for the ERROR
 * answer, and a frame that does not fit is dropped (the host then times out and says so). */
#define TP_MPY_RX_BYTES 32u
/* Transmit buffer: READY with a board name of up to 32 bytes, METRIC, ERROR, a LOG line. */
#define TP_MPY_LOG_MAX 120u
#define TP_MPY_TX_BYTES TP_PROTO_WIRE_SIZE(TP_PROTO_OVERHEAD + 2u + TP_MPY_LOG_MAX)

typedef struct {
    tp_frame_decoder dec;
    uint8_t rx[TP_MPY_RX_BYTES];
    const char *board;   /* READY's board name, NUL-terminated, cut to 32 bytes */
    uint32_t sram_bytes; /* READY's SRAM: the memory the script's bars are drawn against */
} tp_mpy_link;

/* One call of the session, as METRIC reports it. */
typedef struct {
    tp_result r;
    tp_status st;  /* TP_OK or TP_ERR_NONFINITE (a skipped update) */
    int train;     /* 1: tp_train_step, 0: tp_infer */
    uint32_t step; /* s->step before the call: the step's 0-based index */
    uint32_t us;   /* duration in microseconds (READY's counter unit) */
    uint32_t stack_peak;
    uint32_t static_bytes;
} tp_mpy_call;

void tp_mpy_link_init(tp_mpy_link *l, const char *board, uint32_t sram_bytes);

/* Consume received bytes until a frame ends or they run out (*used: how many). When the frame
 * needs an answer, it is written to out (cap >= TP_MPY_TX_BYTES) and *out_len is its size,
 * else *out_len is 0. Returns 1 when the frame was a HELLO (answered with READY), else 0. */
int tp_mpy_link_feed(tp_mpy_link *l, const tp_session *s, const uint8_t *data, size_t n,
                     size_t *used, uint8_t *out, size_t cap, size_t *out_len);

/* READY as the answer to a HELLO with seq (0: unsolicited). */
tp_status tp_mpy_ready(const tp_mpy_link *l, const tp_session *s, uint16_t seq, uint8_t *out,
                       size_t cap, size_t *out_len);

/* METRIC (seq 0) for one call of session s. */
tp_status tp_mpy_metric(const tp_session *s, const tp_mpy_call *c, uint8_t *out, size_t cap,
                        size_t *out_len);

#endif /* TP_MPY_LINK_H */
