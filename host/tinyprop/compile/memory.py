"""Arena layouts: where each buffer lives in the one arena, for inference (`plan_inference`)
and, with the training program's own buffers, for a training step (train_plan.py).

Three lifetime tricks, each proved here and checked again by the firmware's loader:

- a RESHAPE output shares its input's bytes (an alias);
- a tiled stage (patch.py): the model's first ops run tile by tile, their activations only as
  tile buffers that every tile reuses; the stage input (unless it arrives in row bands) and
  output are held whole for the whole stage;
- an in-place depthwise convolution (multiplier 1, its input dead after it): the output
  overwrites the input channel by channel through a one-channel buffer (a channel's output is
  computed into the buffer from the input channel, which nothing reads again, then copied over
  it), so the two tensors share bytes (max of their sizes) and the op needs only
  output-plane bytes more.

`choose_layout` searches both: the stage (split and grid) and the in-place ops that give the
smallest arena, then, among equal arenas, the fewest multiply-accumulates recomputed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from ..frontend.graph import Graph, Op
from .patch import NONE32, PatchStage, act_inputs, grids, plan_stage, stage_splits
from .planner import Buffer, plan_memory

# full plans the stage search may build per layout (the candidates come sorted by promise)
STAGE_TRIALS = 6


class Buf(NamedTuple):
    """A buffer's name in an arena plan: its kind and the tensor or op it belongs to.

    Kinds: "a" a whole activation (index: its root tensor; RESHAPE outputs and in-place
    depthwise outputs share their root's), "p" a stage tensor's tile buffer, "b" the input's
    row band (tensors), "c" an in-place op's channel buffer (op); the training plan adds "g"
    gradients (root tensor), "m" masks and "s" backward scratch (ops)."""

    kind: str
    index: int

    def __str__(self) -> str:
        return f"{self.kind}{self.index}"


@dataclass
class Layout:
    """One arena plan: every buffer (named by a `Buf`) with its lifetime (in op steps) and
    offset."""

    buffers: list[Buffer]
    offsets: list[int]
    arena: int
    alias: dict[int, int] = field(default_factory=dict)
    stage: PatchStage | None = None
    inplace: frozenset[int] = frozenset()  # ops on whole tensors run in place

    def __post_init__(self) -> None:
        self._at = {b.name: off for b, off in zip(self.buffers, self.offsets, strict=True)}

    def offset(self, name: Buf) -> int | None:
        return self._at.get(name)

    def root(self, tensor: int) -> int:
        return self.alias.get(tensor, tensor)

    def tensor_offset(self, tensor: int) -> int | None:
        """The arena offset of an activation held whole (None: tiled or not in this plan)."""
        return self._at.get(Buf("a", self.root(tensor)))

    def tile_offsets(self) -> list[int]:
        """Each stage tensor's tile buffer offset (NONE32: none)."""
        if self.stage is None:
            return []
        return [self._at.get(Buf("p", stage_root(self.stage, t)), NONE32)
                for t in self.stage.tensors]

    def band_offset(self) -> int:
        return self._at.get(Buf("b", self.stage.tensors[0]), NONE32) if self.stage else NONE32

    def inplace_ops(self) -> dict[int, int]:
        """Op -> the offset of its channel buffer, for every op run in place (stage ops
        included)."""
        return {b.name.index: off for b, off in zip(self.buffers, self.offsets, strict=True)
                if b.name.kind == "c"}

    def live(self, step: int) -> list[Buffer]:
        return [b for b in self.buffers if b.first <= step <= b.last and b.size]

    def peak_step(self) -> int:
        """The step with the most bytes live (the arena's peak, up to fragmentation)."""
        steps = {b.first for b in self.buffers} | {b.last for b in self.buffers}
        return max(sorted(steps), key=lambda s: sum(b.size for b in self.live(s)))


# ---- the stage's buffers ----

def stage_root(stage: PatchStage, tensor: int) -> int:
    """The stage tensor whose tile buffer `tensor` shares (an in-place op's output: its
    input's)."""
    for k in sorted(stage.inplace, reverse=True):
        op = stage.graph.ops[k]
        if op.outputs[0] == tensor:
            return stage_root(stage, op.inputs[0])
    return tensor


def stage_buffers(stage: PatchStage) -> list[Buffer]:
    """The tile buffers of a stage (lifetimes inside one tile: every tile replays steps
    0..n_ops-1), the input's row band, and the channel buffers of its in-place ops."""
    g = stage.graph
    life = stage.lifetimes()
    spans: dict[int, list[int]] = {}
    for i, t in enumerate(stage.tensors):
        if not stage.buffer_bytes[i]:
            continue
        r = stage_root(stage, t)
        lo, hi = life[t]
        if r in spans:
            s = spans[r]
            spans[r] = [min(s[0], lo), max(s[1], hi), max(s[2], stage.buffer_bytes[i])]
        else:
            spans[r] = [lo, hi, stage.buffer_bytes[i]]
    bufs = [Buffer(Buf("p", r), size, lo, hi) for r, (lo, hi, size) in sorted(spans.items())]
    if stage.input_rows:
        x0 = g.tensors[stage.tensors[0]]
        bufs.append(Buffer(Buf("b", x0.index), stage.band_rows * x0.shape[2] * x0.shape[3], 0,
                           stage.n_ops - 1))
    pos = {t: i for i, t in enumerate(stage.tensors)}
    for k in sorted(stage.inplace):
        out = pos[g.ops[k].outputs[0]]
        bufs.append(Buffer(Buf("c", k), max(tile[out].area for tile in stage.windows), k, k))
    return bufs


def stage_inplace_ok(stage: PatchStage, k: int) -> bool:
    """Whether stage op k may run in place on its tile buffers: a depthwise convolution with
    multiplier 1 whose input and output are tile buffers and whose input nothing reads after
    it."""
    op = stage.graph.ops[k]
    if not _channelwise(op):
        return False
    pos = {t: i for i, t in enumerate(stage.tensors)}
    i, o = pos[op.inputs[0]], pos[op.outputs[0]]
    return bool(stage.buffer_bytes[i] and stage.buffer_bytes[o]) and \
        stage.lifetimes()[op.inputs[0]][1] == k


def _channelwise(op: Op) -> bool:
    """Whether output channel c reads only input channel c (a depthwise op of multiplier 1)."""
    return op.spec.channelwise and op.options.get("depth_multiplier", 1) == 1


def stage_live(stage: PatchStage) -> int:
    """The most bytes the stage holds at once (its input or band, its output, the tile
    buffers live at a step): a lower bound of any arena that runs it."""
    g = stage.graph
    x0, y = g.tensors[stage.tensors[0]], g.tensors[stage.output]
    bufs = stage_buffers(stage)
    whole = y.size + (0 if stage.input_rows else x0.size)
    return whole + max(sum(b.size for b in bufs if b.first <= k <= b.last)
                       for k in range(stage.n_ops))


@dataclass
class StageOption:
    live: int  # stage_live: what the stage alone holds at its fullest
    extra_macs: int
    stage: PatchStage


@functools.lru_cache(maxsize=16)
def stage_options(graph: Graph, input_rows: bool = False) -> list[StageOption]:
    """Every feasible stage (split x grid, grids of 1..MAX_GRID tiles a side differing by at
    most one) with its in-place ops (greedy, where they lower what the stage holds), the
    Pareto front in (live bytes, extra MACs) of each split, sorted by live bytes. Computed
    once a graph (the search asks it for every layout it tries)."""
    front = []
    for n in stage_splits(graph):
        found = []
        for grid in grids(graph, n):
            st = plan_stage(graph, n, grid, input_rows)
            if st is None:
                continue
            live = stage_live(st)
            for k in range(n):
                if stage_inplace_ok(st, k):
                    st.inplace.add(k)
                    trial = stage_live(st)
                    if trial < live:
                        live = trial
                    else:
                        st.inplace.discard(k)
            found.append(StageOption(live, st.extra_macs, st))
        found.sort(key=lambda o: (o.live, o.extra_macs))
        best_extra = None
        for o in found:
            if best_extra is None or o.extra_macs < best_extra:
                front.append(o)
                best_extra = o.extra_macs
    front.sort(key=lambda o: (o.live, o.extra_macs, o.stage.n_ops))
    return front


# ---- the inference plan ----

def inference_layout(graph: Graph, stage: PatchStage | None = None,
                     inplace: frozenset[int] = frozenset()) -> Layout:
    """The inference plan: each activation from the step that writes it to the last that
    reads it (the output to the end), the model input at offset 0; with a stage and in-place
    ops as given."""
    n = len(graph.ops)
    alias = whole_alias(graph, graph.ops, inplace)
    life: dict[int, list[int]] = {}
    sizes: dict[int, int] = {}
    skip = tiled_tensors(stage)
    for step, op in enumerate(graph.ops):
        for ti in act_inputs(graph, op) + op.outputs:
            if ti in skip:
                continue
            r = alias.get(ti, ti)
            lo_hi = life.setdefault(r, [step, step])
            lo_hi[0], lo_hi[1] = min(lo_hi[0], step), max(lo_hi[1], step)
            sizes[r] = max(sizes.get(r, 0), graph.tensors[ti].size)
    x_in, x_out = alias.get(graph.inputs[0], graph.inputs[0]), alias.get(graph.outputs[0],
                                                                         graph.outputs[0])
    if x_in in life:
        life[x_in][0] = 0
    life[x_out][1] = n
    extend_for_stage(life, stage, alias)
    bufs = [Buffer(Buf("a", r), sizes[r], *life[r], 0 if r == x_in else None)
            for r in sorted(life)]
    bufs += [Buffer(Buf("c", k), plane_bytes(graph, k), k, k) for k in sorted(inplace)]
    if stage is not None:
        bufs += stage_buffers(stage)
    offsets, total = plan_memory(bufs)
    return Layout(bufs, offsets, total, alias, stage, frozenset(inplace))


def whole_alias(graph: Graph, ops: list[Op], inplace: frozenset[int]) -> dict[int, int]:
    """Tensor -> the root whose buffer it shares: RESHAPE outputs and in-place outputs."""
    alias: dict[int, int] = {}
    for op in ops:
        if op.spec.view or op.index in inplace:
            alias[op.outputs[0]] = alias.get(op.inputs[0], op.inputs[0])
    return alias


def tiled_tensors(stage: PatchStage | None) -> set[int]:
    """The activations a stage holds only as tiles: its inner tensors, and the input when it
    arrives in row bands."""
    if stage is None:
        return set()
    return set(stage.tensors[1:-1]) | ({stage.tensors[0]} if stage.input_rows else set())


def extend_for_stage(life: dict[int, list[int]], stage: PatchStage | None,
                     alias: dict[int, int]) -> None:
    """Tiles replay the stage's steps: its input is read until the last op of the last tile,
    its output written from the first op of the first."""
    if stage is None:
        return
    x0, y = (alias.get(t, t) for t in (stage.tensors[0], stage.output))
    if x0 in life:
        life[x0][1] = max(life[x0][1], stage.n_ops - 1)
    life[y][0] = 0


def plane_bytes(graph: Graph, k: int) -> int:
    """An in-place op's channel buffer: one output channel's plane."""
    t = graph.tensors[graph.ops[k].outputs[0]]
    return t.size // t.shape[-1]


def inplace_ok(graph: Graph, layout: Layout, k: int) -> bool:
    """Whether whole-tensor op k may run in place under `layout`: a depthwise convolution with
    multiplier 1 outside the stage whose input buffer (not the model input, pinned at 0) is
    last used at step k and whose output has a buffer of its own."""
    op = graph.ops[k]
    if not _channelwise(op) or (layout.stage is not None and k < layout.stage.n_ops):
        return False
    r_in, r_out = layout.root(op.inputs[0]), layout.root(op.outputs[0])
    b_in = next((b for b in layout.buffers if b.name == Buf("a", r_in)), None)
    return (b_in is not None and b_in.pinned is None and b_in.last == k and r_in != r_out
            and layout.offset(Buf("a", r_out)) is not None)


# ---- the search ----

def choose_layout(graph: Graph, build: Callable[[PatchStage | None, frozenset[int]], Layout],
                  max_ops: int | None = None, patch: str = "auto", input_rows: bool = False,
                  limit: int | None = None) -> Layout:
    """The layout `build(stage, inplace)` makes, by `patch`:

    - "none": whole tensors, no in-place op;
    - "min": the smallest arena, then the fewest recomputed multiply-accumulates;
    - "auto": the fewest recomputed MACs whose arena fits `limit` bytes (whole tensors when
      they fit; "min" when nothing fits); no stage without a limit.

    The stage's ops end before `max_ops` (a training step updates nothing in it);
    `input_rows` reads the input in row bands, which needs a stage. In-place ops are added one
    at a time, each where it lowers the arena (only ops live at the peak can), until the arena
    fits (auto) or stops shrinking (min)."""
    base = None if input_rows else build(None, frozenset())
    if base is not None and (patch == "none" or (patch == "auto" and (
            limit is None or base.arena <= limit))):
        return base  # without the stage options (a second of CPU for VWW)
    options = [] if patch == "none" else [
        o for o in stage_options(graph, input_rows)
        if max_ops is None or o.stage.n_ops <= max_ops]
    best = _smallest(build, options, base)
    if best is None:
        raise ValueError("no stage of this model can read its input in row bands")
    if patch == "auto" and limit is not None and base is not None and best.arena > limit:
        best = with_inplace(graph, build, best, None)
        if best.arena > limit:
            return best  # nothing fits: the smallest there is (the caller says by how much)
    target = limit if patch == "auto" and limit is not None else best.arena
    if base is not None:  # whole tensors with in-place ops alone, when they reach the target
        alone = with_inplace(graph, build, base, target)
        if alone.arena <= target:
            return alone
    if best.stage is not None:
        cheaper = sorted((o for o in options
                          if max(o.live, whole_floor(graph, o.stage.n_ops)) <= target
                          and o.extra_macs < best.stage.extra_macs), key=lambda o: o.extra_macs)
        for o in cheaper[:STAGE_TRIALS]:
            trial = with_inplace(graph, build, build(o.stage, frozenset()), target)
            if trial.arena <= target:
                return trial
    return with_inplace(graph, build, best, target if patch == "auto" else None)


def whole_floor(graph: Graph, n: int) -> int:
    """A lower bound of any arena whose stage ends before op n: the most bytes an op from n on
    needs at once on whole tensors (its inputs and its output; a depthwise op that may run in
    place, the larger of the two plus one channel's plane; a RESHAPE, its input)."""
    return max(_op_floors(graph)[n:], default=0)


@functools.lru_cache(maxsize=16)
def _op_floors(graph: Graph) -> tuple[int, ...]:
    """Each op's whole_floor term, once a graph (the search asks for every candidate)."""
    floors = []
    for op in graph.ops:
        ins = sum(graph.tensors[i].size for i in set(act_inputs(graph, op)))
        out = graph.tensors[op.outputs[0]].size
        need = max(ins, out) if op.spec.view else ins + out
        if _channelwise(op):
            need = min(need, max(ins, out) + plane_bytes(graph, op.index))
        floors.append(need)
    return tuple(floors)


def _smallest(build, options: list[StageOption], base: Layout | None) -> Layout | None:
    """The smallest of `base` and each split's stage that holds the least: splits in the order
    of what their stages hold, until one holds more than the best arena found (it cannot do
    better: what a stage holds at once is a lower bound of any arena running it)."""
    best = base
    split_best: dict[int, StageOption] = {}
    for o in options:
        split_best.setdefault(o.stage.n_ops, o)
    for o in sorted(split_best.values(), key=lambda o: (o.live, o.extra_macs)):
        if best is not None and o.live >= best.arena:
            break
        trial = build(o.stage, frozenset())
        if best is None or (trial.arena, o.extra_macs) < (best.arena, _extra(best)):
            best = trial
    return best


def with_inplace(graph: Graph, build, layout: Layout, target: int | None) -> Layout:
    """`layout` with in-place ops added one at a time, the one that lowers the arena most
    each time, until it reaches `target` (None: until none lowers it)."""
    best = layout
    while target is None or best.arena > target:
        live = {b.name for b in best.live(best.peak_step())}
        tried = None
        for k in range(len(graph.ops)):
            if k in best.inplace or not inplace_ok(graph, best, k):
                continue
            op = graph.ops[k]
            if not {Buf("a", best.root(op.inputs[0])), Buf("a", best.root(op.outputs[0]))} & live:
                continue
            trial = build(best.stage, best.inplace | {k})
            if trial.arena < best.arena and (tried is None or trial.arena < tried.arena):
                tried = trial
        if tried is None:
            break
        best = tried
    return best


def _extra(layout: Layout) -> int:
    return layout.stage.extra_macs if layout.stage is not None else 0


def plan_inference(graph: Graph, patch: str = "auto", input_rows: bool = False,
                   limit: int | None = None, stage: PatchStage | None = None,
                   keep_stage: bool = False) -> Layout:
    """The inference layout (choose_layout over inference_layout); with a `stage` or
    `keep_stage` (a training blob's stage, None included: both plans tile the same windows)
    only its in-place ops are chosen."""
    if stage is not None or keep_stage:
        return with_inplace(graph, lambda _st, ip: inference_layout(graph, stage, ip),
                            inference_layout(graph, stage), None)
    return choose_layout(graph, lambda st, ip: inference_layout(graph, st, ip), None, patch,
                         input_rows, limit)
