/* semihost.c - see semihost.h. Operation numbers and argument blocks from the ARM semihosting
 * specification v2. */
#include "semihost.h"

#include <string.h>

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

static int32_t semihost_call(uint32_t op, const void *arg)
{
    register uint32_t r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    /* "memory": the host reads and writes the argument block and the buffers it points to. */
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return (int32_t)r0;
}

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
