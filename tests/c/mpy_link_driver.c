/*
 * mpy_link_driver.c - what a MicroPython script with tinyprop.Link does, in plain C over the
 * binding's own frame code (micropython/tinyprop/tp_mpy_link.c), so tests/test_micropython.py
 * can put the host monitor (tinyprop.monitor.live_source, over exec:) on its frames without
 * building MicroPython:
 *
 *   mpy_link_driver BLOB SAMPLES STEPS LR SEED
 *
 * waits on stdin for the monitor's HELLO (answering READY), trains STEPS steps over the
 * samples file (a label byte, then the input, per sample) with a METRIC after each, infers the
 * first sample (METRIC with the EVAL flag), sends LOG "done" and exits. Frames go to stdout.
 */
#define _POSIX_C_SOURCE 200809L /* read, clock_gettime */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tinyprop.h"
#include "tp_mpy_link.h"

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    long n;
    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(2);
    }
    buf = malloc((size_t)n + 1u);
    if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(2);
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void send(const uint8_t *p, size_t n)
{
    if (n > 0u && (fwrite(p, 1, n, stdout) != n || fflush(stdout) != 0)) {
        exit(3);
    }
}

static uint32_t now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint32_t)((uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u);
}

int main(int argc, char **argv)
{
    static tp_session s;
    static tp_mpy_link link;
    static uint8_t tx[TP_MPY_TX_BYTES];
    tp_requirements req;
    tp_hparams hp = {0.0f, 0.0f, 0u, 0u};
    size_t blob_len, samples_len, n = 0;
    uint8_t *blob, *samples, *arena, *params;
    int hello = 0, steps;
    if (argc != 6) {
        fprintf(stderr, "usage: %s BLOB SAMPLES STEPS LR SEED\n", argv[0]);
        return 2;
    }
    blob = read_file(argv[1], &blob_len);
    samples = read_file(argv[2], &samples_len);
    steps = atoi(argv[3]);
    if (tp_blob_requirements(blob, (uint32_t)blob_len, &req) != TP_OK) {
        return 4;
    }
    arena = malloc(req.arena_train); /* malloc's alignment (16 on glibc) is what the core needs */
    params = malloc(req.params);
    if (tp_session_init(&s, blob, (uint32_t)blob_len, arena, req.arena_train, params, req.params) !=
        TP_OK) {
        return 4;
    }
    hp.lr = strtof(argv[4], NULL);
    hp.seed = (uint32_t)strtoul(argv[5], NULL, 10);
    if (tp_set_hparams(&s, &hp) != TP_OK) {
        return 4;
    }

    tp_mpy_link_init(&link, "mpy-host-driver", 262144u);
    while (!hello) { /* the binding's link.wait() */
        uint8_t in[64];
        ssize_t got = read(0, in, sizeof in);
        size_t at = 0;
        if (got <= 0) {
            return 5;
        }
        while (at < (size_t)got && !hello) {
            size_t used = 0;
            hello = tp_mpy_link_feed(&link, &s, in + at, (size_t)got - at, &used, tx, sizeof tx,
                                     &n);
            send(tx, n);
            at += used;
        }
    }
    for (int i = 0; i <= steps; i++) { /* steps, then one inference */
        size_t per = 1u + req.input_bytes, at = (size_t)(i % steps) * per % samples_len;
        tp_mpy_call c;
        uint32_t t0;
        memset(&c, 0, sizeof c);
        c.train = i < steps;
        c.step = s.step;
        memcpy(tp_input(&s), samples + at + 1, req.input_bytes);
        t0 = now_us();
        c.st = c.train ? tp_train_step(&s, samples[at], &c.r) : tp_infer(&s, &c.r);
        c.us = now_us() - t0;
        c.static_bytes = (uint32_t)(sizeof s + sizeof link);
        if (c.st != TP_OK && c.st != TP_ERR_NONFINITE) {
            return 6;
        }
        if (tp_mpy_metric(&s, &c, tx, sizeof tx, &n) == TP_OK) {
            send(tx, n);
        }
    }
    if (tp_proto_encode_log(tx, sizeof tx, 0u, "done", &n) == TP_OK) {
        send(tx, n);
    }
    free(blob);
    free(samples);
    free(arena);
    free(params);
    return 0;
}
