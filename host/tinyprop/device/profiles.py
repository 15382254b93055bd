"""Board profiles: what each board has for a blob, read from boards/<name>/profile.json, the one
place that knows a board's memory (every figure there says where it comes from).

    profile = load_profile("nano33ble")
    room = profile.room()                    # what `convert --board nano33ble` plans within
    check_fits(blob_needs(blob), profile.capacity(), profile.where())   # refuse before building

Two views of one board. Planning (`room`) takes the budget (the SRAM) less a reserve: what the
runtime takes (OS, core, stacks), the device loop's own buffers and a planning margin; on a heap
board the arena must also fit the largest heap block and the params region the second. Fitting
(`capacity`, and READY's figures from a running board) is physical, without the margin: a blob
that does not fit is refused with one line before anything is built or sent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..compile.blob import read_blob
from ..compile.budget import Room
from ..errors import TinypropError
from ..paths import BOARDS_ROOT

RECORD_HEADER_BYTES = 24  # the params record's header (tp_device.h), beside the params region


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
class BoardProfile:
    name: str
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
    path: Path

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
                        self.name)
        return Room(budget if budget is not None else self.sram,
                    reserve if reserve is not None else self.reserve, board=self.name)

    def capacity(self) -> Capacity:
        """The RAM a blob's arena and params record can physically have (no margin)."""
        if self.placement == "heap":
            arena_block, record_block = self.heap_blocks
            return Capacity(arena_block + record_block, arena_block, record_block)
        free = (self.sram - sum(b for _, b in self.runtime) - self.device
                + RECORD_HEADER_BYTES)  # the header is the record's, counted with it
        return Capacity(free, free, free)

    def where(self) -> str:
        return f"board {self.name} (boards/{self.name}/profile.json)"


def _value(entry: dict | int, what: str, path: Path) -> int:
    value = entry["value"] if isinstance(entry, dict) else entry
    if not isinstance(value, int) or value < 0:
        raise TinypropError(f"{path}: {what} must be a byte count; fix the profile")
    return value


@cache
def load_profile(name: str) -> BoardProfile:
    """The profile of board `name` (a folder under boards/ with a profile.json)."""
    path = BOARDS_ROOT / name / "profile.json"
    if not path.is_file():
        raise TinypropError(f"--board {name}: no board profile of that name; use one of "
                            f"{', '.join(profile_names())}")
    try:
        d = json.loads(path.read_text())
        runtime = tuple((r["what"], _value(r["bytes"], r["what"], path)) for r in d["runtime"])
        blocks = tuple(_value(b["bytes"], b["what"], path) for b in d.get("heap_blocks", []))
        profile = BoardProfile(
            d["board"], d["description"], _value(d["sram_bytes"], "sram_bytes", path),
            _value(d["flash_bytes"], "flash_bytes", path), runtime,
            _value(d["device_bytes"], "device_bytes", path),
            _value(d["plan_margin_bytes"], "plan_margin_bytes", path), d["placement"], blocks,
            d["float_abi"], d["kernels"]["target"], d["link"]["kind"], d["link"]["baud"], path)
    except (KeyError, TypeError, ValueError) as exc:
        raise TinypropError(f"{path}: not a board profile ({type(exc).__name__}: {exc}); "
                            "compare it with boards/qemu-m4/profile.json") from None
    if profile.placement not in ("static", "heap") or (
            (profile.placement == "heap") != (len(blocks) == 2)):
        raise TinypropError(f"{path}: placement must be static, or heap with two heap_blocks")
    return profile


def profile_names() -> list[str]:
    return sorted(p.parent.name for p in BOARDS_ROOT.glob("*/profile.json"))


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
