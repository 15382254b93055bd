/* fuzz_check.h - CHECK for the libFuzzer harnesses: a failed property traps, so libFuzzer keeps
 * the input as a crash reproducer like any sanitizer report. */
#ifndef FUZZ_CHECK_H
#define FUZZ_CHECK_H

#define CHECK(cond)           \
    do {                      \
        if (!(cond)) {        \
            __builtin_trap(); \
        }                     \
    } while (0)

#endif
