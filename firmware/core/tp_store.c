/* tp_store.c - the parameter store over a flash HAL (tp_store.h; the format: docs/store.md). */
#include "tp_store.h"

#include <string.h>

#include "tp_le.h"

#define FIELDS_BYTES 16u /* sequence, length, record CRC, header CRC */
#define MAX_WORD 32u
#define CHUNK 128u /* bytes read at a time to check a record's CRC */

/* A record's place and header fields. */
typedef struct {
    uint32_t page;  /* its first page */
    uint32_t pages; /* pages its header and record span */
    uint32_t sequence, length, crc;
} slot;

static uint32_t round_up(uint32_t n, uint32_t unit)
{
    return (n + unit - 1u) / unit * unit;
}

static int geometry_ok(const tp_flash *f)
{
    uint32_t w = f != NULL ? f->word_bytes : 0u;
    return (w == 4u || w == 8u || w == 16u || w == 32u) && f->erase != NULL && f->program != NULL &&
           f->read != NULL && f->page_bytes >= 2u * MAX_WORD && f->page_bytes % w == 0u &&
           f->pages >= 2u && f->page_bytes <= UINT32_MAX / f->pages;
}

uint32_t tp_store_header_bytes(uint32_t word_bytes)
{
    return word_bytes + round_up(FIELDS_BYTES, word_bytes);
}

uint32_t tp_store_max_record(const tp_flash *f)
{
    return geometry_ok(f) ? f->pages / 2u * f->page_bytes - tp_store_header_bytes(f->word_bytes)
                          : 0u;
}

uint32_t tp_store_pages_per_save(const tp_flash *f, uint32_t n)
{
    uint64_t bytes = (uint64_t)tp_store_header_bytes(f->word_bytes) + n;
    return (uint32_t)((bytes + f->page_bytes - 1u) / f->page_bytes);
}

/* The region is a ring: offsets wrap at its end. */
static int read_ring(const tp_flash *f, uint32_t offset, uint8_t *dst, uint32_t n)
{
    uint32_t size = f->pages * f->page_bytes;
    for (offset %= size; n > 0; offset = 0) {
        uint32_t run = size - offset < n ? size - offset : n;
        if (f->read(f->ctx, offset, dst, run) != 0) {
            return -1;
        }
        dst += run;
        n -= run;
    }
    return 0;
}

/* Program n bytes (whole words) at a word-aligned offset, a page at a time. */
static int program_ring(const tp_flash *f, uint32_t offset, const uint8_t *src, uint32_t n)
{
    uint32_t size = f->pages * f->page_bytes;
    while (n > 0) {
        uint32_t run;
        offset %= size;
        run = f->page_bytes - offset % f->page_bytes;
        run = run < n ? run : n;
        if (f->program(f->ctx, offset, src, run) != 0) {
            return -1;
        }
        offset += run;
        src += run;
        n -= run;
    }
    return 0;
}

/* The header CRC: the magic, then sequence, length and record CRC as stored. */
static uint32_t header_crc(const uint8_t *fields)
{
    uint8_t magic[4];
    tp_wr_u32(magic, TP_STORE_MAGIC);
    return tp_crc32(tp_crc32(0u, magic, 4u), fields, FIELDS_BYTES - 4u);
}

/* Whether page `page` starts an intact header (1, with *s filled), not (0), or a read failed
 * (-1). Intact: every word of the commit unit is the magic, exactly (a torn program of it
 * clears fewer bits), and the header's CRC holds (a torn erase sets bits at random). */
static int read_header(const tp_flash *f, uint32_t page, slot *s)
{
    uint8_t h[2u * MAX_WORD];
    uint32_t w = f->word_bytes, hb = tp_store_header_bytes(w);
    if (f->read(f->ctx, page * f->page_bytes, h, hb) != 0) {
        return -1;
    }
    for (uint32_t i = 0; i < w; i += 4u) {
        if (tp_rd_u32(h + i) != TP_STORE_MAGIC) {
            return 0;
        }
    }
    if (tp_rd_u32(h + w + 12u) != header_crc(h + w) ||
        tp_rd_u32(h + w + 4u) > tp_store_max_record(f)) {
        return 0;
    }
    s->page = page;
    s->sequence = tp_rd_u32(h + w);
    s->length = tp_rd_u32(h + w + 4u);
    s->crc = tp_rd_u32(h + w + 8u);
    s->pages = tp_store_pages_per_save(f, s->length);
    return 1;
}

/* Whether the record behind an intact header matches its CRC (1), not (0), read failed (-1). */
static int record_intact(const tp_flash *f, const slot *s)
{
    uint8_t chunk[CHUNK];
    uint32_t crc = 0u, offset = s->page * f->page_bytes + tp_store_header_bytes(f->word_bytes);
    for (uint32_t done = 0; done < s->length;) {
        uint32_t n = s->length - done < CHUNK ? s->length - done : CHUNK;
        if (read_ring(f, offset + done, chunk, n) != 0) {
            return -1;
        }
        crc = tp_crc32(crc, chunk, n);
        done += n;
    }
    return crc == s->crc;
}

/* The newest intact record into *newest: 1 found, 0 none, -1 a read failed. Sequence numbers
 * compare as serial numbers, so they may wrap. */
static int find_newest(const tp_flash *f, slot *newest)
{
    int found = 0;
    for (uint32_t page = 0; page < f->pages; page++) {
        slot s;
        int st = read_header(f, page, &s);
        if (st == 1 && (!found || (int32_t)(s.sequence - newest->sequence) > 0)) {
            st = record_intact(f, &s);
            if (st == 1) {
                *newest = s;
                found = 1;
            }
        }
        if (st < 0) {
            return -1;
        }
    }
    return found;
}

/* Erase the pages after the newest record, program the record, then the header's fields, and
 * the commit unit last: until that last program completes, no intact header names the new
 * record, and the newest record's pages are never touched. */
tp_status tp_store_save(const tp_flash *f, const uint8_t *src, uint32_t n)
{
    uint8_t h[2u * MAX_WORD], tail[MAX_WORD];
    slot newest;
    uint32_t start = 0u, sequence = 1u, w, hb, base, whole, need;
    int found;
    if (!geometry_ok(f) || (src == NULL && n > 0u)) {
        return TP_ERR_ARG;
    }
    if (n > tp_store_max_record(f)) {
        return TP_ERR_TOO_BIG;
    }
    found = find_newest(f, &newest);
    if (found < 0) {
        return TP_ERR_IO;
    }
    if (found) { /* both at most half the region: they never overlap */
        start = (newest.page + newest.pages) % f->pages;
        sequence = newest.sequence + 1u;
    }
    w = f->word_bytes;
    hb = tp_store_header_bytes(w);
    need = tp_store_pages_per_save(f, n);
    for (uint32_t i = 0; i < need; i++) {
        if (f->erase(f->ctx, (start + i) % f->pages) != 0) {
            return TP_ERR_IO;
        }
    }
    base = start * f->page_bytes;
    whole = n / w * w;
    if (program_ring(f, base + hb, src, whole) != 0) {
        return TP_ERR_IO;
    }
    if (whole < n) { /* the last word, padded with the erased value */
        memset(tail, 0xFF, sizeof tail);
        memcpy(tail, src + whole, n - whole);
        if (program_ring(f, base + hb + whole, tail, w) != 0) {
            return TP_ERR_IO;
        }
    }
    memset(h, 0xFF, sizeof h);
    for (uint32_t i = 0; i < w; i += 4u) {
        tp_wr_u32(h + i, TP_STORE_MAGIC);
    }
    tp_wr_u32(h + w, sequence);
    tp_wr_u32(h + w + 4u, n);
    tp_wr_u32(h + w + 8u, tp_crc32(0u, src, n));
    tp_wr_u32(h + w + 12u, header_crc(h + w));
    if (f->program(f->ctx, base + w, h + w, hb - w) != 0 || f->program(f->ctx, base, h, w) != 0) {
        return TP_ERR_IO;
    }
    return TP_OK;
}

tp_status tp_store_load(const tp_flash *f, uint8_t *dst, uint32_t max, uint32_t *n)
{
    slot newest;
    int found;
    if (!geometry_ok(f) || n == NULL || (dst == NULL && max > 0u)) {
        return TP_ERR_ARG;
    }
    found = find_newest(f, &newest);
    if (found <= 0) {
        return found < 0 ? TP_ERR_IO : TP_ERR_NOT_FOUND;
    }
    *n = newest.length;
    if (newest.length > max) {
        return TP_ERR_TOO_BIG;
    }
    if (read_ring(f, newest.page * f->page_bytes + tp_store_header_bytes(f->word_bytes), dst,
                  newest.length) != 0 ||
        tp_crc32(0u, dst, newest.length) != newest.crc) {
        return TP_ERR_IO;
    }
    return TP_OK;
}

void tp_save_policy_init(tp_save_policy *p, uint32_t every, uint32_t min_seconds)
{
    p->every = every;
    p->min_seconds = min_seconds;
    p->steps = 0u;
    p->last_us = 0u;
    p->saved = 0;
}

int tp_save_policy_step(tp_save_policy *p, uint64_t now_us)
{
    p->steps++;
    if (p->every == 0u || p->steps < p->every) {
        return 0;
    }
    return !p->saved || p->min_seconds == 0u ||
           now_us - p->last_us >= (uint64_t)p->min_seconds * 1000000u;
}

void tp_save_policy_saved(tp_save_policy *p, uint64_t now_us)
{
    p->steps = 0u;
    p->last_us = now_us;
    p->saved = 1;
}
