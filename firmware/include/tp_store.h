/*
 * tp_store.h - the parameter store: one record (a params record, or any bytes) kept in a region
 * of NOR flash so that a power cut at any instant of a save leaves either the record saved
 * before or the new one, never a mix (docs/store.md: the format and why the order holds).
 *
 * The region is a ring of pages. A save writes the record after the newest intact one, wrapping
 * at the region's end, so every page is erased in turn (wear spread over the whole region), and
 * never touches the newest record's pages: its erases and programs go to pages of older records
 * only. A board gives the store its flash through tp_flash: erase a page, program words, read.
 */
#ifndef TP_STORE_H
#define TP_STORE_H

#include <stdint.h>

#include "tinyprop.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A flash region of `pages` pages of `page_bytes`, programmed in words of `word_bytes` (4 on
 * the nRF52840; 16 on the ESP32, the unit flash encryption writes). Offsets are bytes from the
 * region's start. Each function returns 0 on success, anything else on failure. */
typedef struct {
    void *ctx;
    uint32_t page_bytes; /* the erase unit: a multiple of word_bytes, at least 64 */
    uint32_t word_bytes; /* the program unit: 4, 8, 16 or 32 */
    uint32_t pages;      /* at least 2 */
    /* Set every byte of page `page` to 0xFF. */
    int (*erase)(void *ctx, uint32_t page);
    /* Program n bytes at `offset` (both multiples of word_bytes, inside one page, erased). */
    int (*program)(void *ctx, uint32_t offset, const uint8_t *src, uint32_t n);
    /* Read n bytes at `offset` (any alignment, inside the region). */
    int (*read)(void *ctx, uint32_t offset, uint8_t *dst, uint32_t n);
} tp_flash;

/* The store's header before each record: a commit word (programmed last) and the record's
 * sequence number, length, CRC and the header's own CRC. */
#define TP_STORE_MAGIC 0x54535054u /* "TPST" */

/* Bytes of the store's header on flash with words of `word_bytes`. */
uint32_t tp_store_header_bytes(uint32_t word_bytes);

/* Pages a save of an n-byte record erases (its header and record, rounded up to pages). */
uint32_t tp_store_pages_per_save(const tp_flash *f, uint32_t n);

/* The largest record the region keeps: two must fit side by side, the newest and the one being
 * written. 0 when the geometry is not one the store takes. */
uint32_t tp_store_max_record(const tp_flash *f);

/* Save n bytes as the newest record. TP_OK; TP_ERR_TOO_BIG past tp_store_max_record;
 * TP_ERR_ARG for a geometry the store does not take or src NULL with n > 0; TP_ERR_IO when the
 * flash refused an erase or program (the record saved before is still the one loaded). */
tp_status tp_store_save(const tp_flash *f, const uint8_t *src, uint32_t n);

/* Load the newest intact record into dst (capacity max), its length into *n. TP_OK;
 * TP_ERR_NOT_FOUND when no intact record is stored; TP_ERR_TOO_BIG when it exceeds max (*n is
 * still its length); TP_ERR_ARG; TP_ERR_IO when a read failed. */
tp_status tp_store_load(const tp_flash *f, uint8_t *dst, uint32_t max, uint32_t *n);

/* ---- when to save: every N labelled steps, at most once every M seconds, and on request ---- */

typedef struct {
    uint32_t every;       /* labelled steps between saves (0: only on request) */
    uint32_t min_seconds; /* at least this long between two automatic saves (0: no limit) */
    uint32_t steps;       /* labelled steps since the last save */
    uint64_t last_us;     /* the clock at the last save */
    int saved;            /* a save was made since boot (last_us holds its time) */
} tp_save_policy;

/* A policy saving every `every` labelled steps, at most once every `min_seconds`. */
void tp_save_policy_init(tp_save_policy *p, uint32_t every, uint32_t min_seconds);

/* One more labelled step at time now_us (microseconds of a monotonic clock; a board with none
 * gives min_seconds 0): whether to save now. A step the time limit holds back still counts: the
 * save comes with the first step after the limit. The first save of a boot is not held back,
 * since nothing tells when the last one was: a board reset every few minutes saves that often. */
int tp_save_policy_step(tp_save_policy *p, uint64_t now_us);

/* A save was made at now_us (by the policy, on request or at the end): count from here. */
void tp_save_policy_saved(tp_save_policy *p, uint64_t now_us);

#ifdef __cplusplus
}
#endif
#endif /* TP_STORE_H */
