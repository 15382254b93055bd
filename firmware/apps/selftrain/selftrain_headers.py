"""Write the two headers a self-training build compiles in (firmware/apps/selftrain/selftrain.c): the blob's
and a few labelled samples from a dataset folder, and print the PlatformIO build flags naming
them. For the ESP32 in Wokwi (docs/boards.md):

    tinyprop convert vww_96_int8.tflite -o vww.tpb --scheme last:2
    eval "$(.venv/bin/python firmware/apps/selftrain/selftrain_headers.py vww.tpb --data vww-mini)"
    pio run -e esp32dev-wokwi

With --sketch DIR it also copies them into DIR as model.h and samples.h, where the Arduino
library's SelfTrain example (tinyprop package arduino) includes them.

The samples are the first of each class in the dataset's train split, alternating classes.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import shutil
from pathlib import Path

import numpy as np
from tinyprop.compile.blobfile import load_blob
from tinyprop.data.datasets import load_split
from tinyprop.device.firmware import write_blob_header, write_samples_header
from tinyprop.errors import TinypropError


def pick_samples(xs: np.ndarray, ys: np.ndarray, n: int) -> tuple[np.ndarray, list[int]]:
    """n samples, alternating classes (0, 1, 0, ...), the first of each class in order."""
    classes = sorted(set(ys.tolist()))
    queues = [list(np.flatnonzero(ys == c)) for c in classes]
    order = []
    for i in range(n):
        queue = queues[i % len(classes)]
        if not queue:
            raise TinypropError(f"dataset: too few samples of class {classes[i % len(classes)]} "
                                f"for {n} samples; pass fewer with --samples")
        order.append(int(queue.pop(0)))
    return xs[order], [int(ys[i]) for i in order]


def write_headers(blob: Path, data: Path, samples: int, **run: float) -> tuple[Path, Path]:
    """The blob header and the samples header for a self-training build of `blob`; `run` holds
    write_samples_header's steps, lr and seed where they differ from its defaults."""
    tb = load_blob(blob)
    xs, ys, _ = load_split(data, "train", tb.graph.input.s, tb.graph.input.zp)
    x, labels = pick_samples(xs, ys, samples)
    return write_blob_header(tb.blob), write_samples_header(x, labels, **run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("blob", type=Path, help="training blob (.tpb from tinyprop convert)")
    parser.add_argument("--data", type=Path, required=True, help="dataset folder (person/, "
                        "non_person/)")
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--steps", type=int, help="training steps (default 16)")
    parser.add_argument("--lr", type=float, help="learning rate (default 0.02)")
    parser.add_argument("--seed", type=int, help="stochastic rounding seed (default 7)")
    parser.add_argument("--sketch", type=Path, metavar="DIR", help="also copy the headers into "
                        "this folder as model.h and samples.h (the SelfTrain sketch's)")
    args = parser.parse_args(argv)
    run = {k: v for k, v in (("steps", args.steps), ("lr", args.lr), ("seed", args.seed))
           if v is not None}
    try:
        model, samples = write_headers(args.blob, args.data, args.samples, **run)
    except TinypropError as exc:
        print(f"selftrain_headers: {exc}", file=sys.stderr)
        return 2
    if args.sketch is not None:
        if not args.sketch.is_dir():
            print(f"selftrain_headers: --sketch {args.sketch}: no such folder; give the "
                  "SelfTrain sketch's folder", file=sys.stderr)
            return 2
        shutil.copyfile(model, args.sketch / "model.h")
        shutil.copyfile(samples, args.sketch / "samples.h")
    flags = f'-DTP_MODEL_HEADER=\\"{model}\\" -DTP_SAMPLES_HEADER=\\"{samples}\\"'
    print(f"export PLATFORMIO_BUILD_FLAGS={shlex.quote(flags)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
