/*
 * board.c - the tp_board HAL on a POSIX machine, for tests and for debugging the firmware with
 * ordinary tools. The link is stdin/stdout (pipes) or, with --pty, a pseudo-terminal whose path
 * is printed as "pty <path>" on stdout. The application runs on a static, painted stack with a
 * guard page under it, so stack peaks are measured and an overflow ends the process with
 * status 134 like any other fault (SIGSEGV, SIGBUS), as on qemu-m4.
 *
 * Usage: <exe> [--pty]; the parameter store is $TINYPROP_STORE (default ./tinyprop.store) and
 * bulk file names are relative to the working directory. $TINYPROP_BOARD_SRAM (bytes) makes it
 * stand for a board with that much SRAM: tp_board_sram_bytes() and tp_board_free_ram() report
 * it as a bare-metal board would, so a blob too large for a smaller board is refused for real.
 */
#define _XOPEN_SOURCE 700 /* ucontext, sigaltstack, posix_openpt */
#define _DEFAULT_SOURCE   /* cfmakeraw */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "tp_board.h"
#include "vcamera.h"

#ifndef APP_ENTRY
#error "APP_ENTRY must name the application's int entry(void)"
#endif
int APP_ENTRY(void);

/* The budget the firmware plans for, as on the target parts; not enforced on the host. */
#define HOST_SRAM_BYTES 262144u
/* The target's stack and its guard (boards/common/baremetal.ld), counted as used. */
#define TARGET_STACK_BYTES (16384u + 32u)
#define GUARD_BYTES 4096u
#define STACK_BYTES (512u * 1024u)
#define STACK_PAINT 0xA5C3A5C3u
#define DEFAULT_STORE "tinyprop.store"
/* The board's folder name (boards/host/Makefile sets it: a copy under another name reports its
 * own); "host" when compiled by hand. */
#ifndef TP_BOARD_NAME
#define TP_BOARD_NAME "host"
#endif

static uint8_t app_stack[GUARD_BYTES + STACK_BYTES] __attribute__((aligned(4096)));
static uint8_t signal_stack[64u * 1024u];

static struct {
    int in_fd;
    int out_fd;
    int bulk_fd;
    int vfile_fd[2]; /* the virtual camera's files (vcamera.h) */
    struct timespec start;
    ucontext_t main_context;
    ucontext_t app_context;
} board = {.in_fd = 0, .out_fd = 1, .bulk_fd = -1, .vfile_fd = {-1, -1}};

int tp_board_init(void)
{
    clock_gettime(CLOCK_MONOTONIC, &board.start);
    return TP_BOARD_OK;
}

int tp_board_read(uint8_t *dst, size_t max)
{
    if (dst == NULL || max == 0) {
        return TP_BOARD_ERR_ARG;
    }
    if (max > INT_MAX) {
        max = INT_MAX;
    }
    for (;;) {
        ssize_t got = read(board.in_fd, dst, max);
        if (got > 0) {
            return (int)got;
        }
        if (got == 0 || errno != EINTR) {
            return TP_BOARD_ERR_CLOSED;
        }
    }
}

int tp_board_poll(uint8_t *dst, size_t max)
{
    struct pollfd p = {.fd = board.in_fd, .events = POLLIN, .revents = 0};
    if (dst == NULL || max == 0) {
        return TP_BOARD_ERR_ARG;
    }
    for (;;) {
        int n = poll(&p, 1, 0);
        if (n == 0) {
            return 0;
        }
        if (n > 0) {
            return tp_board_read(dst, max); /* ready: data, or the end of the link */
        }
        if (errno != EINTR) {
            return TP_BOARD_ERR_CLOSED;
        }
    }
}

/* A process shares the machine by itself, and shows predictions in its link's messages. */
void tp_board_yield(void)
{
}

void tp_board_show(int32_t prediction)
{
    (void)prediction;
}

int tp_board_write(const uint8_t *src, size_t n)
{
    if (src == NULL && n > 0) {
        return TP_BOARD_ERR_ARG;
    }
    while (n > 0) {
        ssize_t put = write(board.out_fd, src, n);
        if (put < 0 && errno == EINTR) {
            continue;
        }
        if (put <= 0) {
            return errno == EPIPE ? TP_BOARD_ERR_CLOSED : TP_BOARD_ERR_IO;
        }
        src += put;
        n -= (size_t)put;
    }
    return TP_BOARD_OK;
}

const char *tp_board_name(void)
{
    return TP_BOARD_NAME;
}

uint32_t tp_board_sram_bytes(void)
{
    const char *text = getenv("TINYPROP_BOARD_SRAM");
    unsigned long bytes = text != NULL ? strtoul(text, NULL, 10) : 0ul;
    return bytes > 0ul && bytes <= UINT32_MAX ? (uint32_t)bytes : HOST_SRAM_BYTES;
}

/* As on a bare-metal target: the SRAM less the program's .data and .bss (but not this board's
 * own stacks, which stand in for the target's) and the target's stack. A simulated SRAM below
 * that is reported as the wrapped (negative) difference: the device adds its buffers back and
 * sees how far short the board falls (tp_board.h). */
extern char __data_start[], _end[];

void tp_board_free_ram(tp_board_ram *ram)
{
    size_t statics = (size_t)(_end - __data_start) - sizeof app_stack - sizeof signal_stack;
    uint32_t used = (uint32_t)(statics + TARGET_STACK_BYTES);
    ram->free_bytes = tp_board_sram_bytes() - used;
    ram->largest_block = ram->free_bytes;
    ram->second_block = ram->free_bytes;
}

/* Wall time: instruction counts on a PC would need perf events, which containers forbid. */
uint64_t tp_board_counter(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)(now.tv_sec - board.start.tv_sec) * 1000000u +
           (uint64_t)((now.tv_nsec - board.start.tv_nsec) / 1000);
}

const char *tp_board_counter_unit(void)
{
    return "us";
}

uint32_t tp_board_stack_peak(void)
{
    const uint32_t *word = (const uint32_t *)(app_stack + GUARD_BYTES);
    const uint32_t *top = (const uint32_t *)(app_stack + sizeof app_stack);
    while (word < top && *word == STACK_PAINT) {
        ++word;
    }
    return (uint32_t)((const uint8_t *)top - (const uint8_t *)word);
}

void tp_board_exit(int status)
{
    exit(status);
}

int32_t tp_board_bulk_open(const char *name)
{
    if (name == NULL) {
        return TP_BOARD_ERR_ARG;
    }
    if (board.bulk_fd >= 0) {
        close(board.bulk_fd);
    }
    board.bulk_fd = open(name, O_RDONLY);
    if (board.bulk_fd < 0) {
        return TP_BOARD_ERR_NOT_FOUND;
    }
    struct stat info;
    if (fstat(board.bulk_fd, &info) != 0 || info.st_size > INT32_MAX) {
        return TP_BOARD_ERR_IO;
    }
    return (int32_t)info.st_size;
}

/* Read up to n bytes at offset; returns the count read or a negative status. */
static int32_t read_at(int fd, uint32_t offset, uint8_t *dst, uint32_t n)
{
    if (n > INT32_MAX) {
        return TP_BOARD_ERR_ARG;
    }
    uint32_t done = 0;
    while (done < n) {
        ssize_t got = pread(fd, dst + done, n - done, (off_t)offset + done);
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got < 0) {
            return TP_BOARD_ERR_IO;
        }
        if (got == 0) {
            break;
        }
        done += (uint32_t)got;
    }
    return (int32_t)done;
}

int32_t tp_board_bulk_read(uint32_t offset, uint8_t *dst, uint32_t n)
{
    if (board.bulk_fd < 0 || (dst == NULL && n > 0)) {
        return TP_BOARD_ERR_ARG;
    }
    return read_at(board.bulk_fd, offset, dst, n);
}

int32_t tp_vfile_open(uint32_t slot, const char *name)
{
    if (slot > 1u || name == NULL) {
        return TP_BOARD_ERR_ARG;
    }
    if (board.vfile_fd[slot] >= 0) {
        close(board.vfile_fd[slot]);
    }
    board.vfile_fd[slot] = open(name, O_RDONLY);
    struct stat info;
    if (board.vfile_fd[slot] < 0) {
        return errno == ENOENT ? TP_BOARD_ERR_NOT_FOUND : TP_BOARD_ERR_IO;
    }
    if (fstat(board.vfile_fd[slot], &info) != 0 || info.st_size > INT32_MAX) {
        return TP_BOARD_ERR_IO;
    }
    return (int32_t)info.st_size;
}

int32_t tp_vfile_read(uint32_t slot, uint32_t offset, uint8_t *dst, uint32_t n)
{
    if (slot > 1u || board.vfile_fd[slot] < 0 || (dst == NULL && n > 0)) {
        return TP_BOARD_ERR_ARG;
    }
    return read_at(board.vfile_fd[slot], offset, dst, n);
}

static const char *store_path(void)
{
    const char *path = getenv("TINYPROP_STORE");
    return path != NULL && path[0] != '\0' ? path : DEFAULT_STORE;
}

int tp_board_store_save(const uint8_t *src, uint32_t n)
{
    if (src == NULL && n > 0) {
        return TP_BOARD_ERR_ARG;
    }
    /* Write a temporary file and rename it over the store, so a process killed mid-save leaves
     * the previous record intact. */
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", store_path()) >= (int)sizeof tmp) {
        return TP_BOARD_ERR_ARG;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        return TP_BOARD_ERR_IO;
    }
    int saved_out = board.out_fd;
    board.out_fd = fd;
    int status = tp_board_write(src, n);
    board.out_fd = saved_out;
    if (close(fd) != 0 || status != TP_BOARD_OK) {
        return TP_BOARD_ERR_IO;
    }
    return rename(tmp, store_path()) == 0 ? TP_BOARD_OK : TP_BOARD_ERR_IO;
}

int tp_board_store_load(uint8_t *dst, uint32_t max, uint32_t *n)
{
    if (n == NULL || (dst == NULL && max > 0)) {
        return TP_BOARD_ERR_ARG;
    }
    int fd = open(store_path(), O_RDONLY);
    if (fd < 0) {
        return errno == ENOENT ? TP_BOARD_ERR_NOT_FOUND : TP_BOARD_ERR_IO;
    }
    int status = TP_BOARD_OK;
    struct stat info;
    if (fstat(fd, &info) != 0 || info.st_size > INT32_MAX) {
        status = TP_BOARD_ERR_IO;
    } else {
        *n = (uint32_t)info.st_size;
        if (*n > max) {
            status = TP_BOARD_ERR_TOO_BIG;
        } else if (read_at(fd, 0, dst, *n) != (int32_t)*n) {
            status = TP_BOARD_ERR_IO;
        }
    }
    close(fd);
    return status;
}

/* A fault (including a stack overflow into the guard page) ends the run like on qemu-m4. Runs on
 * its own stack, since the application stack may be exhausted. */
static void on_fault(int signal_number)
{
    static const char text[] = "TP FAULT signal\n";
    (void)signal_number;
    ssize_t ignored = write(STDERR_FILENO, text, sizeof text - 1);
    (void)ignored;
    _exit(TP_BOARD_FAULT_STATUS);
}

static int install_fault_handlers(void)
{
    stack_t alt = {.ss_sp = signal_stack, .ss_size = sizeof signal_stack, .ss_flags = 0};
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_fault;
    action.sa_flags = SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    if (sigaltstack(&alt, NULL) != 0 || sigaction(SIGSEGV, &action, NULL) != 0 ||
        sigaction(SIGBUS, &action, NULL) != 0) {
        return -1;
    }
    /* A closed pipe is reported by tp_board_write, not by killing the process. */
    return signal(SIGPIPE, SIG_IGN) == SIG_ERR ? -1 : 0;
}

/* Open a pseudo-terminal in raw mode and announce the path of its device side on stdout. */
static int open_pty(void)
{
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) {
        return -1;
    }
    const char *path = ptsname(master);
    /* Keeping the device side open means a host that closes the port and reopens it later
     * finds the board still running, as with a real serial adapter. */
    int device = path != NULL ? open(path, O_RDWR | O_NOCTTY) : -1;
    struct termios mode;
    if (device < 0 || tcgetattr(device, &mode) != 0) {
        return -1;
    }
    cfmakeraw(&mode);
    if (tcsetattr(device, TCSANOW, &mode) != 0) {
        return -1;
    }
    printf("pty %s\n", path);
    fflush(stdout);
    board.in_fd = master;
    board.out_fd = master;
    return 0;
}

static void run_app(void)
{
    tp_board_exit(APP_ENTRY());
}

int main(int argc, char **argv)
{
    if (argc > 2 || (argc == 2 && strcmp(argv[1], "--pty") != 0)) {
        fprintf(stderr, "usage: %s [--pty]\n", argv[0]);
        return 2;
    }
    if (install_fault_handlers() != 0 || (argc == 2 && open_pty() != 0)) {
        perror(argv[0]);
        return 1;
    }
    for (uint32_t *word = (uint32_t *)(app_stack + GUARD_BYTES);
         word < (uint32_t *)(app_stack + sizeof app_stack); ++word) {
        *word = STACK_PAINT;
    }
    if (mprotect(app_stack, GUARD_BYTES, PROT_NONE) != 0 || getcontext(&board.app_context) != 0) {
        perror(argv[0]);
        return 1;
    }
    board.app_context.uc_stack.ss_sp = app_stack + GUARD_BYTES;
    board.app_context.uc_stack.ss_size = STACK_BYTES;
    board.app_context.uc_link = &board.main_context;
    makecontext(&board.app_context, run_app, 0);
    return swapcontext(&board.main_context, &board.app_context) == 0 ? 0 : 1;
}
