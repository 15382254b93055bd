/* qemu_m4.h - what the qemu-m4 startup code and HAL share. */
#ifndef TP_QEMU_M4_H
#define TP_QEMU_M4_H

/* Word the startup code paints the stack with; tp_board_stack_peak() scans for it. */
#define TP_STACK_PAINT 0xA5C3A5C3u

#endif /* TP_QEMU_M4_H */
