"""tinyprop train: fine-tune a blob on a dataset, on an engine or a board, with a live view."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..data.datasets import PIXELS_HELP
from ..training.run import SCHEDULES


def add_parser(sub: argparse._SubParsersAction) -> None:
    from ..engines import BOARD_HELP

    p = sub.add_parser("train", help="train a blob on a dataset (on-device sparse update)")
    p.add_argument("blob", type=Path, help="training blob from tinyprop convert (.tpb)")
    p.add_argument("--data", type=Path, required=True,
                   help="dataset: a folder with a sub-folder of images or .npy files a class "
                   "(person/, non_person/ for VWW), or a .npz with x and y; an autoencoder "
                   "(convert --loss mse) trains on its normal/ class (or its only one)")
    p.add_argument("--holdout", type=float, default=None, metavar="FRACTION",
                   help="hold out this seeded fraction of every class (e.g. 0.3) instead of "
                   "the dataset's holdout.txt; pass the same to eval")
    p.add_argument("--board", default="reference", help=f"{BOARD_HELP} (default reference)")
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
                   "haze, night, sodium, blur)")
    p.add_argument("--pixels", help=f"for image datasets: {PIXELS_HELP}")
    p.add_argument("--camera", metavar="FORMAT", help="for image datasets: each image as a "
                   "board's camera in this tinyprop learn --format sends it (e.g. qcif-gray: "
                   "train for a gray sensor)")
    p.add_argument("--model", type=Path, help="source .tflite if it moved since convert")
    p.add_argument("--log", type=Path, help="JSONL run log (one line a step)")
    p.add_argument("--out", type=Path, help="write the fine-tuned .tflite here")
    p.add_argument("--checkpoint-every", type=int, default=0, metavar="N",
                   help="save a checkpoint every N steps (Ctrl-C saves one where it stops)")
    p.add_argument("--checkpoint", type=Path, help="checkpoint file (default: BLOB.ckpt)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in the checkpoint (with its --lr, --steps, --data...)")
    p.add_argument("--plain", action="store_true", help="one line a step (auto when not a tty)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..compile.blob import blob_id
    from ..compile.blobfile import load_blob
    from ..data.datasets import load_dataset, load_split
    from ..engines import HParams, open_engine
    from ..monitor import plain_lines, run_dashboard
    from ..monitor.runlog import drop_steps_from
    from ..status import check_hparams
    from ..training.anomaly import normal_samples
    from ..training.export import export_params
    from ..training.head import read_labels
    from ..training.run import (
        RunConfig,
        check_resume,
        check_samples,
        checkpoint_path,
        load_checkpoint,
        save_checkpoint,
        stopped_line,
        training_events,
    )

    tb = load_blob(args.blob, args.model)
    check_hparams(args.lr, args.momentum, tb.program.optimizer_bytes > 0, str(args.blob))
    t_in = tb.graph.input
    # a new head's classes (the blob's own, else those beside its source) pick the folders
    named = tb.labels or read_labels(tb.source)
    xs, ys, _ = load_split(args.data, "train", t_in.s, t_in.zp, args.shift, t_in.shape[1:],
                           args.holdout, named, args.pixels, args.camera)
    classes = load_dataset(args.data, args.holdout, named).classes
    if tb.autoencoder:  # it learns what normal is: from the normal samples alone
        xs, ys = normal_samples(xs, ys, classes, args.data)
    check_samples(tb, xs, ys, args.data, classes)
    total = args.steps if args.steps is not None else len(xs) * (args.epochs or 1)
    identity = {"lr": args.lr, "steps": total, "schedule": args.schedule,
                "momentum": args.momentum, "seed": args.seed, "qas": not args.no_qas,
                "data": str(args.data.resolve()), "holdout": args.holdout, "shift": args.shift,
                "pixels": args.pixels, "camera": args.camera}
    cfg = RunConfig(args.lr, args.seed, args.schedule, args.momentum, args.checkpoint_every,
                    checkpoint_path(args.blob, args.checkpoint), classes, identity,
                    threading.Event())
    crc = blob_id(tb.blob)
    start, params = 0, b""
    if args.resume:  # refused before a board is built for it
        start, params = load_checkpoint(cfg.checkpoint, crc)
        check_resume(cfg.checkpoint, identity)
    hparams = HParams(args.lr, args.seed, not args.no_qas, args.momentum)
    with open_engine(args.board, tb, hparams) as engine:
        if args.resume:
            engine.load_params(params, start)
            if args.log is not None:  # the steps after the checkpoint are trained again
                drop_steps_from(args.log, start)
        elif args.log is not None:
            args.log.unlink(missing_ok=True)  # a new run, a new log; --resume appends to it
        source = training_events(cfg, tb, engine, xs, ys, total, start)
        with stop_on_interrupt(cfg.stop):
            if args.plain or not sys.stdout.isatty():
                state = plain_lines(source, sys.stdout, log_path=args.log)
            else:
                state = run_dashboard(source, log_path=args.log, stop=cfg.stop)
        if state.disconnected:
            print(f"tinyprop train: {stopped_line(tb, engine, state, cfg)}", file=sys.stderr)
            return 1
        if state.stopped is not None:  # keep what was trained
            done = state.stopped["step"]
            save_checkpoint(cfg.checkpoint, done, engine.params(), crc, identity)
            print(f"tinyprop train: interrupted after {done} of {total} steps; "
                  f"{cfg.checkpoint} holds them: continue with --resume, or write the "
                  f"fine-tuned model with tinyprop export {args.blob} -o TUNED.tflite"
                  + ("" if args.checkpoint is None else f" --checkpoint {args.checkpoint}"),
                  file=sys.stderr)
            return INTERRUPTED
        if args.out:
            export_params(tb, engine.params(), args.out)
            print(f"wrote {args.out}")
    return 0


INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a Ctrl-C


@contextmanager
def stop_on_interrupt(stop: threading.Event) -> Iterator[None]:
    """The first Ctrl-C (SIGINT) sets `stop`: the run ends after the step under way, its
    parameters kept; a second one interrupts at once."""
    def first(_signum: int, _frame: object) -> None:
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, first)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
