"""Memory budgets: parse them, and refuse a program that does not fit one.

A budget is the board's SRAM for the firmware (`--budget 256KB` on a 256 KB part). The firmware
itself needs a reserve of it: its own .data/.bss outside the arena and the params region, and its
stack. What is left, budget - reserve, is the limit for what tinyprop plans: arena_peak +
trainable_bytes + optimizer_bytes (momentum's velocities, with `convert --momentum`). The
default reserve, 24 KB, is the qemu-m4 firmware as linked: a 16 KB stack (measured peak
1,216 B) and about 3.7 KB of static RAM, with margin; a firmware built with a smaller stack
passes `--reserve` (e.g. `--budget 64KB --reserve 8KB`), and `--reserve 0` makes the budget a
limit on arena + trainable alone.
"""

from __future__ import annotations

import re

from ..errors import TinypropError
from .report import breakdown
from .train_plan import TrainProgram

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


def over_budget(prog: TrainProgram, budget: int, reserve: int) -> TinypropError:
    """The error for `prog` not fitting `budget` with `reserve`: what it needs, part by part."""
    parts = breakdown(prog)
    total = prog.memory_bytes + reserve
    detail = ", ".join(f"{k} {v:,} B" for k, v in parts.items() if v)
    optimizer = (f" + optimizer (momentum) {prog.optimizer_bytes:,} B" if prog.optimizer_bytes
                 else "")
    auto = prog.scheme.name.startswith("auto")
    smallest = " (the smallest auto scheme: the classifier alone)" if auto else ""
    fix = "" if auto else "a smaller scheme (e.g. bias-last:N, last:1), "
    return TinypropError(
        f"--budget {budget:,} B: scheme {prog.scheme.describe()}{smallest} needs {total:,} B = "
        f"arena_peak {prog.arena_bytes:,} B ({detail}) + trainable {prog.params_bytes:,} B"
        f"{optimizer} + static/stack reserve {reserve:,} B, {total - budget:,} B over; choose "
        f"{fix}a larger --budget, or a smaller --reserve if your firmware's static RAM and stack "
        "are smaller" + (", or no --momentum" if prog.optimizer_bytes else ""))
