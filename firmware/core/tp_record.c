/* tp_record.c - the params record (tp_record.h). */
#include "tp_record.h"
#include "tinyprop.h"

#include "tp_le.h"

static uint32_t record_crc(const tp_session *s, const uint8_t *record)
{
    uint32_t crc = tp_crc32(0, record, TP_RECORD_HEADER - 4u);
    return tp_crc32(crc, record + TP_RECORD_HEADER, s->b.req.params);
}

uint32_t tp_record_bytes(const tp_session *s)
{
    return TP_RECORD_HEADER + s->b.req.params;
}

void tp_record_seal(const tp_session *s, uint8_t *record)
{
    tp_wr_u32(record, TP_RECORD_MAGIC);
    tp_wr_u32(record + 4, s->b.req.blob_id);
    tp_wr_u32(record + 8, s->b.req.params);
    tp_wr_u32(record + 12, s->step);
    tp_wr_u32(record + 16, 0u);
    tp_wr_u32(record + 20, record_crc(s, record));
}

tp_status tp_record_match(const tp_session *s, const uint8_t *header, const char **why)
{
    if (tp_rd_u32(header) != TP_RECORD_MAGIC) {
        *why = "not a params record (bad magic)";
    } else if (tp_rd_u32(header + 4) != s->b.req.blob_id) {
        *why = "params of another blob (blob id differs)";
    } else if (tp_rd_u32(header + 8) != s->b.req.params) {
        *why = "params size differs from this blob's";
    } else {
        return TP_OK;
    }
    return TP_ERR_RECORD_MISMATCH;
}

tp_status tp_record_restore(tp_session *s, const uint8_t *record, uint32_t n, const char **why)
{
    if (n < TP_RECORD_HEADER) {
        *why = "not a params record (shorter than its header)";
        return TP_ERR_RECORD_MISMATCH;
    }
    if (tp_record_match(s, record, why) != TP_OK) {
        return TP_ERR_RECORD_MISMATCH;
    }
    if (n != tp_record_bytes(s)) {
        *why = "params size differs from this blob's";
        return TP_ERR_RECORD_MISMATCH;
    }
    if (tp_rd_u32(record + 20) != record_crc(s, record)) {
        *why = "CRC mismatch (a torn save)";
        return TP_ERR_RECORD_MISMATCH;
    }
    tp_set_step(s, tp_rd_u32(record + 12));
    return TP_OK;
}

tp_status tp_record_chunk(const tp_session *s, uint8_t *record, uint32_t offset, uint32_t max,
                          uint32_t *n)
{
    uint32_t total = tp_record_bytes(s);
    if (offset > total) {
        return TP_ERR_BAD_OFFSET;
    }
    if (offset == 0u) {
        tp_record_seal(s, record);
    }
    *n = total - offset < max ? total - offset : max;
    return TP_OK;
}
