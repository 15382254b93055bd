"""A board: its firmware built and started (QEMU or the POSIX host board), the serial protocol,
the link to it and the requests a device answers."""
