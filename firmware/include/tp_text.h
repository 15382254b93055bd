/*
 * tp_text.h - text lines built without snprintf (newlib-nano's needs a heap): the lines and
 * LOG/ERROR texts the applications send. Text past the buffer is cut, never overrun; the
 * buffer always holds a NUL-terminated string.
 */
#ifndef TP_TEXT_H
#define TP_TEXT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A line being built in buf (cap >= 1 bytes): len characters, then a NUL. */
typedef struct {
    char *buf;
    uint32_t cap, len;
} tp_text;

/* Start t over on buf (cap bytes): empty. */
void tp_text_init(tp_text *t, char *buf, uint32_t cap);
/* Empty t again. */
void tp_text_clear(tp_text *t);
void tp_text_add(tp_text *t, const char *s); /* s may be NULL: nothing is added */
void tp_text_u32(tp_text *t, uint32_t v);    /* decimal */
void tp_text_hex32(tp_text *t, uint32_t v);  /* 8 lowercase hex digits */
/* A non-negative float with 4 decimals (a loss), for reading; "nan" or "out-of-range" else. */
void tp_text_decimal(tp_text *t, float v);

#ifdef __cplusplus
}
#endif
#endif /* TP_TEXT_H */
