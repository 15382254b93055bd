"""Board selection: a Device on a board tinyprop builds and starts (its descriptor has run: an
emulated one such as qemu-m4, or the host board; by name or by folder), or a real board's port.

    with open_board("qemu-m4", blob, workdir) as dev:     # or "host", "path/to/myboard",
        dev.set_hparams(lr=0.01)                          # "/dev/ttyACM0", "socket://..."
        dev.train(x, label)

For the boards tinyprop starts the blob is compiled into the firmware (flash on the MCUs: the
VWW blob is larger than the 256 KB of RAM), so each blob gets its own build, cached by the
blob's id under build/blobs/ while make keeps it up to date with the firmware sources. The
board process runs in `workdir` (bulk sample files and the parameter store `tinyprop.store` live
there) and is stopped when the block ends. Anything else is a pyserial port or URL of a board
already flashed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

from ..compile.blob import blob_id
from ..errors import DeviceError, TinypropError
from .device import Device
from .firmware import build_device_firmware
from .link import DEFAULT_BAUDRATE, Link, PipeTransport, open_link
from .profiles import Capacity, blob_needs, board_named, check_fits
from .runners import BoardRun, start_host_board, start_qemu

BOOT_TIMEOUT = 30.0  # seconds from start to READY (QEMU start-up, store restore)
RUN_LIMIT = 24 * 3600.0  # the board process is killed after this, whatever happens


def _greet(device: Device, blob: bytes | None, board_arg: str | None = None) -> Device:
    """HELLO, then the checks READY allows before anything else is sent: the blob fits the RAM
    the device reports, and it is the blob the device runs. `board_arg`: what --board names
    the board by (None: the name it reports)."""
    ready = device.hello(BOOT_TIMEOUT)
    reported = Capacity.reported(ready)
    if blob is not None and reported is not None:
        check_fits(blob_needs(blob), reported, f"board {ready.board} on {device.name} (its READY)",
                   board_arg or ready.board)
    if blob is not None and ready.blob_id != blob_id(blob):
        raise TinypropError(
            f"board on {device.name} runs blob {ready.blob_id:08x}, not this one "
            f"({blob_id(blob):08x}); flash it with this model first (tinyprop flash)"
        )
    return device


@contextmanager
def open_board(
    spec: str, blob: bytes | None, workdir: str | Path, *, baudrate: int = DEFAULT_BAUDRATE,
    limit: float = RUN_LIMIT,
    interpose: Callable[[BoardRun], AbstractContextManager[str]] | None = None,
) -> Iterator[Device]:
    """A Device on board `spec`, greeted (READY checked against `blob`), closed at the end.
    A board tinyprop starts (tinyprop.device.profiles: its descriptor has run) is built and
    started with `blob` compiled in (the process is `device.process`), once the blob is known
    to fit its profile; any other spec is a serial port or URL of a board already flashed with
    `blob` (None: any blob). A blob larger than the RAM the device reports in READY is refused
    before anything but HELLO is sent. `interpose`, for a board tinyprop starts: given the run,
    the URL the host talks to instead of the board's UART (tinyprop.faults.link: a lossy
    line)."""
    board = board_named(spec)
    if board is None:
        with open_link(spec, baudrate) as link:
            yield _greet(Device(link), blob)
        return
    if board.runner is None:
        raise TinypropError(f"--board {spec}: {board.where()} is a real board, which tinyprop "
                            f"does not start; flash it (tinyprop flash --board {board.arg} "
                            "--blob MODEL.tpb) and give its serial port as --board")
    if blob is None:
        raise TinypropError(f"board {spec}: needs a model blob to build its firmware")
    check_fits(blob_needs(blob), board.capacity(), board.where(), board.arg)
    firmware = build_device_firmware(spec, blob)
    emulated = board.runner.kind == "emulator"
    starter = start_qemu(firmware, workdir=Path(workdir), timeout=limit, board=spec) \
        if emulated else start_host_board(firmware, Path(workdir), timeout=limit)
    with starter as run, (interpose(run) if interpose else nullcontext()) as through:
        if through is not None:
            link = open_link(through, baudrate)
        elif emulated:
            link = open_link(run.url, baudrate)
        else:
            link = Link(PipeTransport(run.proc, f"{board.name} board ({firmware.name})"))
        with link:
            device = Device(link)
            device.process = run
            try:
                yield _greet(device, blob, board.arg)
            except DeviceError as exc:
                raise DeviceError(f"{exc}{_exit_note(run)}") from None


def _exit_note(run: BoardRun) -> str:
    """What the board process's end says about a failure (a fault exits with status 134)."""
    status = run.proc.poll()
    if status is None:
        return ""
    log = run.log().strip()
    return f"; the board process exited with status {status}" + (
        f" (QEMU log: {log[-200:]!r})" if log else "")
