/* test_blob_loader.c - drives the C loader and forward pass over a bundle of blobs, for the
 * sanitizer tests in tests/test_blob.py (built by tinyprop.device.firmware.build_program,
 * ASan+UBSan).
 *
 *   test_blob_loader BUNDLE [INPUT_BYTE]
 *
 * BUNDLE holds records of (uint32 little-endian length, that many bytes). Each blob is copied
 * into a heap block of exactly its length (so a read one byte past it is caught), checked with
 * tp_blob_requirements, and, if accepted, run once with tp_infer on an arena and params region
 * of exactly the requested sizes, the input filled with INPUT_BYTE (default 0). One line a
 * record: "<requirements status> <infer status or -1> <prediction> <arena_peak>".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tinyprop.h"

#define MAX_RUN_BYTES (64u << 20) /* accepted garbage may ask for any arena: run the sane ones */

static int run_one(const uint8_t *blob, uint32_t len, int fill)
{
    tp_requirements req;
    tp_session s;
    tp_result r;
    tp_status st = tp_blob_requirements(blob, len, &req), inf;
    uint8_t *arena, *params;
    memset(&r, 0, sizeof r);
    r.prediction = -1;
    if (st != TP_OK || req.arena_infer > MAX_RUN_BYTES || req.params > MAX_RUN_BYTES) {
        printf("%d -1 -1 0\n", (int)st);
        return 0;
    }
    arena = malloc(req.arena_infer ? req.arena_infer : 1u);
    params = req.params ? malloc(req.params) : NULL;
    if (arena == NULL || (req.params && params == NULL)) {
        return 1;
    }
    inf = tp_session_init(&s, blob, len, arena, req.arena_infer, NULL, 0);
    if (inf == TP_OK && tp_input(&s) != NULL) { /* (a row-band input: not run here) */
        memset(tp_input(&s), fill, req.input_bytes);
        inf = tp_infer(&s, &r);
    }
    printf("%d %d %d %u\n", (int)st, (int)inf, (int)r.prediction, (unsigned)r.arena_peak);
    free(params);
    free(arena);
    return 0;
}

int main(int argc, char **argv)
{
    FILE *f;
    uint8_t head[4];
    int fill = argc > 2 ? atoi(argv[2]) : 0;
    if (argc < 2 || (f = fopen(argv[1], "rb")) == NULL) {
        fprintf(stderr, "usage: test_blob_loader BUNDLE [INPUT_BYTE]\n");
        return 2;
    }
    while (fread(head, 1, 4, f) == 4) {
        uint32_t len = (uint32_t)head[0] | ((uint32_t)head[1] << 8) | ((uint32_t)head[2] << 16) |
                       ((uint32_t)head[3] << 24);
        uint8_t *blob = malloc(len ? len : 1u);
        if (blob == NULL || fread(blob, 1, len, f) != len || run_one(blob, len, fill) != 0) {
            fprintf(stderr, "test_blob_loader: bad bundle record\n");
            return 2;
        }
        free(blob);
    }
    fclose(f);
    return 0;
}
