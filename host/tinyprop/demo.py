"""The demo, the main job end to end (`tinyprop demo` prints it): take the MLPerf
person-detection model, convert it with the automatic scheme under a budget, measure holdout
accuracy on a shifted camera, train on the board, export the fine-tuned .tflite and check it
with the TFLite interpreter, then draw the run's report."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .data.datasets import CLASSES
from .errors import TinypropError
from .extras import require
from .monitor.runlog import RunState

SRAM_PARTS = ("static", "arena_peak", "trainable", "stack_peak")


@dataclass
class DemoConfig:
    """The demo's choices (`tinyprop demo`'s options); model and data None: resolved as every
    asset is (TINYPROP_ASSETS, else the cache)."""

    board: str = "qemu-m4"
    shift: str = "haze"
    budget: str = "256KB"
    scheme: str = "auto"
    epochs: int = 3
    lr: float = 0.005
    schedule: str = "linear"
    seed: int = 0
    model: str | None = None
    data: str | None = None
    out: Path = Path("out/demo")
    # a new-class task made from vww-mini (tinyprop.data.tasks, e.g. coco3): the VWW model gets
    # a new head for its classes (training/head.py) and learns them on the board
    task: str | None = None


@dataclass
class DemoRun:
    """What a demo run made: its figures (what `--json` writes), the holdout scores before and
    after (tinyprop.training.evaluate.scores), whether the board reported every part of the SRAM
    it used, and the files it wrote."""

    figures: dict
    before: dict
    after: dict
    sram_measured: bool
    tuned: Path
    log: Path
    report: Path


def _board_figures(state: RunState) -> dict:
    """What the board reported (a RunState): the run summary's cost means and the last step's
    memory."""
    summary, mem = state.summary or {}, state.memory
    unit = summary.get("counter_unit")
    out = {"memory": mem, "counter_unit": unit,
           "per_step": summary.get(f"{unit}_per_step") if unit else None,
           "per_inference": summary.get(f"{unit}_per_inference") if unit else None}
    out["total_sram"] = (sum(mem[k] for k in SRAM_PARTS) if all(k in mem for k in SRAM_PARTS)
                         else None)
    return out


def _task(args: DemoConfig, model: Path, vww_mini: Path,
          say: Callable[[str], None]) -> tuple[Path, Path, tuple[str, ...]]:
    """(the model with a new head, the task's dataset folder, its classes) of args.task."""
    from .data.datasets import load_dataset
    from .data.tasks import build_task
    from .training.head import new_head

    data = build_task(args.task, vww_mini, args.out / args.task)
    classes = load_dataset(data).classes
    say(f"task {args.task}: {', '.join(classes)}; a new head on {model.name}'s features, "
        "initialised from the training photos' class means")
    head = new_head(model, classes, data, args.out / f"{args.task}.head.tflite", shift=args.shift)
    return head, data, classes


def run_demo(args: DemoConfig, show: Callable[[Iterator[dict], Path], RunState],
             say: Callable[[str], None] = print) -> DemoRun:
    """Run the demo; `show` displays the training events (and logs them to the path given),
    returning the monitor's state; `say` prints a progress line."""
    from .compile.build import build
    from .compile.report import figures
    from .data.assets import resolve_dataset, resolve_model
    from .data.datasets import load_split
    from .engines import HParams, open_engine
    from .monitor.report import draw_report
    from .monitor.runlog import RunLog
    from .training.evaluate import evaluate_tflite
    from .training.export import export_params
    from .training.head import read_labels
    from .training.run import RunConfig, training_events

    # it scores with the TFLite interpreter: say so before any download or conversion
    require("tensorflow", "the demo (it scores the models with the TFLite interpreter)")
    t_start = time.time()
    model = resolve_model(args.model)
    data = resolve_dataset(args.data)
    args.out.mkdir(parents=True, exist_ok=True)
    classes = CLASSES
    if args.task is not None:
        model, data, classes = _task(args, model, data, say)
    calib = data if args.scheme == "auto" else None
    say(f"converting {model.name} with scheme {args.scheme} under {args.budget}"
        + (f" (calibrating on '{args.shift}' samples)" if calib else ""))
    tb = build(model, args.scheme, args.budget, calib, calib_shift=args.shift,
               labels=read_labels(model))  # a task's new head: its classes go in the blob
    blob_path = args.out / (f"{args.task}.tpb" if args.task else "vww.tpb")
    blob_path.write_bytes(tb.blob)
    fig = figures(tb.program, tb.blob)
    t_in = tb.graph.input
    xs, ys, _ = load_split(data, "train", t_in.s, t_in.zp, shift=args.shift)
    xh, yh, _ = load_split(data, "holdout", t_in.s, t_in.zp, shift=args.shift)
    before = evaluate_tflite(model, xh, yh, classes)
    say(f"scheme {fig['scheme']}; holdout accuracy on '{args.shift}' before: "
        f"{before['accuracy']:.3f}")

    total = len(xs) * args.epochs
    log = args.out / "run.jsonl"
    log.unlink(missing_ok=True)  # the log of an earlier demo in this folder
    t0 = time.time()
    with open_engine(args.board, tb, HParams(args.lr, args.seed)) as engine:
        cfg = RunConfig(args.lr, args.seed, args.schedule, classes=classes)  # plain SGD
        state = show(training_events(cfg, tb, engine, xs, ys, total, 0), log)
        if state.disconnected:
            raise TinypropError(f"the demo's board {engine.name} stopped: "
                                f"{state.disconnect_text}; run the demo again")
        params = engine.params()
    train_s = time.time() - t0
    tuned = export_params(tb, params, args.out / f"{blob_path.stem}_tuned.tflite")
    after = evaluate_tflite(tuned, xh, yh, classes)
    with RunLog(log) as rl:  # the holdout scores, so the report shows them beside the curves
        for step, r in ((0, before), (total, after)):
            state.fold(rl.write({"type": "eval", "time": state.time, "split": "holdout",
                                 "step": step, "accuracy": r["accuracy"],
                                 "per_class": r["per_class"], "confusion": r["confusion"]}))
    draw_report(state, args.out / "report.png")
    dev = _board_figures(state)
    unit = dev["counter_unit"]
    result = {
        "board": engine.name, "shift": args.shift, "task": args.task, "classes": list(classes),
        "scheme": fig["scheme"],
        "lr": args.lr, "schedule": args.schedule, "epochs": args.epochs,
        "accuracy_before": round(before["accuracy"], 4),
        "accuracy_after": round(after["accuracy"], 4),
        "per_class_before": before["per_class"], "per_class_after": after["per_class"],
        "holdout": len(yh), "train_steps": total,
        "arena_peak": fig["arena_peak"], "trainable_bytes": fig["trainable_bytes"],
        "inference_arena": fig["inference_arena"], "flash_bytes": fig["flash_bytes"],
        "total_sram": dev["total_sram"] or fig["arena_peak"] + fig["trainable_bytes"],
        "memory_reported": dev["memory"],
        "counter_unit": unit,
        "instructions_per_step": dev["per_step"] if unit == "instructions" else None,
        "instructions_per_inference": dev["per_inference"] if unit == "instructions" else None,
        "samples_per_s": round(total / train_s, 2),
        "train_seconds": round(train_s, 1), "demo_seconds": round(time.time() - t_start, 1),
    }
    return DemoRun(result, before, after, dev["total_sram"] is not None, tuned, log,
                   args.out / "report.png")
