/* tp_check_header.c - the blob header, its CRC and the section table: what every later check
 * stands on. Fills the view's section pointers and the requirements. */
#include "tinyprop.h"
#include <string.h>

#include "tp_check.h"

/* The sections the firmware reads, each at most once: in tp_blob_view order, then LABL and
 * PWIG (which have no view); others are skipped (later minor additions). */
enum { S_TENS, S_OPS, S_DATA, S_NAME, S_TRAN, S_SCRA, S_TILE, S_INPL, S_LABL, S_PWIG, S_COUNT };

static tp_status read_sections(tp_blob_view *v, const uint8_t *blob, uint32_t total, tp_fault *f)
{
    static const char *const ids[S_COUNT] = {"TENS", "OPS ", "DATA", "NAME", "TRAN",
                                             "SCRA", "TILE", "INPL", "LABL", "PWIG"};
    uint32_t n_sec = tp_rd_u16(blob + TP_HDR_N_SECTIONS), body_end = total - TP_CRC_BYTES;
    uint32_t table_end = TP_HDR_BYTES + n_sec * TP_SEC_BYTES, i, k;
    const uint8_t *found[S_COUNT] = {NULL};
    uint32_t sizes[S_COUNT] = {0};
    if (table_end > body_end) {
        return TP_REFUSE(f, TP_ERR_BLOB_BOUNDS, SECTION_TABLE, HEADER, TP_NO_RECORD,
                         HDR_N_SECTIONS);
    }
    for (i = 0; i < n_sec; i++) {
        const uint8_t *rec = blob + TP_HDR_BYTES + i * TP_SEC_BYTES;
        uint32_t off = tp_rd_u32(rec + TP_SEC_OFFSET), size = tp_rd_u32(rec + TP_SEC_SIZE);
        if (off < table_end || !within(off, size, body_end)) {
            return TP_REFUSE(f, TP_ERR_BLOB_BOUNDS, SECTION_BOUNDS, HEADER, i, SEC_OFFSET);
        }
        if (off % TP_SECTION_ALIGN != 0u) {
            return TP_REFUSE(f, TP_ERR_BLOB_INVALID, SECTION_ALIGN, HEADER, i, SEC_OFFSET);
        }
        for (k = 0; k < S_COUNT; k++) {
            if (memcmp(rec + TP_SEC_ID, ids[k], 4) == 0) {
                if (found[k] != NULL) {
                    return TP_REFUSE(f, TP_ERR_BLOB_INVALID, SECTION_TWICE, HEADER, i, SEC_ID);
                }
                found[k] = blob + off;
                sizes[k] = size;
            }
        }
    }
    if (found[S_TENS] == NULL || found[S_OPS] == NULL || found[S_DATA] == NULL) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, SECTION_MISSING, HEADER, TP_NO_RECORD, NONE);
    }
    if (sizes[S_TENS] % TP_TENS_BYTES != 0u || sizes[S_TENS] / TP_TENS_BYTES >= TP_NONE16) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, SECTION_RECORDS, TENS, TP_NO_RECORD, NONE);
    }
    if (sizes[S_OPS] % TP_OPS_BYTES != 0u || sizes[S_OPS] == 0u) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, SECTION_RECORDS, OPS, TP_NO_RECORD, NONE);
    }
    v->tensors = found[S_TENS];
    v->n_tensors = sizes[S_TENS] / TP_TENS_BYTES;
    v->ops = found[S_OPS];
    v->n_ops = sizes[S_OPS] / TP_OPS_BYTES;
    v->data = found[S_DATA];
    v->data_len = sizes[S_DATA];
    v->train = found[S_TRAN]; /* checked last (tp_check_train), against the rest */
    v->train_len = sizes[S_TRAN];
    /* the scratch plan: exactly its header and one record an op (tp_check_scratch) */
    if (found[S_SCRA] != NULL &&
        (sizes[S_SCRA] < TP_SCRA_HDR_BYTES ||
         tp_rd_u16(found[S_SCRA] + TP_SCRA_HDR_N_OPS) != v->n_ops ||
         sizes[S_SCRA] != TP_SCRA_HDR_BYTES + TP_SCRA_OP_BYTES * v->n_ops)) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, SCRATCH_LENGTH, SCRA, TP_NO_RECORD,
                         SCRA_HDR_N_OPS);
    }
    v->scratch = found[S_SCRA];
    /* the tiled stage and the in-place ops: checked last (tp_check_tile, tp_check_inplace) */
    v->tile = found[S_TILE];
    v->tile_len = sizes[S_TILE];
    v->inplace = found[S_INPL];
    v->inplace_len = sizes[S_INPL];
    /* LABL and PWIG: only their duplicates are refused here; they keep no view in the session
     * (no RAM for sections read rarely): tp_check_labels, tp_class_name, tp_check_pairs and
     * tp_pairs_of find them with tp_blob_section */
    return TP_OK;
}

tp_status tp_check_header(tp_blob_view *v, const uint8_t *blob, uint32_t len, tp_fault *f)
{
    uint32_t total;
    tp_status st;
    if (len < 4u) {
        return TP_REFUSE(f, TP_ERR_BLOB_TRUNCATED, TRUNCATED, HEADER, TP_NO_RECORD, NONE);
    }
    if (memcmp(blob + TP_HDR_MAGIC, "TPRB", 4) != 0) {
        return TP_REFUSE(f, TP_ERR_BLOB_MAGIC, MAGIC, HEADER, TP_NO_RECORD, HDR_MAGIC);
    }
    if (len < TP_HDR_BYTES + TP_CRC_BYTES) {
        return TP_REFUSE(f, TP_ERR_BLOB_TRUNCATED, TRUNCATED, HEADER, TP_NO_RECORD, NONE);
    }
    if (tp_rd_u16(blob + TP_HDR_VERSION) != TP_BLOB_VERSION) {
        return TP_REFUSE(f, TP_ERR_BLOB_VERSION, VERSION, HEADER, TP_NO_RECORD, HDR_VERSION);
    }
    if (tp_rd_u16(blob + TP_HDR_HEADER_SIZE) != TP_HDR_BYTES) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, HEADER_SIZE, HEADER, TP_NO_RECORD,
                         HDR_HEADER_SIZE);
    }
    total = tp_rd_u32(blob + TP_HDR_TOTAL_SIZE);
    if (total > len) {
        return TP_REFUSE(f, TP_ERR_BLOB_TRUNCATED, TRUNCATED, HEADER, TP_NO_RECORD, HDR_TOTAL_SIZE);
    }
    if (total != len) {
        return TP_REFUSE(f, TP_ERR_BLOB_SIZE, BLOB_SIZE, HEADER, TP_NO_RECORD, HDR_TOTAL_SIZE);
    }
    if (tp_crc32(0, blob, total - TP_CRC_BYTES) != tp_rd_u32(blob + total - TP_CRC_BYTES)) {
        return TP_REFUSE(f, TP_ERR_BLOB_CRC, CRC, HEADER, TP_NO_RECORD, CRC_CRC);
    }
    st = read_sections(v, blob, total, f);
    if (st != TP_OK) {
        return st;
    }
    v->blob = blob;
    v->blob_len = len;
    v->req.model_id = tp_rd_u32(blob + TP_HDR_MODEL_ID);
    v->req.arena_infer = tp_rd_u32(blob + TP_HDR_ARENA_INFER);
    v->req.arena_train = tp_rd_u32(blob + TP_HDR_ARENA_TRAIN);
    v->req.params = tp_rd_u32(blob + TP_HDR_PARAMS_BYTES);
    v->input = tp_rd_u16(blob + TP_HDR_INPUT);
    v->output = tp_rd_u16(blob + TP_HDR_OUTPUT);
    v->logits = tp_rd_u16(blob + TP_HDR_LOGITS);
    v->req.n_classes = tp_rd_u16(blob + TP_HDR_N_CLASSES);
    v->req.blob_id = tp_rd_u32(blob + total - TP_CRC_BYTES);
    v->req.optimizer = tp_rd_u32(blob + TP_HDR_OPTIMIZER_BYTES);
    if (v->req.arena_infer > 0x7FFFFFFFu) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, ARENA_LIMIT, HEADER, TP_NO_RECORD,
                         HDR_ARENA_INFER);
    }
    /* optimizer state: float32s at the end of the params region, after the parameters (which
     * end 4-aligned), and only with a training program, which says how many (check_train) */
    if (v->req.optimizer > v->req.params || (v->req.optimizer & 3u) != 0u ||
        ((v->req.params - v->req.optimizer) & 3u) != 0u ||
        (v->req.optimizer != 0u && v->train == NULL)) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, OPTIMIZER, HEADER, TP_NO_RECORD,
                         HDR_OPTIMIZER_BYTES);
    }
    return TP_OK;
}
