"""Offsets in one arena for buffers with lifetimes.

A buffer lives from the step that writes it first to the step that reads it last (inclusive).
Two buffers may share bytes only when their lifetimes do not overlap. We place greedily, first
fit at the lowest offset that clears every already-placed overlapping buffer (TFLite Micro's
GreedyMemoryPlanner), under several orders, and keep the smallest arena.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterable
from dataclasses import dataclass

ALIGN = 8


@dataclass(frozen=True)
class Buffer:
    name: str
    size: int
    first: int
    last: int
    pinned: int | None = None  # fixed offset (the model input sits at 0 in every plan)

    def overlaps(self, other: Buffer) -> bool:
        return self.first <= other.last and other.first <= self.last


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _lowest_gap(busy: Iterable[tuple[int, int]], size: int) -> int:
    """The lowest offset where `size` bytes clear every busy (start, end) range."""
    at = 0
    for lo, hi in sorted(busy):
        if at + size <= lo:
            break
        at = max(at, hi)
    return at


def first_fit(buffers: list[Buffer], offsets: list[int], b: Buffer) -> int:
    """The lowest offset where `b` clears every buffer of a plan (offsets[i] for buffers[i])
    whose lifetime overlaps its own."""
    return _lowest_gap(((offsets[j], offsets[j] + _align(p.size))
                        for j, p in enumerate(buffers) if p.size and p.overlaps(b)),
                       _align(b.size))


def _place(buffers: tuple[Buffer, ...], order: list[int]) -> tuple[list[int], int]:
    offsets = [-1] * len(buffers)
    # first_fit over plain tuples, each placed buffer with bytes as (offset, end, first, last),
    # kept sorted by offset: one pass over them both picks those whose lifetimes overlap and
    # finds the lowest gap (_lowest_gap's scan, without its sort), stopping at the gap. The
    # search over a plan's hundreds of buffers runs thousands of times in auto.
    placed: list[tuple[int, int, int, int]] = []
    for i, b in enumerate(buffers):
        if b.pinned is not None:
            offsets[i] = b.pinned
            if b.size:
                bisect.insort(placed, (b.pinned, b.pinned + _align(b.size), b.first, b.last))
    for i in order:
        b = buffers[i]
        if b.pinned is not None:
            continue
        if b.size == 0:
            offsets[i] = 0
            continue
        first, last, size = b.first, b.last, _align(b.size)
        at = 0
        for lo, hi, f, la in placed:
            if f <= last and first <= la:
                if at + size <= lo:
                    break
                if hi > at:
                    at = hi
        offsets[i] = at
        bisect.insort(placed, (at, at + size, first, last))
    total = max((offsets[i] + _align(b.size) for i, b in enumerate(buffers) if b.size), default=0)
    return offsets, total


def plan_memory(buffers: list[Buffer]) -> tuple[list[int], int]:
    """(offset of each buffer, arena bytes). Offsets are ALIGN-byte aligned."""
    offsets, total = _plan(tuple(buffers))
    return list(offsets), total


# auto costs thousands of trial schemes, most of whose buffer lists it has planned before (the
# demo's 256 KB scheme: 2,685 plans of 306 lists)
@functools.lru_cache(maxsize=512)
def _plan(buffers: tuple[Buffer, ...]) -> tuple[tuple[int, ...], int]:
    n = len(buffers)
    idx = list(range(n))
    orders = [
        sorted(idx, key=lambda i: (-buffers[i].size, buffers[i].first)),  # TFLM greedy by size
        sorted(idx, key=lambda i: (buffers[i].first, -buffers[i].size)),  # by first use
        sorted(idx, key=lambda i: (-(buffers[i].last - buffers[i].first), -buffers[i].size)),
        sorted(idx, key=lambda i: (-buffers[i].size * (buffers[i].last - buffers[i].first + 1))),
    ]
    best: tuple[list[int], int] | None = None
    for order in orders:
        offsets, total = _place(buffers, order)
        if best is None or total < best[1]:
            best = (offsets, total)
    assert best is not None
    return tuple(best[0]), best[1]


def check_plan(buffers: list[Buffer], offsets: list[int], total: int) -> None:
    """Raise AssertionError if two live buffers overlap or one leaves the arena."""
    for i, a in enumerate(buffers):
        if a.size == 0:
            continue
        assert 0 <= offsets[i] and offsets[i] + a.size <= total, a
        for j in range(i + 1, len(buffers)):
            b = buffers[j]
            if b.size and a.overlaps(b):
                disjoint = (offsets[i] + a.size <= offsets[j]
                            or offsets[j] + b.size <= offsets[i])
                assert disjoint, (a, b, offsets[i], offsets[j])
