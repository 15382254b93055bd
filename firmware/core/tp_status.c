/* tp_status.c - names of the core's status codes (tinyprop.h). */
#include "tinyprop.h"

const char *tp_status_name(tp_status st)
{
    static const char *const names[] = {
        "TP_OK",
        "TP_ERR_BLOB_TRUNCATED",
        "TP_ERR_BLOB_MAGIC",
        "TP_ERR_BLOB_VERSION",
        "TP_ERR_BLOB_SIZE",
        "TP_ERR_BLOB_CRC",
        "TP_ERR_BLOB_BOUNDS",
        "TP_ERR_BLOB_INVALID",
        "TP_ERR_ARENA_TOO_SMALL",
        "TP_ERR_PARAMS_TOO_SMALL",
        "TP_ERR_BAD_LABEL",
        "TP_ERR_BAD_INPUT",
        "TP_ERR_NOT_LOADED",
        "TP_ERR_NONFINITE",
        "TP_ERR_NO_TRAIN",
        "TP_ERR_ARG",
    };
    unsigned i = (unsigned)st;
    return i < sizeof names / sizeof names[0] ? names[i] : "TP_ERR_UNKNOWN";
}
