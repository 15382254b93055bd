/*
 * tp_record.h - the params record: a session's trainable parameters as one self-checking block,
 * what the device loop's PULL_PARAMS / PUSH_PARAMS and every application's parameter store
 * (tp_board_store_save) carry:
 *
 *   magic "TPPR" | blob_id u32 | params_len u32 | step u32 | reserved u32 | crc32 u32 | params
 *
 * (little-endian; TP_RECORD_HEADER bytes of header, the CRC over the first 20 header bytes and
 * then the params). The params follow the header in the same buffer: bind the session's params
 * region at record + TP_RECORD_HEADER, and a record is ready to send or save once sealed. A
 * record of another blob (blob_id or params_len differ) is never taken, so parameters never
 * land in the wrong model.
 */
#ifndef TP_RECORD_H
#define TP_RECORD_H

#include <stdint.h>

#include "tinyprop.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TP_RECORD_MAGIC 0x52505054u /* "TPPR" */
#define TP_RECORD_HEADER 24u

/* Bytes of the session's record: the header and its params region. */
uint32_t tp_record_bytes(const tp_session *s);

/* Write the header before the session's params (record + TP_RECORD_HEADER): its blob, size,
 * step counter and the CRC of it all. */
void tp_record_seal(const tp_session *s, uint8_t *record);

/* Whether a record header (TP_RECORD_HEADER bytes) is the session's blob's: TP_OK, or
 * TP_ERR_RECORD_MISMATCH with *why naming the first field that differs. */
tp_status tp_record_match(const tp_session *s, const uint8_t *header, const char **why);

/* A record of n bytes loaded into the session's record buffer (record + TP_RECORD_HEADER is
 * its params region): TP_OK when it is this blob's and intact, and the session's step counter
 * is then the record's; else TP_ERR_RECORD_MISMATCH with *why (another blob, another size, a
 * CRC mismatch: a torn save), and the caller restores the blob's params (tp_reset_params). */
tp_status tp_record_restore(tp_session *s, const uint8_t *record, uint32_t n, const char **why);

/* PULL_PARAMS of the record at `record`: the chunk of at most `max` bytes from `offset` (the
 * header sealed first when it starts at 0) in *n. TP_ERR_BAD_OFFSET past the end. */
tp_status tp_record_chunk(const tp_session *s, uint8_t *record, uint32_t offset, uint32_t max,
                          uint32_t *n);

#ifdef __cplusplus
}
#endif
#endif /* TP_RECORD_H */
