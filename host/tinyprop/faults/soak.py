"""The soak: many training steps on an emulated board with the demo's blob,
the board saving its params record every `save_every` steps and restarted every `reset_every`
(its process stopped and started again on the same store, as a power cycle does), checked bit for
bit against an uninterrupted run of the same steps on a reference engine.

    figures = run(steps=10000, save_every=500, reset_every=2000)   # ~1 h on qemu-m4

The samples are the demo's (VWW train split seen through the haze shift) taken in order and
cycled; the board reads them from its bulk store. The reference is the host-built C core
("host") by default: the NumPy reference takes seconds a step on the VWW model, and the test
suite proves the two equal bit for bit (test_engines). At every save, after every restart and at
the end, the board's params are pulled and compared with the reference's at the same step; a
difference is a divergence. The board's stack high-water mark (a painted stack, since boot) and
the step's arena peak (both from its METRIC frames) are taken at each save: constant means no
leak or growth over the run.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..device.boards import open_board
from ..device.device import RECORD_HEADER, write_bulk_file
from ..engines import HParams, open_engine
from ..errors import TinypropError

TRAIN_FILE = "soak.bin"
LAST_FIGURES = Path(__file__).with_name("soak_last.json")  # the full run's, committed


def demo_model(shift: str = "haze", budget: str = "256KB"):
    """The demo's blob (automatic scheme under `budget`, calibrated on `shift`) and its training
    samples: (TrainingBlob, int8 inputs, labels), as `tinyprop demo` makes them."""
    from ..compile.build import build
    from ..data.assets import resolve_dataset, resolve_model
    from ..data.datasets import load_split
    from ..training.head import read_labels

    model, data = resolve_model(None), resolve_dataset(None)
    tb = build(model, "auto", budget, data, calib_shift=shift, labels=read_labels(model))
    t_in = tb.graph.input
    xs, ys, _ = load_split(data, "train", t_in.s, t_in.zp, shift=shift)
    return tb, xs, ys


class _Reference:
    """The uninterrupted run: the reference engine stepped through the same samples, on demand,
    up to the step the board is compared at."""

    def __init__(self, engine, xs: np.ndarray, ys: np.ndarray) -> None:
        self.engine, self.xs, self.ys = engine, xs, ys
        self.step = 0

    def params_at(self, step: int) -> bytes:
        if step < self.step:  # the board never goes back past a compared step
            raise TinypropError(f"soak: the reference is at step {self.step}, asked for {step}")
        n = len(self.ys)
        for k in range(self.step, step):
            self.engine.train(self.xs[k % n], int(self.ys[k % n]), index=k % n)
        self.step = step
        return self.engine.params()


def run(steps: int = 10000, save_every: int = 500, reset_every: int = 2000,
        board: str = "qemu-m4", reference: str = "host", lr: float = 0.005, seed: int = 0,
        model=None, workdir: Path | None = None,
        say: Callable[[str], None] = lambda line: None) -> dict:
    """Train `steps` steps on `board`; returns the figures (soak_steps, soak_divergences, resets,
    saves, steps_replayed, checks, stack_high_water and arena_high_water at each save, seconds,
    the reference engine and the steps per second). `model`: (TrainingBlob, xs, ys), default
    demo_model(). A restart that does not come back at the last saved step with its params is a
    divergence too; steps trained after the last save before a restart are trained again."""
    if min(steps, save_every, reset_every) <= 0:
        raise TinypropError("soak: steps, save_every and reset_every must be positive")
    tb, xs, ys = model if model is not None else demo_model()
    hp = HParams(lr, seed)
    n = len(ys)
    figures = {"board": board, "reference": reference, "soak_steps": 0, "soak_divergences": 0,
               "resets": 0, "saves": 0, "steps_replayed": 0, "checks": 0,
               "stack_high_water": [], "arena_high_water": [], "samples": n,
               "save_every": save_every, "reset_every": reset_every}
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp, open_engine(reference, tb, hp) as ref_engine:
        ref = _Reference(ref_engine, xs, ys)
        store = Path(workdir) if workdir is not None else Path(tmp)
        write_bulk_file(store / TRAIN_FILE, xs, ys)

        def check(step: int, got: bytes, when: str) -> None:
            figures["checks"] += 1
            if got != ref.params_at(step):
                figures["soak_divergences"] += 1
                say(f"soak: DIVERGED {when} at step {step}")

        step, saved, boots, next_reset = 0, 0, 0, reset_every
        while step < steps:
            with open_board(board, tb.blob, store) as dev:
                record = dev.pull_record()
                restored = RECORD_HEADER.unpack_from(record)[3]
                if boots > 0:  # after a restart: back at the last save, with its params
                    if restored != saved:
                        figures["soak_divergences"] += 1
                        say(f"soak: restarted at step {restored}, the last save was {saved}")
                    check(restored, record[RECORD_HEADER.size:], "after the restart")
                    figures["steps_replayed"] += step - restored
                boots += 1
                step = restored
                dev.set_hparams(hp.lr, hp.seed, hp.qas, hp.momentum)
                dev.bulk_open(TRAIN_FILE)
                stack = arena = 0
                while step < steps:
                    event = dev.train_bulk(step % n)
                    if event["step"] != step:
                        raise TinypropError(f"soak: the board trained step {event['step']} "
                                            f"where {step} was due")
                    stack = max(stack, event["memory"]["stack_peak"])
                    arena = max(arena, event["memory"]["arena_peak"])
                    step += 1
                    if step % save_every == 0 or step == steps:
                        dev.save()
                        saved = step
                        figures["saves"] += 1
                        figures["stack_high_water"].append(stack)
                        figures["arena_high_water"].append(arena)
                        check(step, dev.pull_params(), "at a save")
                        say(f"soak: step {step}, saved; stack {stack} B, arena {arena} B, "
                            f"{figures['soak_divergences']} divergences, "
                            f"{time.time() - t0:.0f} s")
                    if step == next_reset and step < steps:  # once: replayed steps pass it again
                        figures["resets"] += 1
                        next_reset += reset_every
                        break
    figures["soak_steps"] = step
    figures["seconds"] = round(time.time() - t0, 1)
    figures["steps_per_s"] = round(step / figures["seconds"], 2)
    return figures


def last_figures() -> dict:
    """The committed figures of the last full soak (soak_last.json)."""
    return json.loads(LAST_FIGURES.read_text())
