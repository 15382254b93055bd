"""Board selection: a Device on an emulated board (the Cortex-M4F qemu-m4, the FPU-less RISC-V
rv32-virt), the host board, or a real board's port.

    with open_board("qemu-m4", blob, workdir) as dev:     # or "rv32-virt", "host",
        dev.set_hparams(lr=0.01)                          # "/dev/ttyACM0", "socket://..."
        dev.train(x, label)

For the built boards the blob is compiled into the firmware (flash on the MCUs: the VWW blob
is larger than the 256 KB of RAM), so each blob gets its own build, cached by the blob's id
under build/blobs/ while make keeps it up to date with the firmware sources. The board process
runs in `workdir` (bulk sample files and the parameter store `tinyprop.store` live there) and is
stopped when the block ends. Anything else is a pyserial port or URL of a board already flashed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..compile.blob import blob_id
from ..errors import DeviceError, TinypropError
from .device import Device
from .firmware import build_device_firmware
from .link import DEFAULT_BAUDRATE, Link, PipeTransport, open_link
from .profiles import Capacity, blob_needs, check_fits, load_profile
from .runners import QEMU_BOARDS, BoardRun, start_host_board, start_qemu

# QEMU_BOARDS read bulk samples through semihosting; all of these build their own firmware.
BUILT_BOARDS = (*QEMU_BOARDS, "host")
BOOT_TIMEOUT = 30.0  # seconds from start to READY (QEMU start-up, store restore)
RUN_LIMIT = 24 * 3600.0  # the board process is killed after this, whatever happens


def _greet(device: Device, blob: bytes | None) -> Device:
    """HELLO, then the checks READY allows before anything else is sent: the blob fits the RAM
    the device reports, and it is the blob the device runs."""
    ready = device.hello(BOOT_TIMEOUT)
    reported = Capacity.reported(ready)
    if blob is not None and reported is not None:
        check_fits(blob_needs(blob), reported, f"board {ready.board} on {device.name} (its READY)",
                   ready.board)
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
) -> Iterator[Device]:
    """A Device on board `spec`, greeted (READY checked against `blob`), closed at the end.
    BUILT_BOARDS build and start the board with `blob` compiled in (the process is
    `device.process`), once the blob is known to fit the board's profile; any other spec is a
    serial port or URL of a board already flashed with `blob` (None: any blob). A blob larger
    than the RAM the device reports in READY is refused before anything but HELLO is sent."""
    if spec in BUILT_BOARDS:
        if blob is None:
            raise TinypropError(f"board {spec}: needs a model blob to build its firmware")
        profile = load_profile(spec)
        check_fits(blob_needs(blob), profile.capacity(), profile.where(), spec)
        firmware = build_device_firmware(spec, blob)
        emulated = spec in QEMU_BOARDS
        starter = start_qemu(firmware, workdir=Path(workdir), timeout=limit, board=spec) \
            if emulated else start_host_board(firmware, Path(workdir), timeout=limit)
        with starter as run:
            if emulated:
                link = open_link(run.url, baudrate)
            else:
                link = Link(PipeTransport(run.proc, f"host board ({firmware.name})"))
            with link:
                device = Device(link)
                device.process = run
                try:
                    yield _greet(device, blob)
                except DeviceError as exc:
                    raise DeviceError(f"{exc}{_exit_note(run)}") from None
        return
    with open_link(spec, baudrate) as link:
        yield _greet(Device(link), blob)


def _exit_note(run: BoardRun) -> str:
    """What the board process's end says about a failure (a fault exits with status 134)."""
    status = run.proc.poll()
    if status is None:
        return ""
    log = run.log().strip()
    return f"; the board process exited with status {status}" + (
        f" (QEMU log: {log[-200:]!r})" if log else "")
