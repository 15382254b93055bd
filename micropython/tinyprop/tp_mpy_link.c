/* tp_mpy_link.c - the frames of the MicroPython binding (tp_mpy_link.h). */
#include "tp_mpy_link.h"

#include <string.h>

#define BOARD_MAX 32u

void tp_mpy_link_init(tp_mpy_link *l, const char *board, uint32_t sram_bytes)
{
    (void)tp_frame_decoder_init(&l->dec, l->rx, sizeof l->rx);
    l->board = board;
    l->sram_bytes = sram_bytes;
}

tp_status tp_mpy_ready(const tp_mpy_link *l, const tp_session *s, uint16_t seq, uint8_t *out,
                       size_t cap, size_t *out_len)
{
    char board[BOARD_MAX + 1u];
    tp_msg_ready m;
    size_t n = 0;
    while (n < BOARD_MAX && l->board[n] != '\0') {
        board[n] = l->board[n];
        n++;
    }
    board[n] = '\0';
    m.sram_bytes = l->sram_bytes;
    m.free_bytes = TP_RAM_UNKNOWN; /* a script owns the heap: not the device loop's to report */
    m.largest_block = TP_RAM_UNKNOWN;
    m.second_block = TP_RAM_UNKNOWN;
    m.arena_bytes = s->arena_len;
    m.blob_id = s->b.req.blob_id;
    m.fw_version = TP_VERSION_NUMBER;
    m.max_payload = (uint16_t)(TP_MPY_RX_BYTES - TP_PROTO_OVERHEAD);
    m.counter_unit = TP_COUNTER_MICROSECONDS;
    m.board = board;
    return tp_proto_encode_ready(out, cap, seq, &m, out_len);
}

int tp_mpy_link_feed(tp_mpy_link *l, const tp_session *s, const uint8_t *data, size_t n,
                     size_t *used, uint8_t *out, size_t cap, size_t *out_len)
{
    tp_frame f;
    tp_status st = tp_frame_decoder_feed(&l->dec, data, n, used, &f);
    *out_len = 0;
    if (st == TP_PROTO_MORE) {
        return 0;
    }
    if (st == TP_OK && f.type == TP_MSG_HELLO) {
        (void)tp_mpy_ready(l, s, f.seq, out, cap, out_len);
        return 1;
    }
    if (st == TP_OK || st == TP_ERR_UNKNOWN_TYPE) {
        /* intact (good CRC): the seq can be answered */
        (void)tp_proto_encode_error(out, cap, f.seq,
                                    st == TP_OK ? TP_ERR_UNSUPPORTED : TP_ERR_UNKNOWN_TYPE,
                                    "a MicroPython script drives this board: it only streams "
                                    "metrics",
                                    out_len);
    }
    /* a frame that could not be read (garbage, cut, too long for rx) is dropped silently: the
     * script's own print() output shares the line and must not draw ERROR frames */
    return 0;
}

tp_status tp_mpy_metric(const tp_session *s, const tp_mpy_call *c, uint8_t *out, size_t cap,
                        size_t *out_len)
{
    tp_msg_metric m;
    uint8_t label = c->train ? (uint8_t)c->r.label : (uint8_t)TP_LABEL_NONE;
    memset(&m, 0, sizeof m);
    m.step = c->train ? c->step : s->step; /* an evaluation reports the steps done so far */
    m.loss = c->train ? c->r.loss : 0.0f;  /* tp_infer computes no loss */
    m.counter = c->us;
    m.arena_peak = c->r.arena_peak;
    m.stack_peak = c->stack_peak;
    m.trainable_bytes = s->params != NULL ? s->b.req.params : 0u;
    m.static_bytes = c->static_bytes;
    m.label = label;
    m.prediction = (uint8_t)c->r.prediction;
    m.correct = c->train ? (uint8_t)(c->r.prediction == c->r.label) : (uint8_t)TP_CORRECT_UNKNOWN;
    m.flags = (uint8_t)((c->st == TP_ERR_NONFINITE || c->r.skipped ? TP_METRIC_FLAG_SKIPPED : 0u) |
                        (c->train ? 0u : TP_METRIC_FLAG_EVAL));
    return tp_proto_encode_metric(out, cap, 0u, &m, out_len);
}
