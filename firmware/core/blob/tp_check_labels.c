/* tp_check_labels.c - LABL, the class names: after its header, n_labels names, each UTF-8 and
 * NUL-terminated, one a logit, and nothing after them (so tp_class_name may walk them). */
#include "tinyprop.h"
#include "tp_check.h"

tp_status tp_check_labels(const tp_blob_view *v, tp_fault *f)
{
    uint32_t len, n_labels, k, at = TP_LABL_HDR_BYTES, start;
    const uint8_t *labels = tp_blob_section(v, "LABL", &len);
    if (labels == NULL) {
        return TP_OK;
    }
    if (len < TP_LABL_HDR_BYTES || tp_rd_u16(labels + TP_LABL_HDR_RESERVED) != 0u ||
        tp_rd_u16(labels + TP_LABL_HDR_N_LABELS) != v->req.n_classes) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, LABELS_COUNT, LABL, TP_NO_RECORD,
                         LABL_HDR_N_LABELS);
    }
    n_labels = tp_rd_u16(labels + TP_LABL_HDR_N_LABELS);
    for (k = 0; k < n_labels; k++) {
        start = at;
        while (at < len && labels[at] != 0u) {
            at++;
        }
        if (at == len || at == start) {
            return TP_REFUSE(f, TP_ERR_BLOB_INVALID, LABELS_TEXT, LABL, k, NONE);
        }
        at++; /* past the NUL */
    }
    if (at != len) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, LABELS_TRAILING, LABL, TP_NO_RECORD, NONE);
    }
    return TP_OK;
}
