"""The training loop as a stream of run-log events (docs/runlog.md), its learning-rate
schedule and its checkpoints. `tinyprop train`, the demo and the bench all run it, on any
engine (tinyprop.engines), so a run means the same everywhere.

    cfg = RunConfig(lr=0.005, seed=0, checkpoint_every=50, checkpoint=Path("vww.tpb.ckpt"))
    for event in training_events(cfg, tb, engine, xs, ys, total=828, start=0):
        ...                                    # start, step..., summary
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..compile.blob import blob_id, read_blob
from ..compile.blobfile import TrainingBlob
from ..data.datasets import CLASSES
from ..engines import Engine
from ..errors import TinypropError

# Inferences a board's run summary takes its per-inference cost from: the count barely depends
# on the data (rounding branches only), so a few are enough.
INFERENCE_PROBE = 4
SCHEDULES = ("linear", "constant")


def lr_at(lr: float, schedule: str, step: int, total: int) -> float:
    """The learning rate of step `step` of `total`: batch-1 SGD ends where its last few samples
    pushed it, so `linear` decays to 0 over the run (the holdout accuracy stops swinging by
    several points between epochs). A function of the step alone, so --resume is exact."""
    if schedule == "constant":
        return lr
    return float(np.float32(lr * (1.0 - step / total)))


@dataclass
class RunConfig:
    """What the training loop needs besides the blob, engine and data; train, demo and bench
    each build one, so the loop never depends on a caller's command-line namespace."""

    lr: float
    seed: int
    schedule: str = "linear"
    momentum: float = 0.0
    checkpoint_every: int = 0
    checkpoint: Path | None = None  # where checkpoints go when checkpoint_every > 0
    classes: tuple[str, ...] = CLASSES  # the labels' names (the dataset's classes)
    # What makes a run this run (RUN_FLAGS' keys: lr, steps, data...), kept in its checkpoints
    # so --resume refuses what would not continue it; empty: not checked.
    identity: dict = field(default_factory=dict)
    stop: threading.Event | None = None  # set: the loop stops after the step under way


# The settings a checkpoint records, and the train flag that sets each (--resume names it).
RUN_FLAGS = {"lr": "--lr", "steps": "--steps/--epochs", "schedule": "--schedule",
             "momentum": "--momentum", "seed": "--seed", "qas": "--no-qas", "data": "--data",
             "holdout": "--holdout", "shift": "--shift", "pixels": "--pixels",
             "camera": "--camera"}


def checkpoint_path(blob: Path, checkpoint: Path | None = None) -> Path:
    """Where a run of `blob` keeps its checkpoint: `checkpoint`, else BLOB.ckpt beside it."""
    return checkpoint or blob.with_suffix(blob.suffix + ".ckpt")


def save_checkpoint(path: Path, step: int, params: bytes, blob: int,
                    identity: dict | None = None) -> None:
    """A JSON line (step, blob id, the run's identity), then the params region."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    head = {"step": step, "blob": blob, **({"run": identity} if identity else {})}
    tmp.write_bytes(json.dumps(head).encode() + b"\n" + params)
    tmp.replace(path)  # atomic: a crash leaves the previous checkpoint whole


def check_resume(path: Path, identity: dict) -> None:
    """Refuse, in one line, to resume the run the checkpoint at `path` recorded with settings
    that would not continue it (another lr, length, data...): the first that differs, with
    its flag, the recorded value and the fix. A checkpoint that recorded none is not checked."""
    head = json.loads(path.read_bytes().partition(b"\n")[0])
    recorded = head.get("run") or {}
    for key, flag in RUN_FLAGS.items():
        if key in recorded and key in identity and recorded[key] != identity[key]:
            raise TinypropError(
                f"--resume: {flag} is {identity[key]!r}, the run in {path} was {recorded[key]!r} "
                f"({key}); give the run's value to continue it, or drop --resume to start a "
                "new run")


def load_checkpoint(path: Path, blob: int, flag: str = "--resume") -> tuple[int, bytes]:
    """(step, params region) of the checkpoint at `path`, which must belong to blob id `blob`;
    `flag` names the option that asked for it in the errors."""
    if not path.exists():
        raise TinypropError(f"{flag}: no checkpoint at {path}; train with --checkpoint-every N "
                            "first (it writes one every N steps)")
    head, _, params = path.read_bytes().partition(b"\n")
    try:
        meta = json.loads(head)
        step, owner = int(meta["step"]), meta["blob"]
    except (ValueError, KeyError, TypeError):
        raise TinypropError(f"{path}: not a tinyprop checkpoint; give the file tinyprop train "
                            "--checkpoint-every wrote") from None
    if owner != blob:
        raise TinypropError(f"{path}: checkpoint belongs to another blob; remove it or drop "
                            f"{flag}")
    return step, params


def check_samples(tb: TrainingBlob, xs: np.ndarray, ys: np.ndarray, data: Path,
                  classes: tuple[str, ...] = CLASSES) -> None:
    """Refuse, before any step, samples the model cannot take: bad input, not a lost link."""
    shape = "x".join(map(str, tb.graph.input.shape[1:]))
    if xs[0].size != tb.graph.input.size:
        got = "x".join(map(str, xs.shape[1:]))
        raise TinypropError(f"{data}: samples of {got} ({xs[0].size} values), the model's "
                            f"{shape} input takes {tb.graph.input.size}; give samples of the "
                            "model's input shape")
    if len(classes) < 2 and not tb.autoencoder:
        raise TinypropError(f"{data}: only {classes[0]}; a classifier learns from two classes "
                            "or more: add a folder (or a y value) a class, or convert an "
                            "autoencoder (--loss mse) to learn one class as normal")
    if int(ys.max()) >= tb.classes:
        raise TinypropError(f"{data}: label {int(ys.max())} ({classes[int(ys.max())]}) is out of "
                            f"range for a model with {tb.classes} output(s); train a model with "
                            f"one output per class ({', '.join(classes)})")


def training_events(cfg: RunConfig, tb: TrainingBlob, engine: Engine, xs: np.ndarray,
                    ys: np.ndarray, total: int, start: int) -> Iterator[dict]:
    """Generator of run-log events: the training loop itself, from step `start` to `total` over
    the samples in a fresh order each epoch (engine.prepare gets them first). On an engine that
    counts its cost, the summary has the means `<unit>_per_step` (this run's training steps)
    and `<unit>_per_inference` (a few training samples, measured after the run)."""
    crc = blob_id(tb.blob)
    arena = read_blob(tb.blob).train_arena_bytes  # the plan, the kernels' scratch included
    hello = {"type": "start", "board": engine.name, "model": tb.source.name,
             "blob_id": f"{crc:08x}", "classes": cfg.classes[: tb.classes], "steps_total": total,
             "scheme": tb.program.scheme.name, "lr": cfg.lr, "schedule": cfg.schedule,
             "seed": cfg.seed, "momentum": cfg.momentum,
             # trainable: the params region (runlog.md), optimizer state included as a board
             # reports it
             "memory_plan": {"arena_peak": arena,
                             "trainable": tb.program.region_bytes}}
    if engine.counter_unit is not None:  # a board says what its counter counts and its SRAM
        hello.update(counter_unit=engine.counter_unit, sram=engine.sram)
    engine.prepare(xs, ys)
    yield hello
    n = len(xs)
    counters = []
    t0 = time.time()
    for step in range(start, total):
        if cfg.stop is not None and cfg.stop.is_set():
            yield {"type": "stop", "reason": "interrupted", "step": step,
                   "text": f"stopped by the user after {step} of {total} steps"}
            return
        epoch, i = divmod(step, n)
        order = np.random.default_rng(cfg.seed + epoch).permutation(n)
        j = int(order[i])
        x, y = xs[j], int(ys[j])
        if cfg.schedule != "constant":
            engine.set_lr(lr_at(cfg.lr, cfg.schedule, step, total))
        r = engine.train(x, y, index=j)
        ev = {"type": "step", "step": step, "epoch": epoch, "label": y,
              "prediction": r.prediction, "correct": r.prediction == y,
              "loss": r.loss, "skipped": r.skipped}
        if tb.autoencoder:  # nothing to predict: the loss is the reconstruction error
            ev.update(prediction=None, correct=None)
        mem = dict(r.memory)
        mem.setdefault("arena_peak", arena)
        mem.setdefault("trainable", tb.program.region_bytes)
        ev["memory"] = mem
        if r.counter is not None:
            ev["counter"] = r.counter
            if not r.skipped:
                counters.append(r.counter)
        yield ev
        if cfg.checkpoint_every and (step + 1) % cfg.checkpoint_every == 0:
            save_checkpoint(cfg.checkpoint, step + 1, engine.params(), crc, cfg.identity)
    elapsed = time.time() - t0
    summary = {"type": "summary", "steps": total, "elapsed_s": round(elapsed, 3),
               "samples_per_s": round((total - start) / elapsed, 3) if elapsed > 0 else None}
    if engine.counter_unit is not None:
        summary.update(engine_costs(engine, counters, xs, ys))
    yield summary


def engine_costs(engine: Engine, counters: list[int], xs: np.ndarray, ys: np.ndarray) -> dict:
    """Summary fields of an engine that counts its cost: the counter unit, the mean counter of
    the training steps, and of an inference (INFERENCE_PROBE training samples)."""
    unit = engine.counter_unit
    probe = slice(0, INFERENCE_PROBE)
    inferences = [r.counter for r in engine.evaluate(xs[probe], ys[probe])]
    fields = {"counter_unit": unit, f"{unit}_per_inference": round(float(np.mean(inferences)))}
    if counters:
        fields[f"{unit}_per_step"] = round(float(np.mean(counters)))
    return fields


def stopped_line(tb: TrainingBlob, engine: Engine, state, cfg: RunConfig) -> str:
    """One line for a run that stopped early (a monitor RunState that saw the disconnect):
    where, why, and how to go on."""
    why = state.disconnect_text.removeprefix("DeviceError: ")
    ended = engine.status()
    line = f"the run on {engine.name} stopped after {state.steps_done} steps ({why}"
    line += f"; {ended})" if ended else ")"
    if cfg.checkpoint_every and cfg.checkpoint is not None and cfg.checkpoint.exists():
        step, _ = load_checkpoint(cfg.checkpoint, blob_id(tb.blob))
        return line + f"; {cfg.checkpoint} holds step {step}: continue with --resume"
    return line + "; no checkpoint: run again (with --checkpoint-every N to resume later)"
