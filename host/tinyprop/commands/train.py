"""tinyprop train: fine-tune a blob on a dataset, on an engine or a board, with a live view."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..compile.blob import blob_id
from ..compile.blobfile import NativeEngine, ReferenceEngine, TrainingBlob, load_blob
from ..errors import TinypropError

CLASSES = ["non_person", "person"]
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


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a blob on a dataset (on-device sparse update)")
    p.add_argument("blob", type=Path, help="training blob from tinyprop convert (.tpb)")
    p.add_argument("--data", type=Path, required=True, help="dataset dir (person/, non_person/)")
    p.add_argument("--board", default="reference",
                   help="reference (NumPy), host (C core here), qemu-m4, or a serial port/URL")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--epochs", type=int, default=None)
    g.add_argument("--steps", type=int, default=None)
    p.add_argument("--lr", type=float, default=0.005, help="learning rate (default 0.005)")
    p.add_argument("--schedule", choices=SCHEDULES, default="linear",
                   help="lr over the run: linear decay to 0 at the last step (default), or "
                   "constant")
    p.add_argument("--momentum", type=float, default=0.0,
                   help="SGD momentum in [0, 1), e.g. 0.9 (default 0: plain SGD); needs a blob "
                   "converted with --momentum")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-qas", action="store_true", help="ablation: no quantization-aware scaling")
    p.add_argument("--shift", default="none", help="sensor shift applied to the data (none, "
                   "night, blur)")
    p.add_argument("--model", type=Path, help="source .tflite if it moved since convert")
    p.add_argument("--log", type=Path, help="JSONL run log (one line a step)")
    p.add_argument("--out", type=Path, help="write the fine-tuned .tflite here")
    p.add_argument("--checkpoint-every", type=int, default=0, metavar="N")
    p.add_argument("--checkpoint", type=Path, help="checkpoint file (default: BLOB.ckpt)")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint")
    p.add_argument("--plain", action="store_true", help="one line a step (auto when not a tty)")
    p.set_defaults(func=run)


def open_engine(board: str, tb: TrainingBlob, lr: float, seed: int, qas: bool,
                momentum: float = 0.0):
    if not np.isfinite(lr) or lr < 0:
        raise TinypropError(f"--lr {lr}: must be a finite number >= 0")
    if board == "reference":
        return ReferenceEngine(tb, lr, seed, qas, momentum)
    if board == "host":
        return NativeEngine(tb, lr, seed, qas, momentum)
    from ..compile.blobfile import DeviceEngine

    return DeviceEngine(board, tb, lr, seed, qas, momentum)


def _checkpoint_path(args) -> Path:
    return args.checkpoint or args.blob.with_suffix(args.blob.suffix + ".ckpt")


def save_checkpoint(path: Path, step: int, params: bytes, blob_crc: int) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(json.dumps({"step": step, "blob": blob_crc}).encode() + b"\n" + params)
    tmp.replace(path)  # atomic: a crash leaves the previous checkpoint whole


def load_checkpoint(path: Path, blob_crc: int) -> tuple[int, bytes]:
    if not path.exists():
        raise TinypropError(f"--resume: no checkpoint at {path}; run without --resume first")
    head, _, params = path.read_bytes().partition(b"\n")
    meta = json.loads(head)
    if meta["blob"] != blob_crc:
        raise TinypropError(f"{path}: checkpoint belongs to another blob; remove it or drop "
                            "--resume")
    return int(meta["step"]), params


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


def training_events(args: RunConfig, tb: TrainingBlob, engine, xs, ys, total: int, start: int):
    """Generator of run-log events: the training loop itself. On a board that counts its cost,
    the summary has the means `<unit>_per_step` (this run's training steps) and
    `<unit>_per_inference` (a few training samples, measured after the run)."""
    crc = blob_id(tb.blob)
    hello = {"type": "start", "board": engine.name, "model": tb.source.name,
             "blob_id": f"{crc:08x}", "classes": CLASSES[: tb.classes], "steps_total": total,
             "scheme": tb.program.scheme.name, "lr": args.lr, "schedule": args.schedule,
             "seed": args.seed, "momentum": args.momentum,
             # trainable: the params region (runlog.md), optimizer state included as a board
             # reports it
             "memory_plan": {"arena_peak": tb.program.arena_bytes,
                             "trainable": tb.program.region_bytes}}
    device = getattr(engine, "device", None)
    if device is not None:  # a board says what its counter counts and its SRAM (runlog.md)
        hello.update(counter_unit=device.counter_unit, sram=device.ready.sram_bytes)
    yield hello
    n = len(xs)
    counters = []
    t0 = time.time()
    for step in range(start, total):
        epoch, i = divmod(step, n)
        order = np.random.default_rng(args.seed + epoch).permutation(n)
        j = int(order[i])
        x, y = xs[j], int(ys[j])
        if args.schedule != "constant":
            engine.set_lr(lr_at(args.lr, args.schedule, step, total))
        r = engine.train_index(j, x, y) if hasattr(engine, "train_index") else engine.train(x, y)
        ev = {"type": "step", "step": step, "epoch": epoch, "label": y,
              "prediction": r["prediction"], "correct": r["prediction"] == y,
              "loss": r["loss"], "skipped": r["skipped"]}
        mem = dict(r.get("memory", {}))
        mem.setdefault("arena_peak", tb.program.arena_bytes)
        mem.setdefault("trainable", tb.program.region_bytes)
        ev["memory"] = mem
        if r.get("counter") is not None:
            ev["counter"] = r["counter"]
            if not r["skipped"]:
                counters.append(r["counter"])
        yield ev
        if args.checkpoint_every and (step + 1) % args.checkpoint_every == 0:
            save_checkpoint(args.checkpoint, step + 1, engine.params(), crc)
    elapsed = time.time() - t0
    summary = {"type": "summary", "steps": total, "elapsed_s": round(elapsed, 3),
               "samples_per_s": round((total - start) / elapsed, 3) if elapsed > 0 else None}
    if device is not None:
        summary.update(board_costs(engine, counters, xs, ys, tb.classes))
    yield summary


def board_costs(engine, counters: list[int], xs, ys, classes: int) -> dict:
    """Summary fields of a board: its counter unit, the mean counter of the training steps, and
    of an inference (INFERENCE_PROBE training samples, evaluated on the board)."""
    from ..training.evaluate import evaluate_engine

    unit = engine.device.counter_unit
    probe = slice(0, INFERENCE_PROBE)
    cost = evaluate_engine(engine, xs[probe], ys[probe], CLASSES[:classes])
    fields = {"counter_unit": unit, f"{unit}_per_inference": round(cost[f"{unit}_per_inference"])}
    if counters:
        fields[f"{unit}_per_step"] = round(float(np.mean(counters)))
    return fields


def check_samples(tb: TrainingBlob, xs: np.ndarray, ys: np.ndarray, data: Path) -> None:
    """Refuse, before any step, samples the model cannot take: bad input, not a lost link."""
    shape = "x".join(map(str, tb.graph.input.shape[1:]))
    if xs[0].size != tb.graph.input.size:
        raise TinypropError(f"{data}: images become samples of {xs[0].size} bytes, the model's "
                            f"{shape} input takes {tb.graph.input.size}; train a model with a "
                            "96x96x3 input")
    if int(ys.max()) >= tb.classes:
        raise TinypropError(f"{data}: label {int(ys.max())} ({CLASSES[int(ys.max())]}) is out of "
                            f"range for a model with {tb.classes} output(s); train a model with "
                            f"one output per class ({', '.join(CLASSES)})")


def ended_early(args, tb: TrainingBlob, engine, state) -> str:
    """One line for a run that stopped: where, why, and how to go on."""
    why = state.disconnect_text.removeprefix("DeviceError: ")
    ended = engine.board_status() if hasattr(engine, "board_status") else ""
    line = f"the run on {engine.name} stopped after {state.steps_done} steps ({why}"
    line += f"; {ended})" if ended else ")"
    path = _checkpoint_path(args)
    if args.checkpoint_every and path.exists():
        step, _ = load_checkpoint(path, blob_id(tb.blob))
        return line + f"; {path} holds step {step}: continue with --resume"
    return line + "; no checkpoint: run again (with --checkpoint-every N to resume later)"


def run(args: argparse.Namespace) -> int:
    from ..data.datasets import load_split

    tb = load_blob(args.blob, args.model)
    tb.program.check_momentum(args.momentum, str(args.blob))
    t_in = tb.graph.input
    xs, ys, _ = load_split(args.data, "train", t_in.s, t_in.zp, shift=args.shift)
    check_samples(tb, xs, ys, args.data)
    total = args.steps if args.steps is not None else len(xs) * (args.epochs or 1)
    engine = open_engine(args.board, tb, args.lr, args.seed, not args.no_qas, args.momentum)
    start = 0
    try:
        if hasattr(engine, "prepare"):
            engine.prepare(xs, ys)
        if args.resume:
            start, params = load_checkpoint(_checkpoint_path(args), blob_id(tb.blob))
            engine.load_params(params, start)
        elif args.log is not None:
            args.log.unlink(missing_ok=True)  # a new run, a new log; --resume appends to it
        cfg = RunConfig(args.lr, args.seed, args.schedule, args.momentum,
                        args.checkpoint_every, _checkpoint_path(args))
        source = training_events(cfg, tb, engine, xs, ys, total, start)
        from ..monitor import plain_lines, run_dashboard

        if args.plain or not sys.stdout.isatty():
            state = plain_lines(source, sys.stdout, log_path=args.log)
        else:
            state = run_dashboard(source, log_path=args.log)
        if getattr(state, "disconnected", False):
            print(f"tinyprop train: {ended_early(args, tb, engine, state)}", file=sys.stderr)
            return 1
        if args.out:
            from ..training.export import export_tflite

            values = tb.program.unpack_params(engine.params())
            export_tflite(tb.source, values, args.out)
            print(f"wrote {args.out}")
    finally:
        engine.close()
    return 0
