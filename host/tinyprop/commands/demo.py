"""tinyprop demo: adapt the VWW person detector to a new camera on a board, end to end
(tinyprop.demo), and print its figures."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    from ..data.tasks import TASKS
    from ..engines import BOARD_HELP

    p = sub.add_parser("demo", help="adapt the VWW person detector to a new camera, on device")
    p.add_argument("--board", default="qemu-m4", help=f"{BOARD_HELP} (default qemu-m4)")
    p.add_argument("--shift", default=None,
                   help="camera shift: haze (the default for VWW), night, sodium, blur, none "
                   "(the default for --task)")
    p.add_argument("--task", choices=sorted(TASKS),
                   help="teach the VWW model new classes instead, made from vww-mini's photos "
                   "(coco3: animal, furniture, vehicle): a new head, trained on the board")
    p.add_argument("--budget", default="256KB")
    p.add_argument("--scheme", default="auto", help="auto (default) or any convert --scheme")
    p.add_argument("--epochs", type=int, default=None,
                   help="default 3 (VWW on a shifted camera), 6 (--task)")
    p.add_argument("--lr", type=float, default=None,
                   help="default 0.005 (VWW on a shifted camera), 0.001 (--task)")
    p.add_argument("--schedule", default="linear", choices=("linear", "constant"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", help="MLPerf VWW int8 .tflite (default: TINYPROP_ASSETS, else "
                   "downloaded into the cache)")
    p.add_argument("--data", help="dataset dir (default: TINYPROP_ASSETS/datasets/vww-mini, "
                   "else vww-mini downloaded into the cache)")
    p.add_argument("--out", type=Path, default=Path("out/demo"), help="output folder")
    p.add_argument("--json", type=Path, help="write the figures as JSON")
    p.add_argument("--plain", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..demo import DemoConfig, run_demo
    from ..monitor import plain_lines, run_dashboard

    def show(events, log: Path):
        if args.plain or not sys.stdout.isatty():
            return plain_lines(events, sys.stdout, log_path=log)
        return run_dashboard(events, log_path=log)

    # a new head learns from far fewer photos a class than VWW's two classes: more epochs at a
    # lower rate (docs/your-data.md, measured over seeds)
    shift = args.shift or ("none" if args.task else "haze")
    epochs = args.epochs or (6 if args.task else 3)
    lr = args.lr if args.lr is not None else (0.001 if args.task else 0.005)
    cfg = DemoConfig(args.board, shift, args.budget, args.scheme, epochs, lr,
                     args.schedule, args.seed, args.model, args.data, args.out, args.task)
    done = run_demo(cfg, show, say=lambda line: print(line, flush=True))
    result = done.figures
    mem = result["memory_reported"]
    sram_parts = (f" (static {mem['static']:,} + arena {mem['arena_peak']:,} + trainable "
                  f"{mem['trainable']:,} + stack {mem['stack_peak']:,})"
                  if done.sram_measured else " (arena + trainable; this board reports no more)")
    before, after = done.before, done.after
    start = "new head, untrained" if args.task else "original model"
    rows = [("holdout accuracy before", f"{before['accuracy']:.1%}  (TFLite, {start}; "
             f"{before['n']} photos)"),
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
    what = f"task {args.task}" if args.task else f"camera shift '{shift}'"
    print(f"\ntinyprop demo on {result['board']}, {what}, "
          f"{result['train_steps']} steps")
    for k, v in rows:
        print(f"  {k:<30} {v}")
    print(f"  fine-tuned model: {done.tuned} (checked with the TFLite interpreter)")
    print(f"  run log: {done.log}; report: {done.report}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0
