/*
 * store_campaign.c - the parameter store (firmware/core/tp_store.c) on a simulated NOR flash,
 * with the power cut at every erase and program operation of a save. Built against the core by
 * tinyprop.faults.store (the figures) and tests/test_store.py.
 *
 * The flash: erased bytes read 0xFF, programming only clears bits (the simulator counts any
 * program of a word that is not erased, or not whole words inside one page: the store must do
 * neither), a page erase sets a whole page. Every page erase and every word programmed is one
 * operation. A power cut before operation c leaves operations 1..c-1 done; a torn cut leaves
 * operation c half done as well: a word with a random subset of its bits cleared, or a page
 * erased in part (its first bytes) with random bits set in the rest.
 *
 *   store_campaign campaign BLOB INPUTS LABELS PAGE_BYTES WORD_BYTES PAGES SAVES STEPS STRIDE
 *                  TEARS LR SEED
 *     A real params record (the blob's session, trained on INPUTS/LABELS: raw int8 samples and
 *     one byte a label) saved SAVES times, STEPS training steps apart, into a blank region of
 *     PAGES pages. For each save, a cut at every erase and at every STRIDE-th word program (and
 *     at each of the last 64 operations, the header's), once clean and TEARS times torn; after
 *     each, a reboot loads: it must be exactly the record saved before (or nothing, before the
 *     first save) or the new one; the loaded record restored into the session and one training
 *     step taken must give the parameters of the unbroken run; a save made then must load.
 *     Prints one JSON object of counts.
 *   store_campaign policy EVERY MIN_SECONDS EVENT...
 *     tp_save_policy over a script of events: "T" a labelled step at T seconds, "sT" a save on
 *     request at T. Prints, for each labelled step, 1 (save now: the caller saves) or 0.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tinyprop.h"
#include "tp_record.h"
#include "tp_store.h"

/* ---- the NOR flash ---- */

#define MAX_OPS (1u << 20) /* operations of one save: a 4 MB record in 4-byte words */

typedef struct {
    uint8_t *mem;
    uint32_t page_bytes, word_bytes, pages;
    uint64_t ops;        /* erases and word programs done (or attempted, the cut one) */
    uint64_t cut_at;     /* the operation the power fails at (0: never) */
    int tear;            /* that operation is left half done */
    int off;             /* the power is off: every operation fails */
    uint64_t rng;        /* the tears' bits */
    uint64_t erases;     /* page erases completed */
    uint64_t violations; /* programs of unerased or partial words */
    int log;             /* an unbroken save: mark its erases in erase_at, count the wear */
    uint8_t erase_at[MAX_OPS + 1u]; /* operation k was a page erase */
    uint32_t *wear;                 /* erases of each page over the unbroken saves */
} nor_flash;

static uint64_t next_random(uint64_t *state) /* splitmix64 */
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

/* Whether the operation about to run is the one the power fails at (it is then counted). */
static int power_fails(nor_flash *nor)
{
    if (nor->off) {
        return 1;
    }
    nor->ops++;
    if (nor->ops == nor->cut_at) {
        nor->off = 1;
        return 1;
    }
    return 0;
}

static int nor_erase(void *ctx, uint32_t page)
{
    nor_flash *nor = ctx;
    uint8_t *p = nor->mem + (size_t)page * nor->page_bytes;
    if (page >= nor->pages) {
        nor->violations++;
        return -1;
    }
    if (power_fails(nor)) {
        if (nor->tear && nor->ops == nor->cut_at) { /* erased up to a point, bits set beyond */
            uint32_t done = (uint32_t)(next_random(&nor->rng) % (nor->page_bytes + 1u));
            memset(p, 0xFF, done);
            for (uint32_t i = done; i < nor->page_bytes; i++) {
                p[i] |= (uint8_t)next_random(&nor->rng);
            }
        }
        return -1;
    }
    memset(p, 0xFF, nor->page_bytes);
    nor->erases++;
    if (nor->log) {
        nor->erase_at[nor->ops] = 1u;
        nor->wear[page]++;
    }
    return 0;
}

static int nor_program(void *ctx, uint32_t offset, const uint8_t *src, uint32_t n)
{
    nor_flash *nor = ctx;
    uint32_t w = nor->word_bytes;
    if (offset % w != 0u || n % w != 0u || offset / nor->page_bytes >= nor->pages ||
        offset % nor->page_bytes + n > nor->page_bytes) {
        nor->violations++;
        return -1;
    }
    for (uint32_t at = 0; at < n; at += w) {
        uint8_t *word = nor->mem + offset + at;
        for (uint32_t i = 0; i < w; i++) {
            nor->violations += word[i] != 0xFFu;
        }
        if (power_fails(nor)) {
            if (nor->tear && nor->ops == nor->cut_at) { /* some of its bits cleared */
                for (uint32_t i = 0; i < w; i++) {
                    word[i] &= (uint8_t)(src[at + i] | next_random(&nor->rng));
                }
            }
            return -1;
        }
        for (uint32_t i = 0; i < w; i++) {
            word[i] &= src[at + i];
        }
    }
    return 0;
}

static int nor_read(void *ctx, uint32_t offset, uint8_t *dst, uint32_t n)
{
    nor_flash *nor = ctx;
    if (offset > nor->pages * nor->page_bytes || n > nor->pages * nor->page_bytes - offset) {
        nor->violations++;
        return -1;
    }
    memcpy(dst, nor->mem + offset, n);
    return 0;
}

/* ---- the training run ---- */

static uint8_t *read_file(const char *path, uint32_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *data = NULL;
    long size;
    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) != 0 || (data = malloc((size_t)size + 1u)) == NULL ||
        fread(data, 1, (size_t)size, f) != (size_t)size) {
        fprintf(stderr, "store_campaign: cannot read %s\n", path);
        exit(2);
    }
    fclose(f);
    *len = (uint32_t)size;
    return data;
}

static void *zalloc(size_t n)
{
    void *p = malloc(n > 0u ? n : 1u); /* aligned for any type: TP_MEMORY_ALIGN holds */
    if (p == NULL) {
        fprintf(stderr, "store_campaign: out of memory\n");
        exit(2);
    }
    memset(p, 0, n);
    return p;
}

typedef struct {
    tp_session s;
    tp_hparams hp;
    uint8_t *record; /* the params record; the session's params behind its header */
    uint32_t record_bytes;
    const int8_t *inputs;
    const uint8_t *labels;
    uint32_t samples, input_bytes;
} trainer;

static void fail(const char *what, tp_status st)
{
    fprintf(stderr, "store_campaign: %s: %s\n", what, tp_status_name(st));
    exit(2);
}

/* One training step on the sample of the session's step counter. */
static void train_step(trainer *t)
{
    uint32_t k = t->s.step % t->samples;
    tp_result r;
    tp_status st;
    memcpy(tp_input(&t->s), t->inputs + (size_t)k * t->input_bytes, t->input_bytes);
    st = tp_train_step(&t->s, t->labels[k], &r);
    if (st != TP_OK && st != TP_ERR_NONFINITE) {
        fail("tp_train_step", st);
    }
}

static const uint8_t *params_of(const trainer *t)
{
    return t->record + TP_RECORD_HEADER;
}

/* ---- the campaign ---- */

typedef struct {
    uint64_t cuts, lost, torn, torn_lost, unfinished, resume_mismatches, recovery_failures;
    uint64_t old, new_; /* loads that gave the record saved before, or the new one */
} counts;

/* After a reboot: what loads must be record `older` (0: nothing yet) or `newer`; the session
 * resumed from it and stepped once must equal the unbroken run (after[k]: the parameters one
 * step after save k, or after the first step for k = 0). Returns whether the record held. */
static int check_load(trainer *t, const tp_flash *f, uint8_t **records, uint8_t **after,
                      uint32_t older, uint32_t newer, counts *c)
{
    uint32_t n = 0, got;
    const char *why = "";
    tp_status st = tp_store_load(f, t->record, t->record_bytes, &n);
    if (st == TP_ERR_NOT_FOUND && older == 0u) {
        got = 0u;
        (void)tp_reset_params(&t->s);
        tp_set_step(&t->s, 0u);
    } else if (st == TP_OK && n == t->record_bytes &&
               ((older > 0u && memcmp(t->record, records[older], n) == 0) ||
                memcmp(t->record, records[newer], n) == 0)) {
        got = older > 0u && memcmp(t->record, records[older], n) == 0 ? older : newer;
        if (tp_record_restore(&t->s, t->record, n, &why) != TP_OK) {
            fprintf(stderr, "store_campaign: a saved record does not restore: %s\n", why);
            exit(2);
        }
    } else {
        return 0;
    }
    c->old += got == older;
    c->new_ += got == newer;
    if (tp_set_hparams(&t->s, &t->hp) != TP_OK) {
        fail("tp_set_hparams", TP_ERR_ARG);
    }
    train_step(t);
    c->resume_mismatches += memcmp(params_of(t), after[got], t->s.b.req.params) != 0;
    return 1;
}

static int campaign(char **argv)
{
    uint32_t blob_len, inputs_len, labels_len;
    uint8_t *blob = read_file(argv[0], &blob_len);
    uint8_t *inputs = read_file(argv[1], &inputs_len);
    uint8_t *labels = read_file(argv[2], &labels_len);
    uint32_t page_bytes = (uint32_t)strtoul(argv[3], NULL, 0);
    uint32_t word_bytes = (uint32_t)strtoul(argv[4], NULL, 0);
    uint32_t pages = (uint32_t)strtoul(argv[5], NULL, 0);
    uint32_t saves = (uint32_t)strtoul(argv[6], NULL, 0);
    uint32_t steps = (uint32_t)strtoul(argv[7], NULL, 0);
    uint32_t stride = (uint32_t)strtoul(argv[8], NULL, 0);
    uint32_t tears = (uint32_t)strtoul(argv[9], NULL, 0);
    trainer t;
    tp_requirements req;
    tp_status st;
    size_t region = (size_t)page_bytes * pages;
    uint8_t *base = malloc(region), *saved = malloc(region), **records, **after;
    uint64_t ops_total = 0, erases_total = 0;
    counts c;
    static nor_flash nor; /* static: its operation log is large */
    tp_flash f = {&nor, page_bytes, word_bytes, pages, nor_erase, nor_program, nor_read};
    memset(&c, 0, sizeof c);
    memset(&t, 0, sizeof t);
    t.hp.lr = strtof(argv[10], NULL);
    t.hp.seed = (uint32_t)strtoul(argv[11], NULL, 0);
    if (saves == 0u || steps == 0u || stride == 0u || labels_len == 0u ||
        inputs_len % labels_len != 0u) {
        fprintf(stderr, "store_campaign: SAVES, STEPS, STRIDE > 0; INPUTS a whole number of "
                        "LABELS' samples\n");
        return 2;
    }
    st = tp_blob_requirements(blob, blob_len, &req);
    if (st != TP_OK) {
        fail("the blob", st);
    }
    t.record_bytes = TP_RECORD_HEADER + req.params;
    t.record = zalloc(t.record_bytes);
    uint32_t arena_bytes = req.arena_train > req.arena_infer ? req.arena_train : req.arena_infer;
    st = tp_session_init(&t.s, blob, blob_len, zalloc(arena_bytes), arena_bytes,
                         t.record + TP_RECORD_HEADER, req.params);
    if (st != TP_OK || tp_input(&t.s) == NULL || tp_set_hparams(&t.s, &t.hp) != TP_OK) {
        fail("tp_session_init (a blob that trains, its input whole)", st);
    }
    t.inputs = (const int8_t *)inputs;
    t.labels = labels;
    t.samples = labels_len;
    t.input_bytes = inputs_len / labels_len;

    /* The unbroken run: record k sealed after k * STEPS steps, and the parameters one step
     * after each (after[0]: one step from the blob's). */
    records = calloc(saves + 1u, sizeof *records);
    after = calloc(saves + 1u, sizeof *after);
    for (uint32_t k = 0; k <= saves; k++) {
        if (k > 0u) {
            tp_record_seal(&t.s, t.record);
            records[k] = zalloc(t.record_bytes);
            memcpy(records[k], t.record, t.record_bytes);
        }
        for (uint32_t i = 0; i < steps; i++) {
            train_step(&t);
            if (i == 0u) {
                after[k] = zalloc(req.params);
                memcpy(after[k], params_of(&t), req.params);
            }
        }
    }

    nor.page_bytes = page_bytes;
    nor.word_bytes = word_bytes;
    nor.pages = pages;
    nor.mem = malloc(region);
    nor.wear = calloc(pages, sizeof *nor.wear);
    memset(base, 0xFF, region);
    for (uint32_t k = 1; k <= saves; k++) {
        uint64_t total;
        /* the save unbroken: its operations, which of them erase, and the wear */
        memcpy(nor.mem, base, region);
        nor.ops = nor.cut_at = nor.erases = 0u;
        nor.off = 0;
        nor.log = 1;
        st = tp_store_save(&f, records[k], t.record_bytes);
        nor.log = 0;
        if (st != TP_OK || nor.ops > MAX_OPS) {
            fail("an unbroken save (or more than MAX_OPS operations)", st);
        }
        total = nor.ops;
        ops_total += total;
        erases_total += nor.erases;
        memcpy(saved, nor.mem, region);
        for (uint64_t cut = 1; cut <= total; cut++) {
            if (!nor.erase_at[cut] && cut % stride != 0u && cut + 64u <= total) {
                continue; /* a word program between two the stride takes */
            }
            for (uint32_t mode = 0; mode <= tears; mode++) {
                int held;
                uint32_t n = 0;
                memcpy(nor.mem, base, region);
                nor.ops = 0u;
                nor.cut_at = cut;
                nor.off = 0;
                nor.tear = mode > 0u;
                nor.rng = ((uint64_t)k << 48) ^ (cut << 8) ^ mode;
                c.unfinished += tp_store_save(&f, records[k], t.record_bytes) != TP_OK;
                nor.off = 0; /* the reboot */
                nor.cut_at = 0u;
                held = check_load(&t, &f, records, after, k - 1u, k, &c);
                if (mode == 0u) {
                    c.cuts++;
                    c.lost += !held;
                } else {
                    c.torn++;
                    c.torn_lost += !held;
                }
                /* and the next save after the reboot completes, whatever the cut left */
                c.recovery_failures += tp_store_save(&f, records[k], t.record_bytes) != TP_OK ||
                                       tp_store_load(&f, t.record, t.record_bytes, &n) != TP_OK ||
                                       n != t.record_bytes || memcmp(t.record, records[k], n) != 0;
            }
        }
        memcpy(base, saved, region);
    }
    uint32_t most = 0, least = UINT32_MAX;
    for (uint32_t p = 0; p < pages; p++) {
        most = nor.wear[p] > most ? nor.wear[p] : most;
        least = nor.wear[p] < least ? nor.wear[p] : least;
    }
    printf("{\"record_bytes\": %u, \"pages\": %u, \"pages_per_save\": %u, \"saves\": %u, "
           "\"ops\": %llu, \"erases\": %llu, \"page_erases_max\": %u, \"page_erases_min\": %u, "
           "\"power_cuts\": %llu, \"records_lost\": %llu, \"torn_ops\": %llu, "
           "\"torn_records_lost\": %llu, \"unfinished_saves\": %llu, \"loaded_old\": %llu, "
           "\"loaded_new\": %llu, \"resume_mismatches\": %llu, \"recovery_failures\": %llu, "
           "\"flash_violations\": %llu}\n",
           t.record_bytes, pages, tp_store_pages_per_save(&f, t.record_bytes), saves,
           (unsigned long long)ops_total, (unsigned long long)erases_total, most, least,
           (unsigned long long)c.cuts, (unsigned long long)c.lost, (unsigned long long)c.torn,
           (unsigned long long)c.torn_lost, (unsigned long long)c.unfinished,
           (unsigned long long)c.old, (unsigned long long)c.new_,
           (unsigned long long)c.resume_mismatches, (unsigned long long)c.recovery_failures,
           (unsigned long long)nor.violations);
    return 0;
}

static int policy(int argc, char **argv)
{
    tp_save_policy p;
    tp_save_policy_init(&p, (uint32_t)strtoul(argv[0], NULL, 0),
                        (uint32_t)strtoul(argv[1], NULL, 0));
    for (int i = 2; i < argc; i++) {
        int request = argv[i][0] == 's';
        uint64_t now_us = (uint64_t)strtoull(argv[i] + request, NULL, 0) * 1000000u;
        if (request) {
            tp_save_policy_saved(&p, now_us);
        } else {
            int save = tp_save_policy_step(&p, now_us);
            printf("%d", save);
            if (save) {
                tp_save_policy_saved(&p, now_us);
            }
        }
    }
    printf("\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 14 && strcmp(argv[1], "campaign") == 0) {
        return campaign(argv + 2);
    }
    if (argc >= 4 && strcmp(argv[1], "policy") == 0) {
        return policy(argc - 2, argv + 2);
    }
    fprintf(stderr, "usage: store_campaign campaign BLOB INPUTS LABELS PAGE_BYTES WORD_BYTES "
                    "PAGES SAVES STEPS STRIDE TEARS LR SEED | policy EVERY MIN_SECONDS "
                    "EVENT...\n");
    return 2;
}
