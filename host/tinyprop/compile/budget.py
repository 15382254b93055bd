"""Memory budgets: parse them, and refuse a program that does not fit one.

A budget is the board's SRAM for the firmware (`--budget 256KB` on a 256 KB part). The firmware
itself needs a reserve of it: its own .data/.bss outside the arena and the params region, and its
stack. What is left, budget - reserve, is the limit for what tinyprop plans: arena_peak +
trainable_bytes + optimizer_bytes (momentum's velocities, with `convert --momentum`). The
default reserve, 24 KB, is the qemu-m4 firmware as linked: a 16 KB stack (measured peak
1,216 B) and about 3.7 KB of static RAM, with margin; a firmware built with a smaller stack
passes `--reserve` (e.g. `--budget 64KB --reserve 8KB`), and `--reserve 0` makes the budget a
limit on arena + trainable alone. A board profile (`convert --board`, tinyprop.device.profiles)
gives both, and on a board that allocates the arena and the params region from a heap, one block
each, the largest block for the arena and the next for the params region (a Room).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import TinypropError
from ..program import TrainProgram
from .report import breakdown

UNITS = {"": 1, "B": 1, "KB": 1024, "K": 1024, "KIB": 1024, "MB": 1 << 20, "MIB": 1 << 20}
# RAM the firmware needs outside arena and params (measured on qemu-m4: .data + .bss of the
# device loop, and the stack reserve), subtracted from a board budget.
DEFAULT_RESERVE = 24 * 1024


def parse_budget(text: str, flag: str = "--budget") -> int:
    """Bytes of a size such as 64KB, 0.5MB or 4096; `flag` names it in the error."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in UNITS:
        raise TinypropError(f"{flag} {text}: not a size; use e.g. 64KB, 128KB, 256KB or bytes")
    return int(float(m.group(1)) * UNITS[m.group(2).upper()])


@dataclass(frozen=True)
class Room:
    """What a plan may hold: arena + params region (+ optimizer state) within budget - reserve,
    and, where the board allocates them as two heap blocks, the arena within `arena_block` and
    the params region within `params_block`. `board` names the profile it came from, `source`
    its file as shown."""

    budget: int
    reserve: int = DEFAULT_RESERVE
    arena_block: int | None = None
    params_block: int | None = None
    board: str | None = None
    source: str | None = None

    @property
    def limit(self) -> int:
        return self.budget - self.reserve

    def scratch_limit(self, prog: TrainProgram) -> int:
        """What the kernels' scratch may grow the arena + params region of `prog` to
        (tinyprop.compile.kernels): the limit, and the arena's heap block where there is one."""
        if self.arena_block is None:
            return self.limit
        return min(self.limit, self.arena_block + prog.region_bytes)

    def fits(self, prog: TrainProgram) -> bool:
        return (prog.memory_bytes <= self.limit
                and (self.arena_block is None or prog.arena_bytes <= self.arena_block)
                and (self.params_block is None or prog.region_bytes <= self.params_block))


def over_budget(prog: TrainProgram, room: Room) -> TinypropError:
    """The error for `prog` not fitting `room`: what it needs, part by part."""
    parts = breakdown(prog)
    detail = ", ".join(f"{k} {v:,} B" for k, v in parts.items() if v)
    optimizer = (f" + optimizer (momentum) {prog.optimizer_bytes:,} B" if prog.optimizer_bytes
                 else "")
    auto = prog.scheme.name.startswith("auto")
    smallest = " (the smallest auto scheme: the classifier alone)" if auto else ""
    fix = "" if auto else "a smaller scheme (e.g. bias-last:N, last:1), "
    where = (f"--board {room.board} ({room.source})" if room.board
             else f"--budget {room.budget:,} B")
    needs = (f"scheme {prog.scheme.describe()}{smallest} needs arena_peak {prog.arena_bytes:,} B "
             f"({detail}) + trainable {prog.params_bytes:,} B{optimizer}")
    total = prog.memory_bytes + room.reserve
    if room.arena_block is not None and prog.arena_bytes > room.arena_block:
        short = (f"the arena does not fit the largest heap block, {room.arena_block:,} B, "
                 f"{prog.arena_bytes - room.arena_block:,} B over")
    elif room.params_block is not None and prog.region_bytes > room.params_block:
        short = (f"the params region does not fit the second heap block, "
                 f"{room.params_block:,} B, {prog.region_bytes - room.params_block:,} B over")
    else:
        short = (f"= {total:,} B with the static/stack reserve {room.reserve:,} B, "
                 f"{total - room.budget:,} B over the {room.budget:,} B budget")
    return TinypropError(
        f"{where}: {needs}; {short}; choose {fix}a larger --budget, or a smaller --reserve if "
        "your firmware's static RAM and stack are smaller"
        + (", or no --momentum" if prog.optimizer_bytes else ""))
