/* tp_check.c - the blob loader: every family's checks in order (each may rely on the ones
 * before it), the first refusal returned with its fault. It is the fuzz entry point
 * (tp_blob_requirements). */
#include "tinyprop.h"
#include <string.h>

#include "tp_check.h"

tp_status tp_blob_parse(tp_blob_view *v, const uint8_t *blob, uint32_t len, tp_fault *fault)
{
    tp_status st;
    if (fault != NULL) {
        memset(fault, 0, sizeof *fault);
        fault->record = TP_NO_RECORD;
    }
    st = tp_check_header(v, blob, len, fault);
    if (st == TP_OK) {
        st = tp_check_tensors(v, fault);
    }
    if (st == TP_OK) {
        st = tp_check_ops(v, fault);
    }
    if (st == TP_OK) {
        st = tp_check_labels(v, fault);
    }
    if (st == TP_OK) {
        st = tp_check_tile(v, fault);
    }
    if (st == TP_OK) {
        st = tp_check_train(v, fault);
    }
    if (st == TP_OK) {
        st = tp_check_scratch(v, fault);
    }
    if (st == TP_OK) {
        st = tp_check_inplace(v, fault);
    }
    return st == TP_OK ? tp_check_pairs(v, fault) : st;
}

tp_status tp_blob_check(const uint8_t *blob, uint32_t len, tp_requirements *out, tp_fault *fault)
{
    tp_blob_view v;
    tp_status st;
    if (blob == NULL || out == NULL) {
        return TP_ERR_ARG;
    }
    memset(&v, 0, sizeof v);
    st = tp_blob_parse(&v, blob, len, fault);
    if (st == TP_OK) {
        *out = v.req;
    }
    return st;
}

tp_status tp_blob_requirements(const uint8_t *blob, uint32_t len, tp_requirements *out)
{
    return tp_blob_check(blob, len, out, NULL);
}
