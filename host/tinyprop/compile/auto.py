"""The `auto` scheme: the sparse update that promises the most under a memory budget.

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

import numpy as np

from ..frontend.graph import Graph
from ..program import DEFAULT_GRAD, DEFAULT_LOSS, TrainProgram
from .budget import DEFAULT_RESERVE, Room, over_budget
from .scheme import LayerUpdate, SparseScheme, out_channels, pick_channels, with_classifier
from .train_plan import build_program

FRACTIONS = (0.125, 0.25, 0.5, 1.0)
# Calibration samples: spread evenly over the train split. 16 reference backward passes take a
# few seconds; the gradient-norm ranking is stable from about 8.
CALIB_SAMPLES = 16


def calibration_samples(xs: np.ndarray, ys: np.ndarray,
                        n: int = CALIB_SAMPLES) -> list[tuple[np.ndarray, int]]:
    """`n` (sample, label) pairs spread evenly over xs, ys."""
    return [(xs[i], int(ys[i])) for i in range(0, len(xs), max(1, len(xs) // n))][:n]


def calibration_grad_norms(graph: Graph, samples: list[tuple[np.ndarray, int]],
                           grad: str = DEFAULT_GRAD, loss: str = DEFAULT_LOSS) -> dict:
    """Per weighted op: (sum of squared bias gradients, per-channel squared weight gradients),
    from a full-backward reference pass of `loss` with a zero learning rate, in gradient format
    `grad`."""
    from ..reference.backward import ReferenceTrainer  # here: only auto needs the reference

    weighted = [op.index for op in graph.weighted_ops()]
    full = SparseScheme("probe", {i: LayerUpdate(i, True, None) for i in weighted})
    for i in weighted:
        full.layers[i].channels = list(range(out_channels(graph, i)))
    prog = build_program(graph, with_classifier(graph, full), grad=grad, loss=loss)
    trainer = ReferenceTrainer(prog, lr=0.0)
    norms: dict[int, list] = {i: [0.0, None] for i in weighted}
    trainer.probe = norms
    for x, y in samples:
        trainer.train_step(x, y)
    return norms


def auto_scheme(graph: Graph, budget: int | Room, samples=None, reserve: int = DEFAULT_RESERVE,
                max_layers: int = 12, momentum: bool = False, patch: str = "auto",
                input_rows: bool = False, grad: str = DEFAULT_GRAD,
                loss: str = DEFAULT_LOSS) -> tuple[SparseScheme, TrainProgram]:
    """The greedy scheme under `budget` (bytes, less `reserve`; or a Room, a board's); with
    `momentum` every trained parameter also costs its float32 velocity. Unless `patch` is
    "none", candidates are costed with the smallest arena a tiled stage allows (chosen once,
    for the classifier alone, and kept while it stays frozen); the blob then takes the
    cheapest stage that fits (make_blob). Memory is planned with gradient maps in format
    `grad`; `loss` is what the step minimises (the calibration gradients' too)."""
    room = budget if isinstance(budget, Room) else Room(budget, reserve)
    weighted = [op.index for op in graph.weighted_ops()]
    norms = calibration_grad_norms(graph, samples, grad, loss) if samples else None
    scheme = with_classifier(graph, SparseScheme(f"auto@{room.budget // 1024}KB"))
    costing = "none" if patch == "none" else "min"
    stages: dict[int, object] = {}  # earliest trained op -> the smallest arena's stage

    def program(trial: SparseScheme) -> TrainProgram:
        e = trial.earliest()
        if e not in stages:
            p = build_program(graph, trial, momentum, costing, input_rows, grad=grad, loss=loss)
            stages[e] = p.layout.stage if p.layout.stage is not None else "none"
            return p
        return build_program(graph, trial, momentum, stages[e], input_rows, grad=grad, loss=loss)

    prog = program(scheme)
    if not room.fits(prog):  # even the classifier alone does not fit
        raise over_budget(prog, room)
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
                options += [("w", f) for f in FRACTIONS if f * out_channels(graph, i) > have]
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
                p = program(trial)
                if not room.fits(p) or gain <= 0:
                    continue
                extra = max(p.memory_bytes - prog.memory_bytes, 1)
                score = gain / extra
                if best is None or score > best[0]:
                    best = (score, trial, p)
        if best is None:
            return scheme, prog
        _, scheme, prog = best
