/* tp_status.c - the names and messages of tp_status.h's table. */
#include "tinyprop.h"

const char *tp_status_name(tp_status st)
{
    switch (st) {
#define TP_STATUS_NAME_(name, code, kind, message) \
    case name:                                     \
        return #name;
        TP_STATUS_TABLE(TP_STATUS_NAME_)
#undef TP_STATUS_NAME_
    }
    return "TP_ERR_UNKNOWN";
}

const char *tp_status_message(tp_status st)
{
    switch (st) {
#define TP_STATUS_MESSAGE_(name, code, kind, message) \
    case name:                                        \
        return message;
        TP_STATUS_TABLE(TP_STATUS_MESSAGE_)
#undef TP_STATUS_MESSAGE_
    }
    return "a status this firmware does not know: use the same tinyprop on host and firmware";
}
