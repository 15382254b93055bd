"""Boards: the registry every module asks. A board is a folder holding profile.json, its
descriptor: a folder under boards/, named by the folder's name, or one anywhere else (a user's
own board), named by its path. The descriptor holds everything the host knows of the board,
every figure with its source:

- its memory (sram_bytes, runtime, device_bytes, heap_blocks...): what `convert --board` plans
  within, and what a blob must fit before anything is built or sent;
- kernels.target: the kernels its firmware builds (`convert --target`'s default);
- build, for a board tinyprop builds with the folder's Makefile: the compiler it needs and the
  Debian packages that have it;
- run, for a board tinyprop starts: an emulator's command line ({firmware}: the ELF,
  {uart_fd}: the listening socket UART0 is on) or a process on this machine (UART on its
  stdin/stdout), and whether samples go to it as bulk files;
- flash, for a real board: its PlatformIO env and, for a prebuilt image, esptool's chip,
  offset and speed.

    profile = load_profile("nano33ble")      # or load_profile("path/to/myboard")
    room = profile.room()                    # what `convert --board nano33ble` plans within
    check_fits(blob_needs(blob), profile.capacity(), profile.where(), profile.arg)

Two views of one board's memory. Planning (`room`) takes the budget (the SRAM) less a reserve:
what the runtime takes (OS, core, stacks), the device loop's own buffers and a planning margin;
on a heap board the arena must also fit the largest heap block and the params region the
second. Fitting (`capacity`, and READY's figures from a running board) is physical, without the
margin: a blob that does not fit is refused with one line before anything is built or sent.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..compile.blob import read_blob
from ..compile.budget import Room
from ..compile.kernels import TARGETS
from ..errors import TinypropError
from ..paths import BOARDS_ROOT

RECORD_HEADER_BYTES = 24  # the params record's header (tp_device.h), beside the params region
DESCRIPTOR = "profile.json"  # a board folder's descriptor
RUN_KINDS = ("emulator", "process")
# What an emulator's command line must hold: tinyprop fills them in (tinyprop.device.runners).
EMULATOR_FIELDS = ("{firmware}", "{uart_fd}")


@dataclass(frozen=True)
class Needs:
    """What a blob takes on a device: the arena buffer and the params record (header + params
    region, optimizer state included), as tp_device.c sizes them from the blob header."""

    arena: int
    record: int


@dataclass(frozen=True)
class Capacity:
    """RAM for a blob's arena and params record: all of it, the largest block one of them can
    have and the largest left once that one is taken (one static region: all three equal)."""

    free: int
    largest: int
    second: int

    @classmethod
    def reported(cls, ready) -> Capacity | None:
        """What a READY (protocol 2) says, None if the device does not measure it; a block it
        could not measure bounds nothing beyond the total."""
        if ready.free_bytes is None:
            return None
        largest = ready.free_bytes if ready.largest_block is None else ready.largest_block
        return cls(ready.free_bytes, largest,
                   largest if ready.second_block is None else ready.second_block)


@dataclass(frozen=True)
class Toolchain:
    """What the board folder's Makefile compiles with: the compiler, and its Debian packages."""

    compiler: str
    packages: str


@dataclass(frozen=True)
class Runner:
    """How tinyprop starts a built board: "emulator" runs `command` ({firmware}, {uart_fd}
    filled in; `packages` has its program), "process" runs the firmware itself on this machine.
    `bulk_samples`: samples go as bulk files in the run's folder, not over the link."""

    kind: str
    command: tuple[str, ...]
    packages: str
    bulk_samples: bool


@dataclass(frozen=True)
class Image:
    """A prebuilt application image written with esptool: its chip, flash offset and speed."""

    chip: str
    offset: str
    baud: int


@dataclass(frozen=True)
class Flashing:
    """How a real board is flashed: PlatformIO's env (in the board folder's own platformio.ini
    if it has one, else the repository's), and the esptool image it takes, if any."""

    platformio_env: str
    image: Image | None


@dataclass(frozen=True)
class BoardProfile:
    name: str  # the folder's name
    description: str
    sram: int
    flash: int
    runtime: tuple[tuple[str, int], ...]  # (what, bytes) outside the device loop
    device: int  # the device loop's own RAM: frame buffers, session, record header
    margin: int  # planning margin (0 on the real boards)
    placement: str  # "static" (.bss) or "heap" (two allocations)
    heap_blocks: tuple[int, ...]  # heap boards: the arena's block, the params record's
    float_abi: str
    kernels: str  # the convert --target its firmware builds: cortex-m4 or ref
    link: str  # "uart", "usb-cdc", "pipe"
    baud: int  # 0: the link ignores it
    path: Path  # its profile.json
    toolchain: Toolchain | None  # None: tinyprop does not build it
    runner: Runner | None  # None: tinyprop does not start it (a real board)
    flashing: Flashing | None  # None: not flashed (built and started here)

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def in_tree(self) -> bool:
        """One of the repository's boards (boards/<name>/)."""
        return self.folder == BOARDS_ROOT.resolve() / self.name

    @property
    def arg(self) -> str:
        """What --board takes to name it: its name, or a board folder's path."""
        return self.name if self.in_tree else str(self.folder)

    @property
    def shown_path(self) -> str:
        return f"boards/{self.name}/{DESCRIPTOR}" if self.in_tree else str(self.path)

    @property
    def reserve(self) -> int:
        """What a static board's plan leaves of its SRAM: runtime, device loop, margin."""
        return sum(b for _, b in self.runtime) + self.device + self.margin

    def room(self, budget: int | None = None, reserve: int | None = None) -> Room:
        """What `convert --board` plans within; `budget`/`reserve` override the profile's
        (a heap board's blocks still bound the arena and the params region)."""
        if self.placement == "heap":
            arena_block, record_block = self.heap_blocks
            params_block = record_block - RECORD_HEADER_BYTES
            return Room(budget if budget is not None else arena_block + params_block,
                        reserve if reserve is not None else 0, arena_block, params_block,
                        self.arg, self.shown_path)
        return Room(budget if budget is not None else self.sram,
                    reserve if reserve is not None else self.reserve, board=self.arg,
                    source=self.shown_path)

    def capacity(self) -> Capacity:
        """The RAM a blob's arena and params record can physically have (no margin)."""
        if self.placement == "heap":
            arena_block, record_block = self.heap_blocks
            return Capacity(arena_block + record_block, arena_block, record_block)
        free = (self.sram - sum(b for _, b in self.runtime) - self.device
                + RECORD_HEADER_BYTES)  # the header is the record's, counted with it
        return Capacity(free, free, free)

    def where(self) -> str:
        return f"board {self.name} ({self.shown_path})"


def _value(entry: dict | int, what: str, path: Path) -> int:
    value = entry["value"] if isinstance(entry, dict) else entry
    if not isinstance(value, int) or value < 0:
        raise TinypropError(f"{path}: {what} must be a byte count; fix the profile")
    return value


def _known() -> str:
    return (f"use one of {', '.join(board_names())}, or the path of a board folder holding a "
            f"{DESCRIPTOR} (a copy of one of those, under boards/)")


def _board_folder(spec: str) -> Path:
    """The folder `spec` names: boards/<spec>, else the folder at path `spec`."""
    named = BOARDS_ROOT / spec
    if "/" not in spec and (named / DESCRIPTOR).is_file():
        return named.resolve()
    folder = Path(spec)
    if not folder.is_dir():
        raise TinypropError(f"--board {spec}: no board of that name or folder; {_known()}")
    if not (folder / DESCRIPTOR).is_file():
        raise TinypropError(f"--board {spec}: that folder has no {DESCRIPTOR}, so it is not a "
                            f"board; {_known()}")
    return folder.resolve()


def _runner(d: dict | None) -> Runner | None:
    if d is None:
        return None
    command = tuple(d.get("command", ()))
    if d["kind"] not in RUN_KINDS:
        raise ValueError(f"run.kind {d['kind']!r} is not one of {', '.join(RUN_KINDS)}")
    if d["kind"] == "emulator" and not all(any(f in a for a in command)
                                           for f in EMULATOR_FIELDS):
        raise ValueError(f"run.command must hold {' and '.join(EMULATOR_FIELDS)}")
    return Runner(d["kind"], command, d.get("packages", ""), bool(d["bulk_samples"]))


def _flashing(d: dict | None) -> Flashing | None:
    if d is None:
        return None
    image = d.get("image")
    return Flashing(d["platformio_env"],
                    Image(image["chip"], image["offset"], image["baud"]) if image else None)


@cache
def load_profile(spec: str) -> BoardProfile:
    """The board `spec` names: a folder under boards/ by its name, or a board folder anywhere
    by its path. An unknown name, or a folder without a valid descriptor, is refused in one
    line that lists the known boards."""
    path = _board_folder(spec) / DESCRIPTOR
    try:
        d = json.loads(path.read_text())
        runtime = tuple((r["what"], _value(r["bytes"], r["what"], path)) for r in d["runtime"])
        blocks = tuple(_value(b["bytes"], b["what"], path) for b in d.get("heap_blocks", []))
        build = d.get("build")
        profile = BoardProfile(
            path.parent.name, d["description"], _value(d["sram_bytes"], "sram_bytes", path),
            _value(d["flash_bytes"], "flash_bytes", path), runtime,
            _value(d["device_bytes"], "device_bytes", path),
            _value(d["plan_margin_bytes"], "plan_margin_bytes", path), d["placement"], blocks,
            d["float_abi"], d["kernels"]["target"], d["link"]["kind"], d["link"]["baud"], path,
            Toolchain(build["compiler"], build["packages"]) if build else None,
            _runner(d.get("run")), _flashing(d.get("flash")))
    except (KeyError, TypeError, ValueError) as exc:
        raise TinypropError(f"--board {spec}: {path} is not a valid board descriptor "
                            f"({type(exc).__name__}: {exc}); compare it with "
                            f"boards/qemu-m4/{DESCRIPTOR}, or {_known()}") from None
    if profile.placement not in ("static", "heap") or (
            (profile.placement == "heap") != (len(blocks) == 2)):
        raise TinypropError(f"{path}: placement must be static, or heap with two heap_blocks")
    if profile.kernels not in TARGETS:
        raise TinypropError(f"{path}: kernels.target {profile.kernels!r} is not one of "
                            f"{', '.join(TARGETS)}; fix the profile")
    if profile.runner is not None and profile.toolchain is None:
        raise TinypropError(f"{path}: a board tinyprop starts needs build (its compiler)")
    return profile


def board_names() -> list[str]:
    """The repository's boards: the folders under boards/ holding a descriptor."""
    return sorted(p.parent.name for p in BOARDS_ROOT.glob(f"*/{DESCRIPTOR}"))


# A bare word that is not a board: a Windows serial port.
_PORT_WORD = re.compile(r"COM\d+", re.IGNORECASE)


def board_named(spec: str) -> BoardProfile | None:
    """The board a --board value names (a board's name, or an existing board folder), or None
    when it is a serial port or URL (/dev/ttyACM0, COM3, socket://...); a bare word that names
    no board is refused with the known boards, not tried as a port."""
    if Path(spec).is_dir() or (re.fullmatch(r"[\w.-]+", spec) and not _PORT_WORD.fullmatch(spec)):
        return load_profile(spec)
    return None


def blob_needs(blob: bytes) -> Needs:
    """The arena and params record a device allocates for `blob` (tinyprop.device.firmware's
    blob_header sizes them the same way)."""
    b = read_blob(blob)
    return Needs(max(b.arena_bytes, b.train_arena_bytes), b.params_bytes + RECORD_HEADER_BYTES)


def check_fits(needs: Needs, cap: Capacity, where: str, board: str) -> None:
    """Refuse, in one line, a blob whose arena and params record do not fit `cap`; `where`
    names the board (and its profile or port), `board` the profile to convert for."""
    total = needs.arena + needs.record
    fix = (f"convert the model for it (tinyprop convert MODEL -o MODEL.tpb --board {board} "
           "--scheme auto), or choose a smaller --budget, a larger --reserve or another --scheme")
    if cap.second < cap.free and needs.arena > cap.largest:
        short = (f"its arena needs {needs.arena:,} B in one block and the largest free heap "
                 f"block is {cap.largest:,} B")
    elif cap.second < cap.free and needs.record > cap.second:
        short = (f"its params record needs {needs.record:,} B in one block and the second "
                 f"largest free heap block is {cap.second:,} B")
    elif total > cap.free:
        short = (f"it needs {total:,} B (arena {needs.arena:,} + params record "
                 f"{needs.record:,}) and the board has {cap.free:,} B for them, "
                 f"{total - cap.free:,} B short")
    else:
        return
    raise TinypropError(f"{where}: the blob does not fit: {short}; {fix}")
