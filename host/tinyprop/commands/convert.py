"""tinyprop convert: an int8 .tflite -> a training blob (and optionally a C header)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..blob import c_header, plan_inference
from ..budget import auto_scheme, breakdown, over_budget, parse_budget, report_rows
from ..errors import TinypropError
from ..scheme import parse_scheme
from ..session import make_blob
from ..tflite_reader import read_tflite
from ..train_plan import build_program


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("convert", help="convert an int8 .tflite into a tinyprop training blob")
    p.add_argument("model", type=Path, help="int8 .tflite model")
    p.add_argument("-o", "--output", type=Path, required=True, help="blob to write (.tpb)")
    p.add_argument("--header", type=Path, help="also write the blob as a C header")
    p.add_argument("--scheme", default="last:2",
                   help="bias-only | bias-last:N | last:K | auto | FILE.json (default last:2)")
    p.add_argument("--budget", help="memory budget for the scheme, e.g. 64KB, 128KB, 256KB")
    p.add_argument("--calib", type=Path, help="dataset dir: calibration samples for --scheme auto")
    p.add_argument("--report", action="store_true", help="print the per-layer memory table")
    p.add_argument("--report-json", type=Path, help="write the memory figures as JSON")
    p.set_defaults(func=run)


def build(model: Path, scheme: str, budget: str | None, calib: Path | None = None):
    """(graph, program, blob bytes) for a model and a scheme spec; shared by demo and bench."""
    graph = read_tflite(model)
    budget_b = parse_budget(budget) if budget else None
    if scheme == "auto":
        if budget_b is None:
            raise TinypropError("--scheme auto needs --budget (e.g. --budget 256KB)")
        samples = None
        if calib is not None:
            from ..datasets import load_split

            xs, ys, _ = load_split(calib, "train", graph.input.s, graph.input.zp)
            samples = [(xs[i], int(ys[i])) for i in range(0, len(xs), max(1, len(xs) // 8))][:8]
        sch, prog = auto_scheme(graph, budget_b, samples)
    else:
        sch = parse_scheme(graph, scheme)
        prog = build_program(graph, sch)
        if budget_b is not None and prog.arena_bytes + prog.params_bytes > budget_b:
            from ..budget import DEFAULT_RESERVE

            raise over_budget(prog, budget_b, DEFAULT_RESERVE)
    tb = make_blob(model, sch)
    return tb.graph, tb.program, tb.blob


def figures(graph, prog, blob: bytes) -> dict:
    _, infer_arena = plan_inference(graph)
    consts = sum(t.data.nbytes for t in graph.tensors if t.is_const)
    return {"scheme": prog.scheme.describe(), "arena_peak": prog.arena_bytes,
            "trainable_bytes": prog.params_bytes, "inference_arena": infer_arena,
            "flash_bytes": len(blob), "constant_bytes": consts,
            "breakdown": breakdown(prog), "layers": report_rows(prog)}


def run(args: argparse.Namespace) -> int:
    graph, prog, blob = build(args.model, args.scheme, args.budget, args.calib)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_bytes(blob)
    if args.header:
        args.header.write_text(c_header(blob))
    fig = figures(graph, prog, blob)
    if args.report:
        print(f"{'op':>3} {'kind':<18} {'bias':<4} {'weights':<9} {'bytes held':>10}")
        for r in fig["layers"]:
            if not r["backward"]:
                continue
            w = f"{r['channels']}/{r['out_channels']}" if r["channels"] else "-"
            print(f"{r['op']:>3} {r['kind']:<18} {'yes' if r['bias'] else '-':<4} {w:<9} "
                  f"{r['bytes_held']:>10,}")
    print(f"{args.output}: {len(blob):,} bytes, scheme {fig['scheme']}")
    print(f"  training arena_peak {fig['arena_peak']:,} B + trainable {fig['trainable_bytes']:,} B"
          f" = {fig['arena_peak'] + fig['trainable_bytes']:,} B; inference arena "
          f"{fig['inference_arena']:,} B")
    if args.report_json:
        args.report_json.write_text(json.dumps(fig, indent=2))
    return 0
