"""Run built boards: an emulated one under the emulator its descriptor names (run.command, e.g.
QEMU; UART on a loopback TCP port) and a board that is a process on this machine, the POSIX host
board (UART on pipes, or a pty). Building them is tinyprop.device.firmware's job.

Both runs are context managers that always stop the process on exit and kill it when it runs
past its time limit, so a hung guest ends a test instead of blocking it.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import serial

from ..errors import TinypropError
from ..paths import setup_hint
from .profiles import load_profile

QEMU_LOG = "qemu.log"  # the emulator's output and the semihosting console
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _board_process_group() -> None:
    """In the board process before it starts: a process group of its own, so a terminal's
    Ctrl-C reaches tinyprop alone, which stops the run after its step and pulls the parameters
    before it stops the board; on Linux, killed when the thread that started it ends (tinyprop
    killed outright leaves no emulator behind)."""
    os.setpgid(0, 0)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


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
    """The emulator (QEMU) running an emulated board's ELF. The guest starts when the first
    client connects to `.url`."""

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
    elf: Path, *, workdir: Path, timeout: float = 120.0, board: str = "qemu-m4",
    extra_args: tuple[str, ...] = (),
) -> Iterator[QemuRun]:
    """Run `elf` on the emulated `board` (a --board value whose descriptor's run.kind is
    "emulator") with UART0 on a loopback TCP port and semihosting files relative to `workdir`;
    the emulator is killed after `timeout` seconds and always stopped at exit. `extra_args`
    follow the descriptor's command (tinyprop.bench.cycles's execution trace)."""
    profile = load_profile(board)
    if profile.runner is None or profile.runner.kind != "emulator":
        raise TinypropError(f"{profile.where()}: not an emulated board (its descriptor has no "
                            "run.kind emulator); run an emulated board, e.g. qemu-m4")
    program, *args = profile.runner.command
    emulator = shutil.which(program)
    if emulator is None:
        raise TinypropError(
            f"running the {profile.name} board needs {program}, which is not installed; run "
            f"`sudo apt-get install {profile.runner.packages}`{setup_hint()}"
        )
    if not Path(elf).is_file():
        raise TinypropError(f"{elf}: no such firmware file; build it with "
                            f"`make -C {profile.folder}`")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    # We bind the port and hand the emulator the listening socket, instead of picking a free
    # port for it to bind later: no other process can take the port in between, so no retry.
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    fd = listener.fileno()
    fields = {"{firmware}": str(Path(elf).resolve()), "{uart_fd}": str(fd)}
    cmd = [emulator, *(_fill(arg, fields) for arg in args), *extra_args]
    with open(workdir / QEMU_LOG, "wb") as log:
        proc = subprocess.Popen(
            cmd, cwd=workdir, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            pass_fds=[fd], preexec_fn=_board_process_group,
        )  # fmt: skip
    listener.close()
    run = QemuRun(proc, timeout, port, workdir)
    try:
        yield run
    finally:
        run.stop()


def _fill(arg: str, fields: dict[str, str]) -> str:
    for field, value in fields.items():
        arg = arg.replace(field, value)
    return arg


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
        cmd, cwd=workdir, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
        preexec_fn=_board_process_group,
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
