"""Memory budgets: parse them, report a program's memory, and pick the `auto` scheme.

`auto` grows a scheme from the classifier backwards, one candidate at a time (a layer's bias,
then its weights at 1/8, 1/4, 1/2 or all output channels), always taking the candidate with the
best benefit per byte that still fits. Benefit is the first-order loss decrease of one SGD step,
sum of squared gradients of the parameters the candidate would train, measured with the
reference engine on a few calibration samples ("contribution analysis" made cheap).
"""

from __future__ import annotations

import re

import numpy as np

from .errors import TinypropError
from .graph import Graph
from .scheme import LayerUpdate, SparseScheme, _out_channels, _with_classifier, pick_channels
from .train_plan import F_WEIGHT, TrainProgram, build_program

UNITS = {"": 1, "B": 1, "KB": 1024, "K": 1024, "KIB": 1024, "MB": 1 << 20, "MIB": 1 << 20}
# RAM the firmware needs outside arena and params (measured on qemu-m4: .data + .bss of the
# device loop, and the stack reserve), subtracted from a board budget.
DEFAULT_RESERVE = 24 * 1024
FRACTIONS = (0.125, 0.25, 0.5, 1.0)


def parse_budget(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in UNITS:
        raise TinypropError(f"--budget {text}: not a size; use e.g. 64KB, 128KB, 256KB or bytes")
    return int(float(m.group(1)) * UNITS[m.group(2).upper()])


def memory_of(prog: TrainProgram) -> dict:
    return {"arena_peak": prog.arena_bytes, "trainable_bytes": prog.params_bytes,
            "total": prog.arena_bytes + prog.params_bytes}


def breakdown(prog: TrainProgram) -> dict:
    """Bytes by kind at the arena's peak step: activations, saved tensors, masks, gradients."""
    peak_step, peak = 0, -1
    steps = {b.first for b in prog.buffers} | {b.last for b in prog.buffers}
    for st in steps:
        live = sum(b.size for b in prog.buffers if b.first <= st <= b.last)
        if live > peak:
            peak_step, peak = st, live
    parts = {"activations": 0, "saved_tensors": 0, "masks": 0, "gradients": 0, "scratch": 0}
    for b in prog.buffers:
        if not b.first <= peak_step <= b.last:
            continue
        kind = {"a": "activations", "m": "masks", "g": "gradients", "s": "scratch"}[b.name[0]]
        if kind == "activations" and b.last > prog.logits:
            kind = "saved_tensors"
        parts[kind] += b.size
    parts["trainable"] = prog.params_bytes
    return parts


def calibration_grad_norms(graph: Graph, samples: list[tuple[np.ndarray, int]]) -> dict:
    """Per weighted op: (sum of squared bias gradients, per-channel squared weight gradients),
    from a full-backward reference pass with a zero learning rate."""
    from .backward import ReferenceTrainer  # imported here: only auto needs the reference

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
                max_layers: int = 12) -> tuple[SparseScheme, TrainProgram]:
    limit = budget - reserve
    weighted = [op.index for op in graph.weighted_ops()]
    norms = calibration_grad_norms(graph, samples) if samples else None
    scheme = _with_classifier(graph, SparseScheme(f"auto@{budget // 1024}KB"))
    prog = build_program(graph, scheme)
    if prog.arena_bytes + prog.params_bytes > limit:
        raise over_budget(prog, budget, reserve)
    cls = graph.logits_op().index
    candidates = [i for i in reversed(weighted) if i != cls][:max_layers]

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
                p = build_program(graph, trial)
                cost = p.arena_bytes + p.params_bytes
                if cost > limit or gain <= 0:
                    continue
                extra = max(cost - (prog.arena_bytes + prog.params_bytes), 1)
                score = gain / extra
                if best is None or score > best[0]:
                    best = (score, trial, p)
        if best is None:
            return scheme, prog
        _, scheme, prog = best


def over_budget(prog: TrainProgram, budget: int, reserve: int) -> TinypropError:
    parts = breakdown(prog)
    total = prog.arena_bytes + prog.params_bytes + reserve
    detail = ", ".join(f"{k} {v:,} B" for k, v in parts.items() if v)
    return TinypropError(
        f"scheme {prog.scheme.name} needs {total:,} bytes ({detail}, static+stack reserve "
        f"{reserve:,} B), {total - budget:,} B over the {budget:,} B budget; choose a smaller "
        "scheme (bias-only, last:1) or a larger --budget")


def report_rows(prog: TrainProgram) -> list[dict]:
    rows = []
    for op in prog.graph.ops[: prog.logits + 1]:
        t = prog.ops.get(op.index)
        held = sum(b.size for b in prog.buffers if b.name in (f"m{op.index}", f"s{op.index}"))
        lu = prog.scheme.layers.get(op.index)
        rows.append({
            "op": op.index, "kind": op.kind,
            "bias": bool(lu and lu.bias),
            "channels": (len(t.channels) if t and t.flags & F_WEIGHT else 0),
            "out_channels": t.n_out if t else None,
            "backward": t is not None,
            "bytes_held": held,
        })
    return rows
