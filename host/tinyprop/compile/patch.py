"""Patch-based execution of a frozen leading stage (MCUNetV2): the geometry of the tiles.

The first ops of a model run on the largest maps, so their whole-tensor activations set the
peak. A *stage* (ops 0..n-1, all before the earliest op a training step updates, so no
backward pass reaches it and nothing inside it is saved) can instead run tile by tile: the
stage's output tensor is split into a grid of windows, and for each window every op of the
stage computes only the window of its output that the window needs (the receptive field,
growing by each kernel's halo toward the input), in small tile buffers that the next tile
reuses. Where two windows' receptive fields overlap, the overlap is computed twice: the extra
multiply-accumulates are the price (`PatchStage.extra_macs`).

A tile is the kernel run on a sub-window with adjusted padding, so it is the same integer
arithmetic as whole-tensor execution and gives the same bits: an output window reads exactly
the input taps it reads whole, the taps outside the image are padding as before, and the
window's input buffer starts exactly where its first in-image tap is. This module computes
every tile's windows (`plan_stage`); memory.py places the buffers, blob.py packs them (the
TILE section, docs/blob-format.md), the firmware (tp_patch.c) and the NumPy reference
(`run_stage`) run them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import blob_layout
from ..frontend.graph import Graph, Op
from ..frontend.opparams import OpParams, op_params

MAX_GRID = 8  # tiles per side the planner tries

# n_ops, n_tensors, rows, cols, flags, band bytes, band offset (infer, train), 0
TILE_HEADER = blob_layout.TILE_HEADER.struct
# tensor, 0, buffer bytes, offset (infer), offset (train)
TILE_TENSOR = blob_layout.TILE_TENSOR.struct
TILE_SPAN = blob_layout.TILE_SPAN.struct  # lo, hi
TILE_INPUT_ROWS = 1  # flags: the input is read in row bands (not held whole)
NONE32 = 0xFFFFFFFF


@dataclass(frozen=True)
class Window:
    """Rows [y0, y1) and columns [x0, x1) of a map."""

    y0: int
    y1: int
    x0: int
    x1: int

    @property
    def h(self) -> int:
        return self.y1 - self.y0

    @property
    def w(self) -> int:
        return self.x1 - self.x0

    @property
    def area(self) -> int:
        return max(self.h, 0) * max(self.w, 0)

    def union(self, o: Window) -> Window:
        return Window(min(self.y0, o.y0), max(self.y1, o.y1), min(self.x0, o.x0),
                      max(self.x1, o.x1))

    def contains(self, o: Window) -> bool:
        return self.y0 <= o.y0 and o.y1 <= self.y1 and self.x0 <= o.x0 and o.x1 <= self.x1


def _span(lo: int, hi: int, n: int) -> tuple[int, int]:
    return max(lo, 0), min(hi, n)


def _need(op: Op, p: OpParams, axis: int, lo: int, hi: int, n: int) -> tuple[int, int]:
    """The input span [lo', hi') (clipped to [0, n)) that output span [lo, hi) of the op reads
    along axis 0 (rows) or 1 (columns); the taps outside [0, n) are padding."""
    if op.spec.window == "same":
        return lo, hi
    if op.spec.window == "shift":
        before = op.options["pads"][axis][0]
        return _span(lo - before, hi - before, n)
    k, s_, pad = p.geometry["k"][axis], p.geometry["stride"][axis], p.geometry["pad"][axis]
    return _span(lo * s_ - pad, (hi - 1) * s_ - pad + k, n)


def input_need(op: Op, p: OpParams, out: Window, in_hw: tuple[int, int]) -> Window:
    """The window of the op's (first) activation input that output window `out` reads,
    clipped to the input map: the taps outside it are padding."""
    return Window(*_need(op, p, 0, out.y0, out.y1, in_hw[0]),
                  *_need(op, p, 1, out.x0, out.x1, in_hw[1]))


def tile_pad(op: Op, p: OpParams, out: Window, need: Window) -> tuple[int, int]:
    """The padding (top, left) the kernel takes for output window `out` whose input window
    starts at `need`: TFLite's padding where the window touches the image's top or left edge,
    else 0. PAD (a "shift" window): the rows/columns of padding before the input inside the
    window."""
    if op.spec.window == "shift":
        (top, _), (left, _) = op.options["pads"]
        return need.y0 + top - out.y0, need.x0 + left - out.x0
    (sh, sw), (ph, pw) = p.geometry["stride"], p.geometry["pad"]
    return need.y0 - (out.y0 * sh - ph), need.x0 - (out.x0 * sw - pw)


def op_macs(graph: Graph, op: Op, out: Window | None = None) -> int:
    """Multiply-accumulates of a weighted op over output window `out` (None: all of it)."""
    t = graph.tensors[op.outputs[0]]
    if not op.spec.weighted:
        return 0
    w = graph.tensors[op.inputs[1]]
    # a depthwise output reads its taps of one channel; others a whole weight row
    per_out = w.shape[1] * w.shape[2] if op.spec.channels_last else w.size // w.shape[0]
    positions = t.size // t.shape[-1] if out is None else out.area
    return positions * t.shape[-1] * per_out


def act_inputs(graph: Graph, op: Op) -> list[int]:
    """The op's activation inputs (ADD: two)."""
    return [i for i in op.inputs[:op.spec.act_inputs] if i >= 0 and not graph.tensors[i].is_const]


def stage_splits(graph: Graph, max_ops: int | None = None) -> list[int]:
    """Every n such that ops 0..n-1 can run as a tiled stage: rank-4 ops with a window fed by
    the model input or each other, and only op n-1's output used after them (n >= 2, and n <=
    max_ops when given: a training step updates nothing before max_ops)."""
    tens = graph.tensors
    x0 = graph.inputs[0]
    if len(tens[x0].shape) != 4:
        return []
    out, inside = [], {x0}
    limit = len(graph.ops) - 1 if max_ops is None else min(max_ops, len(graph.ops) - 1)
    for n, op in enumerate(graph.ops[:limit], start=1):
        if op.spec.window is None or len(tens[op.outputs[0]].shape) != 4:
            break
        if any(i not in inside for i in act_inputs(graph, op)):
            break
        inside.add(op.outputs[0])
        y = op.outputs[0]
        later = {i for o in graph.ops[n:] for i in act_inputs(graph, o)} | set(graph.outputs)
        if n >= 2 and later & inside == {y}:
            out.append(n)
    return out


def _bands(n: int, parts: int) -> list[tuple[int, int]]:
    edges = [round(i * n / parts) for i in range(parts + 1)]
    return list(zip(edges[:-1], edges[1:], strict=True))


@dataclass
class PatchStage:
    """Ops 0..n_ops-1 run tile by tile over a rows x cols grid of their output.

    `tensors` are the stage's activations in order: the model input, then each op's output
    (the last one, the stage output, is held whole). `windows[t][i]` is tensor i's window in
    tile t: what op i-1 computes (the stage input: the union of what its consumers read).
    `buffer_bytes[i]` is the tile buffer of tensor i (the largest window x channels); 0 for the
    stage input or output when every window spans the map's full width, so the window is a
    run of whole rows read or written in place.
    """

    graph: Graph
    n_ops: int
    grid: tuple[int, int]
    tensors: list[int]
    windows: list[list[Window]]
    buffer_bytes: list[int]
    macs: int  # the stage's multiply-accumulates, whole-tensor
    extra_macs: int  # what the overlapping windows compute again
    input_rows: bool = False  # the input arrives in row bands (not held whole)
    band_rows: int = 0  # input rows the band buffer holds (input_rows)
    inplace: set[int] = field(default_factory=set)  # ops whose output overwrites their input

    @property
    def output(self) -> int:
        return self.tensors[-1]

    @property
    def n_tiles(self) -> int:
        return self.grid[0] * self.grid[1]

    def describe(self) -> str:
        return (f"ops 0..{self.n_ops - 1} in {self.grid[0]}x{self.grid[1]} tiles "
                f"(+{self.extra_macs:,} MACs, {self.extra_macs / max(self.macs, 1):.1%})"
                + (", input in row bands" if self.input_rows else ""))

    def lifetimes(self) -> dict[int, tuple[int, int]]:
        """Tensor index -> (first, last) step inside a tile of its tile buffer; step k runs op
        k (the stage input's window is copied in at step 0, the output's copied out at step
        n_ops - 1)."""
        life = {self.tensors[0]: (0, 0)}
        for k, op in enumerate(self.graph.ops[: self.n_ops]):
            life[op.outputs[0]] = (k, k)
            for i in act_inputs(self.graph, op):
                life[i] = (life[i][0], k)
        return life

    def band(self, r: int) -> tuple[int, int]:
        """The input rows tile row r reads."""
        ws = [self.windows[r * self.grid[1] + c][0] for c in range(self.grid[1])]
        return min(w.y0 for w in ws), max(w.y1 for w in ws)

    @property
    def band_bytes(self) -> int:
        if not self.input_rows:
            return 0
        _, _, w, c = self.graph.tensors[self.tensors[0]].shape
        return self.band_rows * w * c

    def pack(self, offsets: dict[str, list[int]], bands: dict[str, int]) -> bytes:
        """The TILE section (docs/blob-format.md); offsets[plan][i]: tensor i's tile buffer
        under plan "infer" / "train", bands[plan] the input band's (NONE32: none, or no such
        plan)."""
        flags = TILE_INPUT_ROWS if self.input_rows else 0
        out = bytearray(TILE_HEADER.pack(self.n_ops, len(self.tensors), *self.grid, flags,
                                         self.band_bytes, bands["infer"], bands["train"], 0))
        for i, t in enumerate(self.tensors):
            none = not self.buffer_bytes[i]
            out += TILE_TENSOR.pack(t, 0, self.buffer_bytes[i],
                                    NONE32 if none else offsets["infer"][i],
                                    NONE32 if none else offsets["train"][i])
        cols = self.grid[1]
        for r in range(self.grid[0]):  # row spans: tile (r, 0)'s windows
            for w in self.windows[r * cols]:
                out += TILE_SPAN.pack(w.y0, w.y1)
        for c in range(cols):  # column spans: tile (0, c)'s
            for w in self.windows[c]:
                out += TILE_SPAN.pack(w.x0, w.x1)
        return bytes(out)


def _spans(graph: Graph, ops: list[Op], params: list[OpParams], tensors: list[int], axis: int,
           lo: int, hi: int) -> list[tuple[int, int]] | None:
    """Along one axis (the windows are products of a row span and a column span): the span of
    every stage tensor when the stage output's span is [lo, hi), or None when a windowed op's
    input would not start where its first in-image tap is (columns: its buffer has a wider
    origin because another op reads the tensor further out; a PAD also needs the exact end)
    or a span is empty."""
    tens = graph.tensors
    span = {tensors[-1]: (lo, hi)}
    needs: list[tuple[Op, int, tuple[int, int]]] = []
    for op, p in zip(reversed(ops), reversed(params), strict=True):
        a, b = span[op.outputs[0]]
        for i in act_inputs(graph, op):
            need = _need(op, p, axis, a, b, tens[i].shape[1 + axis])
            if need[1] <= need[0]:
                return None
            needs.append((op, i, need))
            old = span.get(i, need)
            span[i] = (min(old[0], need[0]), max(old[1], need[1]))
    if axis == 1:
        for op, i, need in needs:
            have = span[i]
            window = op.spec.window
            if window != "same" and (need[0] != have[0] or (window == "shift" and need != have)):
                return None
    return [span[t] for t in tensors]


def plan_stage(graph: Graph, n_ops: int, grid: tuple[int, int],
               input_rows: bool = False) -> PatchStage | None:
    """The windows of ops 0..n_ops-1 (a split from stage_splits) over a grid of their output,
    or None when a tile cannot run as a plain kernel call (_spans)."""
    ops = graph.ops[:n_ops]
    tens = graph.tensors
    params = _params(graph)[:n_ops]
    tensors = [graph.inputs[0]] + [op.outputs[0] for op in ops]
    _, h, w, _ = tens[tensors[-1]].shape
    if grid[0] > h or grid[1] > w:
        return None
    rows = [_spans(graph, ops, params, tensors, 0, a, b) for a, b in _bands(h, grid[0])]
    cols = [_spans(graph, ops, params, tensors, 1, a, b) for a, b in _bands(w, grid[1])]
    if any(s is None for s in rows + cols):
        return None
    windows = [[Window(*r[i], *c[i]) for i in range(len(tensors))] for r in rows for c in cols]
    buffer_bytes = []
    for i, t in enumerate(tensors):
        full = all(c[i] == (0, tens[t].shape[2]) for c in cols)
        biggest = max(r[i][1] - r[i][0] for r in rows) * max(c[i][1] - c[i][0] for c in cols)
        whole_io = i in (0, len(tensors) - 1) and full
        buffer_bytes.append(0 if whole_io else biggest * tens[t].shape[3])
    macs = extra = 0
    for k, op in enumerate(ops):
        per = op_macs(graph, op) // max(tens[op.outputs[0]].size // tens[op.outputs[0]].shape[3], 1)
        macs += op_macs(graph, op)
        tiled = sum(r[k + 1][1] - r[k + 1][0] for r in rows) * sum(
            c[k + 1][1] - c[k + 1][0] for c in cols)
        extra += tiled * per - op_macs(graph, op)
    stage = PatchStage(graph, n_ops, grid, tensors, windows, buffer_bytes, macs, extra,
                       input_rows)
    if input_rows:
        stage.band_rows = max(r[0][1] - r[0][0] for r in rows)
    return stage


def _params(graph: Graph) -> list[OpParams]:
    """The graph's op parameters, computed once per graph object."""
    cached = getattr(graph, "_patch_params", None)
    if cached is None:
        cached = [op_params(graph, op) for op in graph.ops]
        graph._patch_params = cached
    return cached


def grids(graph: Graph, n_ops: int) -> list[tuple[int, int]]:
    """The grids tried for a split: 1..MAX_GRID tiles a side, the two sides differing by at
    most one, not more than the map has."""
    _, h, w, _ = graph.tensors[graph.ops[n_ops - 1].outputs[0]].shape
    return [(r, c) for r in range(1, min(MAX_GRID, h) + 1) for c in range(1, min(MAX_GRID, w) + 1)
            if r * c > 1 and abs(r - c) <= 1]


# ---- the NumPy reference of a tiled stage ----

def run_stage(stage: PatchStage, x: np.ndarray, values: dict[int, np.ndarray] | None = None
              ) -> np.ndarray:
    """The stage output computed tile by tile exactly as the firmware does (each op a
    reference kernel on its tile's windows, with the tile's padding); equal to running the
    ops whole (tests/test_patch.py)."""
    g = stage.graph
    tens = g.tensors
    ops = g.ops[: stage.n_ops]
    params = _params(g)[: stage.n_ops]
    _, h, w, c = tens[stage.output].shape
    y = np.zeros((1, h, w, c), np.int8)
    x = np.asarray(x, np.int8).reshape(tens[stage.tensors[0]].shape)
    pos = {t: i for i, t in enumerate(stage.tensors)}
    for tile in stage.windows:
        buf = {stage.tensors[0]: x[:, tile[0].y0:tile[0].y1, tile[0].x0:tile[0].x1]}
        for op, p in zip(ops, params, strict=True):
            out = tile[pos[op.outputs[0]]]
            buf[op.outputs[0]] = tile_op(g, op, p, out, buf, tile, pos, values)
        last = tile[-1]
        y[:, last.y0:last.y1, last.x0:last.x1] = buf[stage.output]
    return y


def tile_op(g: Graph, op: Op, p: OpParams, out: Window, buf: dict, tile: list[Window],
            pos: dict[int, int], values: dict | None = None) -> np.ndarray:
    """One op of one tile: the reference kernel (its kind's `forward`) on its input windows."""
    forward = op.spec.hook("forward")
    tens = g.tensors
    vals = dict(values or {})
    if op.spec.window == "same":
        for i in act_inputs(g, op):
            win = tile[pos[i]]
            vals[i] = buf[i][:, out.y0 - win.y0:out.y1 - win.y0, out.x0 - win.x0:out.x1 - win.x0]
        return forward(g, op, p, vals)
    i = op.inputs[0]
    win = tile[pos[i]]
    need = input_need(op, p, out, tens[i].shape[1:3])
    # rows from the first the window reads (a row offset), columns as the buffer holds them
    # (they start at the window's first; a PAD's end there too)
    vals[i] = buf[i][:, need.y0 - win.y0:need.y1 - win.y0]
    pad = tile_pad(op, p, out, need)
    tp = OpParams(**{**p.__dict__})
    if op.spec.window == "shift":
        sub = Op(op.index, op.kind, op.inputs, op.outputs, {
            **op.options, "pads": ((pad[0], out.h - need.h - pad[0]),
                                   (pad[1], out.w - need.w - pad[1]))})
        return forward(g, sub, tp, vals)
    tp.geometry = {**p.geometry, "pad": pad, "out_hw": (out.h, out.w)}
    return forward(g, op, tp, vals)
