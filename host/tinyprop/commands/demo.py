"""tinyprop demo: the main job end to end. Take the MLPerf person-detection model, convert it
with the automatic scheme under a budget, measure holdout accuracy on a shifted camera, train on
the board, export the fine-tuned .tflite and check it with the TFLite interpreter."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="adapt the VWW person detector to a new camera, on device")
    p.add_argument("--board", default="qemu-m4",
                   help="qemu-m4 (emulated Cortex-M4, default), host (C core here), reference, "
                   "or a serial port / URL")
    p.add_argument("--shift", default="night", help="camera shift: night, blur, none")
    p.add_argument("--budget", default="256KB")
    p.add_argument("--scheme", default="auto", help="auto (default) or any convert --scheme")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", help="MLPerf VWW int8 .tflite (default: TINYPROP_ASSETS or cache)")
    p.add_argument("--data", help="dataset dir (default: TINYPROP_ASSETS/datasets/vww-mini)")
    p.add_argument("--out", type=Path, default=Path("out/demo"), help="output folder")
    p.add_argument("--json", type=Path, help="write the figures as JSON")
    p.add_argument("--plain", action="store_true")
    p.set_defaults(func=run)


def tflite_accuracy(model: Path, xs: np.ndarray, ys: np.ndarray) -> float:
    import tensorflow as tf

    it = tf.lite.Interpreter(
        model_path=str(model),
        experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    i_in = it.get_input_details()[0]["index"]
    i_out = it.get_output_details()[0]["index"]
    right = 0
    for x, y in zip(xs, ys):
        it.set_tensor(i_in, x[None])
        it.invoke()
        right += int(np.argmax(it.get_tensor(i_out)[0]) == y)
    return right / len(ys)


def run(args: argparse.Namespace) -> int:
    from ..assets import resolve_dataset, resolve_model
    from ..datasets import load_split
    from ..export import export_tflite
    from ..monitor import plain_lines, run_dashboard
    from .convert import build, figures
    from .train import open_engine, training_events

    model = resolve_model(args.model)
    data = resolve_dataset(args.data)
    args.out.mkdir(parents=True, exist_ok=True)
    calib = data if args.scheme == "auto" else None
    graph, prog, blob = build(model, args.scheme, args.budget, calib)
    blob_path = args.out / "vww.tpb"
    blob_path.write_bytes(blob)
    fig = figures(graph, prog, blob)
    t_in = graph.input
    xs, ys, _ = load_split(data, "train", t_in.s, t_in.zp, shift=args.shift)
    xh, yh, _ = load_split(data, "holdout", t_in.s, t_in.zp, shift=args.shift)
    before = tflite_accuracy(model, xh, yh)
    print(f"scheme {fig['scheme']}; holdout accuracy on '{args.shift}' before: {before:.3f}")

    from ..session import load_blob

    tb = load_blob(blob_path)
    engine = open_engine(args.board, tb, args.lr, args.seed, True)
    args.steps, args.checkpoint_every, args.blob = None, 0, blob_path
    total = len(xs) * args.epochs
    log = args.out / "run.jsonl"
    t0 = time.time()
    try:
        if hasattr(engine, "prepare"):
            engine.prepare(xs, ys)
        source = training_events(args, tb, engine, xs, ys, total, 0)
        if args.plain or not sys.stdout.isatty():
            plain_lines(source, sys.stdout, log_path=log)
        else:
            run_dashboard(source, log_path=log)
        params = engine.params()
    finally:
        engine.close()
    train_s = time.time() - t0
    tuned = export_tflite(model, tb.program.unpack_params(params), args.out / "vww_tuned.tflite")
    after = tflite_accuracy(tuned, xh, yh)
    try:
        from ..monitor.report import draw_report
        from ..runlog import RunState, read_runlog

        draw_report(RunState.from_events(read_runlog(log)), args.out / "report.png")
    except Exception as exc:  # the figures stand without the picture
        print(f"(report PNG not drawn: {exc})")
    result = {
        "board": engine.name, "shift": args.shift, "scheme": fig["scheme"],
        "accuracy_before": round(before, 4), "accuracy_after": round(after, 4),
        "holdout": len(yh), "train_steps": total,
        "arena_peak": fig["arena_peak"], "trainable_bytes": fig["trainable_bytes"],
        "inference_arena": fig["inference_arena"], "flash_bytes": fig["flash_bytes"],
        "total_sram": fig["arena_peak"] + fig["trainable_bytes"],
        "instructions_per_step": None,  # measured on qemu-m4 only
        "samples_per_s": round(total / train_s, 2),
    }
    rows = [("holdout accuracy before", f"{before:.1%}"), ("holdout accuracy after", f"{after:.1%}"),
            ("training arena peak", f"{result['arena_peak']:,} B"),
            ("trainable params in RAM", f"{result['trainable_bytes']:,} B"),
            ("inference arena", f"{result['inference_arena']:,} B"),
            ("blob (flash)", f"{result['flash_bytes']:,} B"),
            ("samples / s (end to end)", f"{result['samples_per_s']}")]
    print(f"\ntinyprop demo on {engine.name}, camera shift '{args.shift}'")
    for k, v in rows:
        print(f"  {k:<28} {v}")
    print(f"  fine-tuned model: {tuned} (checked with the TFLite interpreter)")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0
