"""tinyprop bench: measure every figure docs/benchmarks.md quotes (tinyprop.bench.figures), print
them, write them as JSON."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from ..bench.figures import SECTIONS


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="measure the figures of docs/benchmarks.md; print them and "
                       "write JSON")
    p.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    p.add_argument("--shift", default="haze", help="camera shift for accuracy (default haze)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.005)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seeds", type=int, nargs="+", default=[], metavar="SEED",
                   help="train the accuracy sections once a seed and report the mean and range "
                   "(e.g. --seeds 1 2 3; default: --seed once)")
    p.add_argument("--board", default="qemu-m4", help="board of the board section")
    p.add_argument("--model", help="MLPerf VWW int8 .tflite (default: TINYPROP_ASSETS or cache)")
    p.add_argument("--data", help="dataset dir (default: TINYPROP_ASSETS/datasets/vww-mini)")
    p.add_argument("--out", type=Path, default=Path("out/bench"), help="output folder")
    p.add_argument("--json", type=Path, help="figures as JSON (default OUT/bench.json)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..bench.figures import BenchConfig, Ctx, measure_section

    args.out.mkdir(parents=True, exist_ok=True)
    cfg = BenchConfig(args.shift, args.epochs, args.lr, args.seed, tuple(args.seeds),
                      args.board, args.model, args.data, args.out)
    ctx = Ctx(cfg, say=lambda line: print(line, flush=True))
    result: dict = {"model": str(ctx.model), "shift": args.shift}
    t0 = time.time()
    for section in SECTIONS:
        if section not in args.only:
            continue
        print(f"[{section}]", flush=True)
        result[section] = measure_section(ctx, section, result)
        print(json.dumps(result[section], indent=2), flush=True)
    result["seconds"] = round(time.time() - t0, 1)
    path = args.json or args.out / "bench.json"
    path.write_text(json.dumps(result, indent=2))
    print(f"bench: figures written to {path} ({result['seconds']} s)")
    return 0
