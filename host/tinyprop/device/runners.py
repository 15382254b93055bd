"""Run built boards: the emulated ones under QEMU (qemu-m4, a Cortex-M4F, and rv32-virt, an
RV32IMC without FPU; UART on a loopback TCP port) and the POSIX host board (UART on pipes, or a
pty). Building them is tinyprop.device.firmware's job.

Both runs are context managers that always stop the process on exit and kill it when it runs
past its time limit, so a hung guest ends a test instead of blocking it.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import serial

from ..errors import TinypropError
from ..paths import setup_hint

# The emulated boards: QEMU program, its Debian package, and the machine. rv32-virt: -bios none
# starts the hart at 0x80000000, where link.ld puts the entry.
QEMU_BOARDS = {
    "qemu-m4": ("qemu-system-arm", "qemu-system-arm", ["-M", "mps2-an386", "-cpu", "cortex-m4"]),
    "rv32-virt": ("qemu-system-riscv32", "qemu-system-misc", ["-M", "virt", "-bios", "none"]),
}

# -icount shift=0: one instruction per virtual ns, so qemu-m4's 25 MHz counter counts
# instructions / 40 and rv32-virt's instret counts instructions, the same on every run;
# align/sleep off: never wait for real time.
QEMU_COMMON_ARGS = [
    "-nographic", "-monitor", "none",
    "-semihosting-config", "enable=on,target=native",
    "-icount", "shift=0,align=off,sleep=off",
]  # fmt: skip

QEMU_LOG = "qemu.log"


class BoardRun:
    """A running board process: `.proc`, `.wait()`, and a watchdog that kills it after the
    time limit (`.timed_out` then says so)."""

    def __init__(self, proc: subprocess.Popen, timeout: float) -> None:
        self.proc = proc
        self.timed_out = False
        self._watchdog = threading.Timer(timeout, self._expire)
        self._watchdog.daemon = True
        self._watchdog.start()

    def _expire(self) -> None:
        self.timed_out = True
        self.proc.kill()

    def wait(self, timeout: float | None = None) -> int:
        """Exit status of the board (raises subprocess.TimeoutExpired if still running)."""
        return self.proc.wait(timeout)

    def log(self) -> str:
        """What the board's emulator wrote besides the UART ("" for a board without one)."""
        return ""

    def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL) if it still runs."""
        self._watchdog.cancel()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class QemuRun(BoardRun):
    """QEMU running an emulated board's ELF. The guest starts when the first client connects to
    `.url`."""

    def __init__(self, proc: subprocess.Popen, timeout: float, port: int, workdir: Path) -> None:
        super().__init__(proc, timeout)
        self.url = f"socket://127.0.0.1:{port}"
        self.port = port
        self.workdir = workdir

    def connect(self, timeout: float = 10.0) -> serial.SerialBase:
        """Open the UART as a pyserial port (read timeout in seconds)."""
        return serial.serial_for_url(self.url, timeout=timeout)

    def log(self) -> str:
        """QEMU's messages and the semihosting console (fault reports) so far."""
        return (self.workdir / QEMU_LOG).read_text(errors="replace")


@contextmanager
def start_qemu(
    elf: Path, *, workdir: Path, timeout: float = 120.0, board: str = "qemu-m4"
) -> Iterator[QemuRun]:
    """Run `elf` on the emulated `board` (a QEMU_BOARDS key) with UART0 on a loopback TCP port
    and semihosting files relative to `workdir`; QEMU is killed after `timeout` seconds and
    always stopped at exit."""
    if board not in QEMU_BOARDS:
        raise TinypropError(
            f"board {board!r}: not an emulated board; use one of {', '.join(sorted(QEMU_BOARDS))}"
        )
    program, package, machine = QEMU_BOARDS[board]
    qemu = shutil.which(program)
    if qemu is None:
        raise TinypropError(
            f"running the {board} board needs {program}, which is not installed; run "
            f"`sudo apt-get install {package}`{setup_hint()}"
        )
    if not Path(elf).is_file():
        raise TinypropError(f"{elf}: no such firmware file; build it with `make -C boards/{board}`")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    # We bind the port and hand QEMU the listening socket, instead of picking a free port for
    # QEMU to bind later: no other process can take the port in between, so no retry is needed.
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    fd = listener.fileno()
    cmd = [
        qemu, *machine, *QEMU_COMMON_ARGS,
        "-chardev", f"socket,id=uart0,fd={fd},server=on,wait=on,nodelay=on",
        "-serial", "chardev:uart0",
        "-kernel", str(Path(elf).resolve()),
    ]  # fmt: skip
    with open(workdir / QEMU_LOG, "wb") as log:
        proc = subprocess.Popen(
            cmd, cwd=workdir, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            pass_fds=[fd],
        )  # fmt: skip
    listener.close()
    run = QemuRun(proc, timeout, port, workdir)
    try:
        yield run
    finally:
        run.stop()


class HostRun(BoardRun):
    """The host board process: its UART is the process's stdin/stdout (talk to it through
    tinyprop.device.link.PipeTransport), or with `pty=True` the pseudo-terminal `.url` to open
    with pyserial."""

    def __init__(self, proc: subprocess.Popen, timeout: float, url: str | None) -> None:
        super().__init__(proc, timeout)
        self.url = url


@contextmanager
def start_host_board(
    exe: Path, workdir: Path, *, timeout: float = 120.0, pty: bool = False
) -> Iterator[HostRun]:
    """Run the host board `exe` in `workdir` (bulk files and, unless $TINYPROP_STORE says
    otherwise, the parameter store live there); killed after `timeout` s, stopped at exit."""
    if not Path(exe).is_file():
        raise TinypropError(
            f"{exe}: no such host board program; build it with `make -C boards/host`"
        )
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    cmd = [str(Path(exe).resolve()), *(["--pty"] if pty else [])]
    # Unbuffered pipes: PipeTransport reads the descriptor directly, so nothing may read ahead.
    proc = subprocess.Popen(
        cmd, cwd=workdir, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
    )
    url = None
    if pty:
        match = re.fullmatch(rb"pty (\S+)\n", proc.stdout.readline())
        if match is None:
            proc.kill()
            proc.wait()
            raise TinypropError(f"{exe}: did not announce its pty; check that it is a host board")
        url = match.group(1).decode()
    run = HostRun(proc, timeout, url)
    try:
        yield run
    finally:
        for pipe in (proc.stdin, proc.stdout):
            pipe.close()
        run.stop()
