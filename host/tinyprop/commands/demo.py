"""tinyprop demo: the main job end to end. Take the MLPerf person-detection model, convert it
with the automatic scheme under a budget, measure holdout accuracy on a shifted camera, train on
the board, export the fine-tuned .tflite and check it with the TFLite interpreter."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ..errors import TinypropError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="adapt the VWW person detector to a new camera, on device")
    p.add_argument("--board", default="qemu-m4",
                   help="qemu-m4 (emulated Cortex-M4, default), rv32-virt, host (C core here), "
                   "reference, or a serial port / URL")
    p.add_argument("--shift", default="haze", help="camera shift: haze (default), night, blur")
    p.add_argument("--budget", default="256KB")
    p.add_argument("--scheme", default="auto", help="auto (default) or any convert --scheme")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.005)
    p.add_argument("--schedule", default="linear", choices=("linear", "constant"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", help="MLPerf VWW int8 .tflite (default: TINYPROP_ASSETS or cache)")
    p.add_argument("--data", help="dataset dir (default: TINYPROP_ASSETS/datasets/vww-mini)")
    p.add_argument("--out", type=Path, default=Path("out/demo"), help="output folder")
    p.add_argument("--json", type=Path, help="write the figures as JSON")
    p.add_argument("--plain", action="store_true")
    p.set_defaults(func=run)


def _board_figures(state) -> dict:
    """What the board reported (a RunState): the run summary's cost means and the last step's
    memory."""
    summary, mem = state.summary or {}, state.memory
    unit = summary.get("counter_unit")
    out = {"memory": mem, "counter_unit": unit,
           "per_step": summary.get(f"{unit}_per_step") if unit else None,
           "per_inference": summary.get(f"{unit}_per_inference") if unit else None}
    parts = ("static", "arena_peak", "trainable", "stack_peak")
    out["total_sram"] = sum(mem[k] for k in parts) if all(k in mem for k in parts) else None
    return out


def run(args: argparse.Namespace) -> int:
    from ..compile.build import build
    from ..compile.report import figures
    from ..data.assets import resolve_dataset, resolve_model
    from ..data.datasets import load_split
    from ..monitor import plain_lines, run_dashboard
    from ..training.evaluate import evaluate_tflite
    from ..training.export import export_tflite
    from .train import RunConfig, open_engine, training_events

    t_start = time.time()
    model = resolve_model(args.model)
    data = resolve_dataset(args.data)
    args.out.mkdir(parents=True, exist_ok=True)
    calib = data if args.scheme == "auto" else None
    print(f"converting {model.name} with scheme {args.scheme} under {args.budget}"
          + (f" (calibrating on '{args.shift}' samples)" if calib else ""), flush=True)
    tb = build(model, args.scheme, args.budget, calib, calib_shift=args.shift)
    blob_path = args.out / "vww.tpb"
    blob_path.write_bytes(tb.blob)
    fig = figures(tb.program, tb.blob)
    t_in = tb.graph.input
    xs, ys, _ = load_split(data, "train", t_in.s, t_in.zp, shift=args.shift)
    xh, yh, _ = load_split(data, "holdout", t_in.s, t_in.zp, shift=args.shift)
    before = evaluate_tflite(model, xh, yh)
    print(f"scheme {fig['scheme']}; holdout accuracy on '{args.shift}' before: "
          f"{before['accuracy']:.3f}", flush=True)

    engine = open_engine(args.board, tb, args.lr, args.seed, True)
    total = len(xs) * args.epochs
    log = args.out / "run.jsonl"
    log.unlink(missing_ok=True)  # the log of an earlier demo in this folder
    t0 = time.time()
    try:
        if hasattr(engine, "prepare"):
            engine.prepare(xs, ys)
        cfg = RunConfig(args.lr, args.seed, args.schedule)  # plain SGD, no checkpoints
        source = training_events(cfg, tb, engine, xs, ys, total, 0)
        if args.plain or not sys.stdout.isatty():
            state = plain_lines(source, sys.stdout, log_path=log)
        else:
            state = run_dashboard(source, log_path=log)
        if state.disconnected:
            raise TinypropError(f"the demo's board {engine.name} stopped: "
                                f"{state.disconnect_text}; run the demo again")
        params = engine.params()
    finally:
        engine.close()
    train_s = time.time() - t0
    tuned = export_tflite(model, tb.program.unpack_params(params), args.out / "vww_tuned.tflite")
    after = evaluate_tflite(tuned, xh, yh)
    from ..monitor.report import draw_report
    from ..monitor.runlog import RunLog

    with RunLog(log) as rl:  # the holdout scores, so the report shows them beside the curves
        for step, r in ((0, before), (total, after)):
            state.fold(rl.write({"type": "eval", "time": state.time, "split": "holdout",
                                 "step": step, "accuracy": r["accuracy"],
                                 "per_class": r["per_class"], "confusion": r["confusion"]}))
    draw_report(state, args.out / "report.png")
    dev = _board_figures(state)
    unit = dev["counter_unit"]
    result = {
        "board": engine.name, "shift": args.shift, "scheme": fig["scheme"],
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
    mem = dev["memory"]
    sram_parts = (f" (static {mem['static']:,} + arena {mem['arena_peak']:,} + trainable "
                  f"{mem['trainable']:,} + stack {mem['stack_peak']:,})"
                  if dev["total_sram"] else " (arena + trainable; this board reports no more)")
    rows = [("holdout accuracy before", f"{before['accuracy']:.1%}  (TFLite, original model)"),
            ("holdout accuracy after", f"{after['accuracy']:.1%}  (TFLite, fine-tuned model)"),
            ("per class after", ", ".join(f"{k} {v:.1%}" for k, v in after["per_class"].items()
                                          if v is not None)),
            ("total SRAM", f"{result['total_sram']:,} B" + sram_parts),
            ("inference arena", f"{result['inference_arena']:,} B"),
            ("blob (flash)", f"{result['flash_bytes']:,} B")]
    if result["instructions_per_step"]:
        rows += [("instructions / training step", f"{result['instructions_per_step']:,}"),
                 ("instructions / inference", f"{result['instructions_per_inference']:,}")]
    rows += [("samples / s (end to end)", f"{result['samples_per_s']}"),
             ("time (whole demo)", f"{result['demo_seconds']:.0f} s")]
    print(f"\ntinyprop demo on {engine.name}, camera shift '{args.shift}', {total} steps")
    for k, v in rows:
        print(f"  {k:<30} {v}")
    print(f"  fine-tuned model: {tuned} (checked with the TFLite interpreter)")
    print(f"  run log: {log}; report: {args.out / 'report.png'}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0
