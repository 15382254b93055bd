/* tp_fault.c - a refusal's fault: recorded by the check that refuses (tp_refuse), and written
 * as one line naming the status, where, what was wrong and the check (tp_fault_text). */
#include "tinyprop.h"
#include "tp_check.h"

static const char *const check_ids[TP_CHECK_COUNT] = {
#define TP_CHECK_NAME(id, text) #id,
    TP_CHECKS(TP_CHECK_NAME)
#undef TP_CHECK_NAME
};

static const char *const check_texts[TP_CHECK_COUNT] = {
#define TP_CHECK_TEXT(id, text) text,
    TP_CHECKS(TP_CHECK_TEXT)
#undef TP_CHECK_TEXT
};

static const char *const field_names[TP_FIELD_COUNT] = {TP_BLOB_FIELD_NAMES};

tp_status tp_refuse(tp_fault *fault, tp_status status, uint32_t check, uint32_t section,
                    uint32_t record, uint32_t field, const char *file, uint32_t line)
{
    if (fault != NULL) {
        fault->status = status;
        fault->check = (uint16_t)check;
        fault->field = (uint16_t)field;
        fault->section = section;
        fault->record = record;
        fault->file = file;
        fault->line = line;
    }
    return status;
}

/* A line being written into buf[0..n): characters past the end are counted, not written. */
typedef struct {
    char *buf;
    uint32_t n, len;
} line_writer;

static void put_char(line_writer *w, char c)
{
    if (w->len + 1u < w->n) {
        w->buf[w->len] = c;
    }
    w->len++;
}

static void put_str(line_writer *w, const char *s)
{
    while (*s != '\0') {
        put_char(w, *s++);
    }
}

static void put_num(line_writer *w, uint32_t v)
{
    char digits[10];
    uint32_t n = 0;
    do {
        digits[n++] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v != 0u);
    while (n > 0u) {
        put_char(w, digits[--n]);
    }
}

/* What a field-less fault of the header names: the header, the section table or the memory. */
static const char *header_part(const tp_fault *f)
{
    if (f->check >= TP_CHECK_ARENA_SIZE) {
        return "memory";
    }
    return f->check >= TP_CHECK_SECTION_TABLE && f->check <= TP_CHECK_SECTION_RECORDS
               ? "section table"
               : "header";
}

uint32_t tp_fault_text(const tp_fault *f, char *buf, uint32_t n)
{
    line_writer w;
    const char *id;
    uint32_t k;
    w.buf = buf;
    w.n = buf != NULL ? n : 0u;
    w.len = 0u;
    if (f == NULL) {
        return 0u;
    }
    put_str(&w, tp_status_name(f->status));
    if (f->status != TP_OK && f->check > TP_CHECK_NONE && f->check < TP_CHECK_COUNT) {
        put_str(&w, ": ");
        if (f->section == TP_SECTION_HEADER) {
            put_str(&w, f->record != TP_NO_RECORD ? "section table" : header_part(f));
        } else {
            for (k = 0; k < 4u && (char)(f->section >> (8u * k)) != ' '; k++) {
                put_char(&w, (char)(f->section >> (8u * k)));
            }
        }
        if (f->record != TP_NO_RECORD) {
            put_str(&w, " record ");
            put_num(&w, f->record);
        }
        if (f->field > TP_FIELD_NONE && f->field < TP_FIELD_COUNT) {
            put_str(&w, " field ");
            put_str(&w, field_names[f->field]);
        }
        put_str(&w, ": ");
        put_str(&w, check_texts[f->check]);
        put_str(&w, " (check ");
        for (id = check_ids[f->check]; *id != '\0'; id++) { /* the id in lower case */
            put_char(&w, *id >= 'A' && *id <= 'Z' ? (char)(*id - 'A' + 'a') : *id);
        }
        if (f->file != NULL) {
            put_str(&w, ", ");
            put_str(&w, f->file);
            put_char(&w, ':');
            put_num(&w, f->line);
        }
        put_char(&w, ')');
    }
    if (w.n > 0u) {
        w.buf[w.len < w.n ? w.len : w.n - 1u] = '\0';
    }
    return w.len;
}
