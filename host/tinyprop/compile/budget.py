"""Memory budgets: parse them, report a program's memory, and pick the `auto` scheme.

A budget is the board's SRAM for the firmware (`--budget 256KB` on a 256 KB part). The firmware
itself needs a reserve of it: its own .data/.bss outside the arena and the params region, and its
stack. What is left, budget - reserve, is the limit for what tinyprop plans: arena_peak +
trainable_bytes + optimizer_bytes (momentum's velocities, with `convert --momentum`). The
default reserve, 24 KB, is the qemu-m4 firmware as linked: a 16 KB stack (measured peak
1,216 B) and about 3.7 KB of static RAM, with margin; a firmware built with a smaller stack
passes `--reserve` (e.g. `--budget 64KB --reserve 8KB`), and `--reserve 0` makes the budget a
limit on arena + trainable alone.

`auto` grows a scheme from the classifier backwards, one candidate at a time (a layer's bias,
then its weights at 1/8, 1/4, 1/2 or all output channels), always taking the candidate with the
best benefit per byte that still fits. Benefit is the first-order loss decrease of one SGD step,
sum of squared gradients of the parameters the candidate would train, measured with the
reference engine on a few calibration samples ("contribution analysis" made cheap). Biases of
every layer are candidates; weights only of the last 12 weighted layers. Calibrate on samples
from the camera the device will see (`convert --calib DIR --calib-shift NAME`): the gradients of
the pretrained model on its own domain say little about what a new camera needs.
"""

from __future__ import annotations

import re

import numpy as np

from ..errors import TinypropError
from ..frontend.graph import Graph
from .scheme import LayerUpdate, SparseScheme, _out_channels, _with_classifier, pick_channels
from .train_plan import F_BIAS, F_WEIGHT, TrainProgram, build_program

UNITS = {"": 1, "B": 1, "KB": 1024, "K": 1024, "KIB": 1024, "MB": 1 << 20, "MIB": 1 << 20}
# RAM the firmware needs outside arena and params (measured on qemu-m4: .data + .bss of the
# device loop, and the stack reserve), subtracted from a board budget.
DEFAULT_RESERVE = 24 * 1024
FRACTIONS = (0.125, 0.25, 0.5, 1.0)


def parse_budget(text: str, flag: str = "--budget") -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in UNITS:
        raise TinypropError(f"{flag} {text}: not a size; use e.g. 64KB, 128KB, 256KB or bytes")
    return int(float(m.group(1)) * UNITS[m.group(2).upper()])


def breakdown(prog: TrainProgram) -> dict:
    """Arena bytes by kind at the arena's peak step: activations, saved tensors, masks,
    gradients, scratch (what is live then; arena_peak adds alignment and fragmentation)."""
    peak_step, peak = 0, -1
    steps = {b.first for b in prog.buffers} | {b.last for b in prog.buffers}
    for st in steps:
        live = sum(b.size for b in prog.buffers if b.first <= st <= b.last)
        if live > peak:
            peak_step, peak = st, live
    names = {"activation": "activations", "saved": "saved_tensors", "mask": "masks",
             "gradient": "gradients", "scratch": "scratch"}
    parts = dict.fromkeys(names.values(), 0)
    for b in prog.buffers:
        if b.first <= peak_step <= b.last:
            parts[names[_buffer_kind(prog, b)]] += b.size
    return parts


def calibration_grad_norms(graph: Graph, samples: list[tuple[np.ndarray, int]]) -> dict:
    """Per weighted op: (sum of squared bias gradients, per-channel squared weight gradients),
    from a full-backward reference pass with a zero learning rate."""
    from ..reference.backward import (
        ReferenceTrainer,  # imported here: only auto needs the reference
    )

    weighted = [op.index for op in graph.weighted_ops()]
    full = SparseScheme("probe", {i: LayerUpdate(i, True, None) for i in weighted})
    for i in weighted:
        full.layers[i].channels = list(range(_out_channels(graph, i)))
    prog = build_program(graph, _with_classifier(graph, full))
    trainer = ReferenceTrainer(prog, lr=0.0)
    norms: dict[int, list] = {i: [0.0, None] for i in weighted}
    trainer.probe = norms
    for x, y in samples:
        trainer.train_step(x, y)
    return norms


def auto_scheme(graph: Graph, budget: int, samples=None, reserve: int = DEFAULT_RESERVE,
                max_layers: int = 12, momentum: bool = False) -> tuple[SparseScheme, TrainProgram]:
    """The greedy scheme under `budget`; with `momentum` every trained parameter also costs
    its float32 velocity."""
    limit = budget - reserve
    weighted = [op.index for op in graph.weighted_ops()]
    norms = calibration_grad_norms(graph, samples) if samples else None
    scheme = _with_classifier(graph, SparseScheme(f"auto@{budget // 1024}KB"))
    prog = build_program(graph, scheme, momentum)
    if prog.memory_bytes > limit:  # even the classifier alone does not fit
        raise over_budget(prog, budget, reserve)
    cls = graph.logits_op().index
    # Biases of every layer are candidates (cheap to hold; their cost is the backward reach,
    # which the greedy charges as arena bytes), weights only of the last max_layers: a camera
    # shift moves early activation statistics, which deep biases can follow, while early
    # weights cost the most arena and overfit a few hundred samples.
    candidates = [i for i in reversed(weighted) if i != cls]
    weight_ok = set(candidates[:max_layers])

    def benefit(op_i: int, what: str, channels: list[int] | None) -> float:
        if norms is None:  # no calibration: prefer layers near the output, weights over biases
            depth = len(weighted) - weighted.index(op_i)
            n = len(channels) if channels else 1
            return (1.0 if what == "bias" else 4.0 * n) / depth
        b, w = norms[op_i]
        if what == "bias":
            return float(b)
        return 0.0 if w is None else float(np.sum(np.asarray(w)[channels]))

    while True:
        best = None
        for i in candidates:
            lu = scheme.layers.get(i)
            options = []
            if lu is None or not lu.bias:
                options.append(("bias", None))
            have = len(lu.channels) if lu is not None and lu.channels else 0
            if i in weight_ok:
                options += [("w", f) for f in FRACTIONS if f * _out_channels(graph, i) > have]
            for what, frac in options:
                trial = SparseScheme(scheme.name, {k: LayerUpdate(v.op, v.bias, v.channels)
                                                   for k, v in scheme.layers.items()})
                t = trial.layers.setdefault(i, LayerUpdate(i))
                if what == "bias":
                    t.bias = True
                    gain = benefit(i, "bias", None)
                else:
                    g_norm = None if norms is None or norms[i][1] is None else norms[i][1]
                    ch = pick_channels(graph, i, frac, g_norm)
                    gain = benefit(i, "w", ch) - (benefit(i, "w", t.channels) if t.channels
                                                  else 0.0)
                    t.channels = ch
                p = build_program(graph, trial, momentum)
                cost = p.memory_bytes
                if cost > limit or gain <= 0:
                    continue
                extra = max(cost - prog.memory_bytes, 1)
                score = gain / extra
                if best is None or score > best[0]:
                    best = (score, trial, p)
        if best is None:
            return scheme, prog
        _, scheme, prog = best


def over_budget(prog: TrainProgram, budget: int, reserve: int) -> TinypropError:
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


def _buffer_owner(prog: TrainProgram, name: str) -> int:
    """The op whose row lists a buffer: the producer of an activation or gradient's tensor
    (op 0 for the model input), the op of a mask or scratch row."""
    if name[0] in "ms":
        return int(name[1:])
    producer = prog.graph.producer(int(name[1:]))
    return producer.index if producer is not None else 0


def _buffer_kind(prog: TrainProgram, b) -> str:
    if b.name[0] == "a":
        return "saved" if b.last > prog.logits + 1 else "activation"
    return {"m": "mask", "g": "gradient", "s": "scratch"}[b.name[0]]


def report_rows(prog: TrainProgram) -> list[dict]:
    """One row per op up to the logits: what it updates, the parameter bytes it holds in RAM,
    and its buffers in the training arena (kind, bytes, lifetime in schedule steps, offset)."""
    bufs: dict[int, list[dict]] = {}
    for b, off in zip(prog.buffers, prog.buffer_offsets, strict=True):
        bufs.setdefault(_buffer_owner(prog, b.name), []).append({
            "name": b.name, "kind": _buffer_kind(prog, b), "bytes": b.size, "first": b.first,
            "last": b.last, "offset": off})
    rows = []
    for op in prog.graph.ops[: prog.logits + 1]:
        t = prog.ops.get(op.index)
        lu = prog.scheme.layers.get(op.index)
        weights = bool(t and t.flags & F_WEIGHT)
        held = (4 * t.n_out if t and t.flags & F_BIAS else 0) + (
            len(t.channels) * t.row_len if weights else 0)
        rows.append({
            "op": op.index, "kind": op.kind,
            "bias": bool(lu and lu.bias),
            "channels": len(t.channels) if weights else 0,
            "out_channels": t.n_out if t and t.n_out else None,
            "backward": t is not None,
            "trainable_bytes": held,
            "buffers": sorted(bufs.get(op.index, []), key=lambda r: (r["first"], r["name"])),
        })
    return rows


def schedule(prog: TrainProgram) -> dict:
    """What the step numbers of a lifetime mean."""
    last = prog.logits + 2 + prog.logits - prog.first
    return {"forward": [0, prog.logits], "loss": prog.logits + 1,
            "backward": [prog.logits + 2, last],
            "legend": f"steps 0..{prog.logits}: forward op k at step k; {prog.logits + 1}: loss; "
                      f"{prog.logits + 2}..{last}: backward of op {prog.logits} down to "
                      f"{prog.first}, op k at step {2 * prog.logits + 2} - k"}
