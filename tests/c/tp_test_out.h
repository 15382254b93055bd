/* tp_test_out.h - what the C test drivers that run both here and on a board share: a line of
 * text out (on a board application, APP_ENTRY, its link; here stdout), a decimal int32, the
 * summary line, and a xorshift32 generator (each driver seeds its own `rng`). Header-only: the
 * drivers are single files (build_program, boards/<board>/Makefile APP=). */
#ifndef TP_TEST_OUT_H
#define TP_TEST_OUT_H

#include <stdint.h>
#include <string.h>

#ifdef APP_ENTRY /* a board application (boards/<board>/Makefile APP=) */
#include "tp_board.h"
#define put_text(s) (void)tp_board_write((const uint8_t *)(s), strlen(s))
#else
#include <stdio.h>
#define put_text(s) (void)fputs((s), stdout)
#endif

static void put_int(int32_t v)
{
    char digits[12];
    uint32_t u = v < 0 ? 0u - (uint32_t)v : (uint32_t)v;
    int n = 11;
    digits[n] = '\0';
    do {
        digits[--n] = (char)('0' + u % 10u);
        u /= 10u;
    } while (u != 0u);
    if (v < 0) {
        digits[--n] = '-';
    }
    put_text(digits + n);
}

/* The summary line: `what`, n, ", mismatches ", bad; returns the exit status (1 on any). */
static int put_summary(const char *what, uint32_t n, uint32_t bad)
{
    put_text(what);
    put_int((int32_t)n);
    put_text(", mismatches ");
    put_int((int32_t)bad);
    put_text("\n");
    return bad != 0u;
}

/* xorshift32 of *state (never 0). */
static inline uint32_t tp_test_next(uint32_t *state)
{
    uint32_t x = *state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *state = x;
    return x;
}

#endif /* TP_TEST_OUT_H */
