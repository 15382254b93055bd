/* tp_text.c - text lines without snprintf (tp_text.h). */
#include "tp_text.h"
#include "tinyprop.h"

#include <stddef.h>

void tp_text_init(tp_text *t, char *buf, uint32_t cap)
{
    t->buf = buf;
    t->cap = cap;
    tp_text_clear(t);
}

void tp_text_clear(tp_text *t)
{
    t->len = 0;
    t->buf[0] = '\0';
}

void tp_text_add(tp_text *t, const char *s)
{
    while (s != NULL && *s != '\0' && t->len + 1u < t->cap) {
        t->buf[t->len++] = *s++;
    }
    t->buf[t->len] = '\0';
}

void tp_text_u32(tp_text *t, uint32_t v)
{
    char digits[11];
    uint32_t n = sizeof digits - 1u;
    digits[n] = '\0';
    do {
        digits[--n] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v != 0u);
    tp_text_add(t, digits + n);
}

void tp_text_hex32(tp_text *t, uint32_t v)
{
    static const char hex[] = "0123456789abcdef";
    char digits[9];
    for (int i = 7; i >= 0; --i, v >>= 4) {
        digits[i] = hex[v & 0xFu];
    }
    digits[8] = '\0';
    tp_text_add(t, digits);
}

void tp_text_decimal(tp_text *t, float v)
{
    char frac_digits[6] = ".0000";
    uint32_t whole, frac;
    if (!(v >= 0.0f && v < 4.0e9f)) {
        tp_text_add(t, v != v ? "nan" : "out-of-range");
        return;
    }
    whole = (uint32_t)v;
    frac = (uint32_t)((v - (float)whole) * 10000.0f + 0.5f);
    if (frac >= 10000u) { /* rounded up into the next whole number */
        whole += 1u;
        frac -= 10000u;
    }
    for (uint32_t i = 4u; i > 0u; --i, frac /= 10u) {
        frac_digits[i] = (char)('0' + frac % 10u);
    }
    tp_text_u32(t, whole);
    tp_text_add(t, frac_digits);
}
