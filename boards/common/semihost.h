/*
 * semihost.h - semihosting calls used by the emulated boards (qemu-m4, rv32-virt): exit with a
 * status, console text, and host files (bulk samples, the parameter store) relative to QEMU's
 * working directory. Each call traps to QEMU (`bkpt 0xab` on ARM, the ebreak sequence on
 * RISC-V; needs -semihosting-config enable=on). semihost.c also implements the tp_board bulk
 * and store functions on them.
 */
#ifndef TP_SEMIHOST_H
#define TP_SEMIHOST_H

#include <stdint.h>

/* Host fopen() modes, as indices into the semihosting mode table. */
#define TP_SH_MODE_RB 1u
#define TP_SH_MODE_WB 5u

/* Open `path` with a TP_SH_MODE_*; returns a handle >= 0 or -1. */
int32_t tp_sh_open(const char *path, uint32_t mode);
int32_t tp_sh_close(int32_t handle);
/* Both return the number of bytes NOT transferred (0 = all), or -1 on error. */
int32_t tp_sh_read(int32_t handle, void *dst, uint32_t n);
int32_t tp_sh_write(int32_t handle, const void *src, uint32_t n);
/* Absolute seek; returns 0 or a negative value. */
int32_t tp_sh_seek(int32_t handle, uint32_t pos);
/* File length in bytes, or -1. */
int32_t tp_sh_flen(int32_t handle);
/* Rename (replacing `to`); returns 0 on success. */
int32_t tp_sh_rename(const char *from, const char *to);
/* NUL-terminated text to QEMU's semihosting console (its stderr/log). */
void tp_sh_write0(const char *text);
/* End QEMU with exit code `status` (SYS_EXIT_EXTENDED, ADP_Stopped_ApplicationExit). */
void tp_sh_exit(int status) __attribute__((noreturn));

#endif /* TP_SEMIHOST_H */
