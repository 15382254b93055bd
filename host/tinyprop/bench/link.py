"""What the serial protocol carries: samples per second through INPUT_CHUNK frames (one 96x96x3
sample is 27 full chunks, each ACKed) on the host board (pipes) and qemu-m4 (its UART on a
loopback socket), and an evaluation end to end there and through semihosting bulk reads.

    python -m tinyprop.bench.link [--samples 20] [--json out/bench/link.json]

Wall-clock figures of this machine: the emulated UART's speed is QEMU's, not a real part's
(docs/boards.md turns them into expectations for the real boards).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from ..compile.blobfile import make_blob
from ..compile.scheme import parse_scheme
from ..data.assets import resolve_model
from ..device.boards import open_board
from ..device.device import write_bulk_file
from ..device.profiles import load_profile
from ..frontend.tflite_reader import read_tflite


def rate(n: int, run) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        run(i)
    return n / (time.perf_counter() - t0)


def measure(board: str, blob: bytes, xs: np.ndarray, n: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp, open_board(board, blob, tmp) as dev:
        dev.write_input(xs[0])  # warm up
        out = {"sample_bytes": int(xs[0].size),
               "transfer_samples_per_s": round(rate(n, lambda i: dev.write_input(xs[i])), 2)}
        out["transfer_bytes_per_s"] = round(out["transfer_samples_per_s"] * xs[0].size)
        out["eval_samples_per_s"] = round(rate(n, lambda i: dev.classify(xs[i])), 2)
        if load_profile(board).runner.bulk_samples:
            write_bulk_file(Path(tmp) / "eval.bin", xs[:n], np.zeros(n, np.uint8))
            dev.bulk_open("eval.bin")
            out["bulk_eval_samples_per_s"] = round(rate(n, dev.evaluate_bulk), 2)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tinyprop.bench.link", description=__doc__)
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    model = resolve_model(None)
    graph = read_tflite(model)
    blob = make_blob(model, parse_scheme(graph, "last:2")).blob
    rng = np.random.default_rng(0)
    xs = rng.integers(-128, 128, (args.samples, *graph.input.shape[1:]), dtype=np.int8)
    figures = {board: measure(board, blob, xs, args.samples) for board in ("host", "qemu-m4")}
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
