/* semihost.c - see semihost.h. Operation numbers and argument blocks from the ARM semihosting
 * specification v2. Shared by the emulated boards qemu-m4 (ARM) and rv32-virt (RISC-V), with
 * the tp_board bulk-file and parameter-store functions built on these calls. */
#include "semihost.h"

#include <string.h>

#include "tp_board.h"
#include "vcamera.h"

#define SYS_OPEN 0x01u
#define SYS_CLOSE 0x02u
#define SYS_WRITE0 0x04u
#define SYS_WRITE 0x05u
#define SYS_READ 0x06u
#define SYS_SEEK 0x0Au
#define SYS_FLEN 0x0Cu
#define SYS_RENAME 0x0Fu
#define SYS_EXIT_EXTENDED 0x20u
#define ADP_STOPPED_APPLICATION_EXIT 0x20026u

/* The trap differs by architecture; the operations and argument blocks are the same (the
 * RISC-V semihosting specification adopts ARM's). "memory": the host reads and writes the
 * argument block and the buffers it points to. */
#if defined(__arm__)
static int32_t semihost_call(uint32_t op, const void *arg)
{
    register uint32_t r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return (int32_t)r0;
}
#elif defined(__riscv) && __riscv_xlen == 32
/* The three-instruction sequence must be uncompressed and inside one page: a function of its
 * own, aligned to 16, keeps it so. op and arg arrive in a0 and a1, the result leaves in a0. */
__attribute__((naked, noinline, aligned(16))) static int32_t
semihost_call(__attribute__((unused)) uint32_t op, __attribute__((unused)) const void *arg)
{
    __asm__ volatile(".option push\n"
                     ".option norvc\n"
                     "slli zero, zero, 0x1f\n"
                     "ebreak\n"
                     "srai zero, zero, 7\n"
                     ".option pop\n"
                     "ret\n");
}
#else
#error "semihosting: no trap sequence for this architecture (32-bit ARM or RISC-V)"
#endif

int32_t tp_sh_open(const char *path, uint32_t mode)
{
    const uint32_t args[3] = {(uint32_t)path, mode, (uint32_t)strlen(path)};
    return semihost_call(SYS_OPEN, args);
}

int32_t tp_sh_close(int32_t handle)
{
    const uint32_t args[1] = {(uint32_t)handle};
    return semihost_call(SYS_CLOSE, args);
}

int32_t tp_sh_read(int32_t handle, void *dst, uint32_t n)
{
    const uint32_t args[3] = {(uint32_t)handle, (uint32_t)dst, n};
    return semihost_call(SYS_READ, args);
}

int32_t tp_sh_write(int32_t handle, const void *src, uint32_t n)
{
    const uint32_t args[3] = {(uint32_t)handle, (uint32_t)src, n};
    return semihost_call(SYS_WRITE, args);
}

int32_t tp_sh_seek(int32_t handle, uint32_t pos)
{
    const uint32_t args[2] = {(uint32_t)handle, pos};
    return semihost_call(SYS_SEEK, args);
}

int32_t tp_sh_flen(int32_t handle)
{
    const uint32_t args[1] = {(uint32_t)handle};
    return semihost_call(SYS_FLEN, args);
}

int32_t tp_sh_rename(const char *from, const char *to)
{
    const uint32_t args[4] = {(uint32_t)from, (uint32_t)strlen(from), (uint32_t)to,
                              (uint32_t)strlen(to)};
    return semihost_call(SYS_RENAME, args);
}

void tp_sh_write0(const char *text)
{
    semihost_call(SYS_WRITE0, text);
}

void tp_sh_exit(int status)
{
    /* Static, not on the stack: the fault path calls this after a stack overflow, and the
     * block must stay readable whatever the MPU thinks of the stack. */
    static uint32_t args[2];
    args[0] = ADP_STOPPED_APPLICATION_EXIT;
    args[1] = (uint32_t)status;
    for (;;) {
        semihost_call(SYS_EXIT_EXTENDED, args);
    }
}

/* The tp_board file functions: bulk files by name and the parameter store, relative to QEMU's
 * working directory. */
#define STORE_PATH "tinyprop.store"
#define STORE_TMP_PATH "tinyprop.store.tmp"

static int32_t bulk_handle = -1; /* semihosting handle of the open bulk file, or -1 */

int32_t tp_board_bulk_open(const char *name)
{
    if (name == NULL) {
        return TP_BOARD_ERR_ARG;
    }
    if (bulk_handle >= 0) {
        tp_sh_close(bulk_handle);
    }
    bulk_handle = tp_sh_open(name, TP_SH_MODE_RB);
    if (bulk_handle < 0) {
        return TP_BOARD_ERR_NOT_FOUND;
    }
    int32_t size = tp_sh_flen(bulk_handle);
    return size < 0 ? TP_BOARD_ERR_IO : size;
}

/* Read up to n bytes at offset; returns the count read or a negative status. */
static int32_t read_at(int32_t handle, uint32_t offset, uint8_t *dst, uint32_t n)
{
    if (n > INT32_MAX) {
        return TP_BOARD_ERR_ARG;
    }
    if (tp_sh_seek(handle, offset) != 0) {
        return TP_BOARD_ERR_IO;
    }
    int32_t left = tp_sh_read(handle, dst, n);
    if (left < 0 || (uint32_t)left > n) {
        return TP_BOARD_ERR_IO;
    }
    return (int32_t)(n - (uint32_t)left);
}

int32_t tp_board_bulk_read(uint32_t offset, uint8_t *dst, uint32_t n)
{
    if (bulk_handle < 0 || (dst == NULL && n > 0)) {
        return TP_BOARD_ERR_ARG;
    }
    return read_at(bulk_handle, offset, dst, n);
}

int tp_board_store_save(const uint8_t *src, uint32_t n)
{
    if (src == NULL && n > 0) {
        return TP_BOARD_ERR_ARG;
    }
    /* Write a temporary file and rename it over the store, so a run killed mid-save leaves
     * the previous record intact. */
    int32_t handle = tp_sh_open(STORE_TMP_PATH, TP_SH_MODE_WB);
    if (handle < 0) {
        return TP_BOARD_ERR_IO;
    }
    int32_t left = tp_sh_write(handle, src, n);
    if (tp_sh_close(handle) != 0 || left != 0) {
        return TP_BOARD_ERR_IO;
    }
    return tp_sh_rename(STORE_TMP_PATH, STORE_PATH) == 0 ? TP_BOARD_OK : TP_BOARD_ERR_IO;
}

int tp_board_store_load(uint8_t *dst, uint32_t max, uint32_t *n)
{
    if (n == NULL || (dst == NULL && max > 0)) {
        return TP_BOARD_ERR_ARG;
    }
    int32_t handle = tp_sh_open(STORE_PATH, TP_SH_MODE_RB);
    if (handle < 0) {
        return TP_BOARD_ERR_NOT_FOUND;
    }
    int status = TP_BOARD_OK;
    int32_t size = tp_sh_flen(handle);
    if (size < 0) {
        status = TP_BOARD_ERR_IO;
    } else {
        *n = (uint32_t)size;
        if ((uint32_t)size > max) {
            status = TP_BOARD_ERR_TOO_BIG;
        } else if (read_at(handle, 0, dst, (uint32_t)size) != size) {
            status = TP_BOARD_ERR_IO;
        }
    }
    tp_sh_close(handle);
    return status;
}

/* The virtual camera's files (vcamera.h): two more handles of the same kind. */
static int32_t vfile_handle[2] = {-1, -1};

int32_t tp_vfile_open(uint32_t slot, const char *name)
{
    if (slot > 1u || name == NULL) {
        return TP_BOARD_ERR_ARG;
    }
    if (vfile_handle[slot] >= 0) {
        tp_sh_close(vfile_handle[slot]);
    }
    vfile_handle[slot] = tp_sh_open(name, TP_SH_MODE_RB);
    if (vfile_handle[slot] < 0) {
        return TP_BOARD_ERR_NOT_FOUND;
    }
    int32_t size = tp_sh_flen(vfile_handle[slot]);
    return size < 0 ? TP_BOARD_ERR_IO : size;
}

int32_t tp_vfile_read(uint32_t slot, uint32_t offset, uint8_t *dst, uint32_t n)
{
    if (slot > 1u || vfile_handle[slot] < 0 || (dst == NULL && n > 0)) {
        return TP_BOARD_ERR_ARG;
    }
    return read_at(vfile_handle[slot], offset, dst, n);
}
