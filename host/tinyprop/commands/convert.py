"""tinyprop convert: an int8 .tflite -> a training blob (and optionally a C header)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..compile.blob import c_header, plan_inference
from ..compile.blobfile import make_blob
from ..compile.budget import (
    DEFAULT_RESERVE,
    auto_scheme,
    breakdown,
    over_budget,
    parse_budget,
    report_rows,
    schedule,
)
from ..compile.scheme import parse_scheme
from ..compile.train_plan import build_program
from ..errors import TinypropError
from ..frontend.tflite_reader import read_tflite

# Calibration samples for --scheme auto: spread evenly over the train split. 16 reference
# backward passes take a few seconds; the gradient-norm ranking is stable from about 8.
CALIB_SAMPLES = 16


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("convert", help="convert an int8 .tflite into a tinyprop training blob")
    p.add_argument("model", type=Path, help="int8 .tflite model")
    p.add_argument("-o", "--output", type=Path, required=True, help="blob to write (.tpb)")
    p.add_argument("--header", type=Path, help="also write the blob as a C header")
    p.add_argument("--scheme", default="last:2",
                   help="bias-only | bias-last:N | last:K | auto | FILE.json (default last:2)")
    p.add_argument("--budget", help="board SRAM for the firmware, e.g. 64KB, 128KB, 256KB: "
                   "arena + trainable parameters must fit in it minus --reserve")
    p.add_argument("--reserve", default=str(DEFAULT_RESERVE),
                   help="SRAM the firmware needs besides arena and parameters (static RAM and "
                   f"stack; default {DEFAULT_RESERVE // 1024}KB, qemu-m4's 16 KB stack + "
                   "static); 0: --budget limits arena + trainable alone")
    p.add_argument("--calib", type=Path, help="dataset dir: calibration samples for --scheme auto")
    p.add_argument("--calib-shift", default="none",
                   help="sensor shift applied to the calibration samples (the target camera)")
    p.add_argument("--momentum", action="store_true",
                   help="reserve SGD momentum's optimizer state: a float32 velocity per trained "
                   "parameter, counted in the budget (then train --momentum 0.9)")
    p.add_argument("--report", action="store_true", help="print the per-layer memory table")
    p.add_argument("--report-json", type=Path, help="write the memory figures as JSON")
    p.set_defaults(func=run)


def build(model: Path, scheme: str, budget: str | None, calib: Path | None = None,
          reserve: str | int = DEFAULT_RESERVE, calib_shift: str = "none",
          momentum: bool = False):
    """(graph, program, blob bytes) for a model and a scheme spec; shared by demo and bench.
    `momentum` plans the optimizer state (one float32 velocity per trained parameter)."""
    graph = read_tflite(model)
    budget_b = parse_budget(budget) if budget else None
    reserve_b = reserve if isinstance(reserve, int) else parse_budget(reserve, "--reserve")
    if scheme == "auto":
        if budget_b is None:
            raise TinypropError("--scheme auto needs --budget (e.g. --budget 256KB)")
        samples = None
        if calib is not None:
            from ..data.datasets import load_split

            xs, ys, _ = load_split(calib, "train", graph.input.s, graph.input.zp,
                                   shift=calib_shift)
            n = CALIB_SAMPLES
            samples = [(xs[i], int(ys[i])) for i in range(0, len(xs), max(1, len(xs) // n))][:n]
        sch, prog = auto_scheme(graph, budget_b, samples, reserve_b, momentum=momentum)
    else:
        sch = parse_scheme(graph, scheme)
        prog = build_program(graph, sch, momentum)
        if budget_b is not None and prog.memory_bytes > budget_b - reserve_b:
            raise over_budget(prog, budget_b, reserve_b)
    tb = make_blob(model, sch, momentum)
    return tb.graph, tb.program, tb.blob


def figures(graph, prog, blob: bytes) -> dict:
    _, infer_arena = plan_inference(graph)
    consts = sum(t.data.nbytes for t in graph.tensors if t.is_const)
    return {"scheme": prog.scheme.describe(), "arena_peak": prog.arena_bytes,
            "trainable_bytes": prog.params_bytes, "optimizer_bytes": prog.optimizer_bytes,
            "total": prog.memory_bytes, "inference_arena": infer_arena,
            "flash_bytes": len(blob), "constant_bytes": consts,
            "breakdown": breakdown(prog), "schedule": schedule(prog),
            "layers": report_rows(prog)}


def print_report(fig: dict) -> None:
    """The per-layer table: what each op updates and holds, and its arena buffers."""
    print(f"{'op':>3} {'kind':<17} {'update':<16} {'held B':>8} | {'buffer':<6} {'kind':<10} "
          f"{'bytes':>7} {'steps':>7} {'offset':>7}")
    for r in fig["layers"]:
        what = [("bias" if r["bias"] else ""),
                (f"w {r['channels']}/{r['out_channels']}" if r["channels"] else "")]
        update = "+".join(w for w in what if w) or ("(grad)" if r["backward"] else "-")
        lead = f"{r['op']:>3} {r['kind']:<17} {update:<16} {r['trainable_bytes']:>8,}"
        for i, b in enumerate(r["buffers"] or [None]):
            cells = "" if b is None else (
                f"{b['name']:<6} {b['kind']:<10} {b['bytes']:>7,} "
                f"{str(b['first']) + '..' + str(b['last']):>7} {b['offset']:>7,}")
            print(f"{lead if i == 0 else ' ' * len(lead)} | {cells}")
    print(fig["schedule"]["legend"])
    parts = ", ".join(f"{k} {v:,}" for k, v in fig["breakdown"].items() if v)
    print(f"totals: arena_peak {fig['arena_peak']:,} B (at its peak step: {parts}); "
          f"trainable {fig['trainable_bytes']:,} B;{_optimizer(fig)} arena + trainable"
          f"{' + optimizer' if fig['optimizer_bytes'] else ''} {fig['total']:,} B")


def _optimizer(fig: dict) -> str:
    """The optimizer state's part of a totals line ("" without --momentum)."""
    n = fig["optimizer_bytes"]
    return f" optimizer (momentum velocities) {n:,} B;" if n else ""


def run(args: argparse.Namespace) -> int:
    graph, prog, blob = build(args.model, args.scheme, args.budget, args.calib, args.reserve,
                              args.calib_shift, args.momentum)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_bytes(blob)
    if args.header:
        args.header.write_text(c_header(blob))
    fig = figures(graph, prog, blob)
    if args.report:
        print_report(fig)
    print(f"{args.output}: {len(blob):,} bytes, scheme {fig['scheme']}")
    opt = f" + optimizer {fig['optimizer_bytes']:,} B" if fig["optimizer_bytes"] else ""
    print(f"  training arena_peak {fig['arena_peak']:,} B + trainable {fig['trainable_bytes']:,} B"
          f"{opt} = {fig['total']:,} B; inference arena {fig['inference_arena']:,} B")
    if args.report_json:
        args.report_json.write_text(json.dumps(fig, indent=2))
    return 0
