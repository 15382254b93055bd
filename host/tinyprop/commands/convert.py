"""tinyprop convert: an int8 .tflite -> a training blob (and optionally a C header)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..compile.blob import c_header
from ..compile.budget import DEFAULT_RESERVE
from ..compile.build import PATCH_MODES, build
from ..compile.kernels import DEFAULT_TARGET, TARGETS
from ..compile.report import figures, kernel_lines, layout_lines, report_lines


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
    p.add_argument("--target", default=DEFAULT_TARGET, choices=list(TARGETS),
                   help="the kernels the board's firmware builds, whose scratch the blob plans: "
                   "cortex-m4 (also m7, m33: the DSP kernels; qemu-m4, Nano 33 BLE) or ref "
                   f"(host, rv32-virt, ESP32); default {DEFAULT_TARGET}")
    p.add_argument("--patch", default="auto", choices=PATCH_MODES,
                   help="run the frozen first ops tile by tile (recomputing the tiles' overlap) "
                   "and depthwise ops in place: auto (default) only as far as --budget needs, "
                   "with the fewest recomputed MACs; min for the smallest arena; none")
    p.add_argument("--input-rows", action="store_true",
                   help="read the input in row bands as the first tiles need them (a camera "
                   "that delivers rows) instead of holding it whole; the firmware asks a row "
                   "source for them (tp_set_row_source)")
    p.add_argument("--report", action="store_true",
                   help="print the per-layer memory table and each op's kernel")
    p.add_argument("--report-json", type=Path, help="write the memory figures as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    tb = build(args.model, args.scheme, args.budget, args.calib, args.reserve, args.calib_shift,
               args.momentum, args.target, args.patch, args.input_rows)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_bytes(tb.blob)
    if args.header:
        args.header.write_text(c_header(tb.blob))
    fig = figures(tb.program, tb.blob)
    if args.report:
        print("\n".join(report_lines(fig) + layout_lines(fig) + kernel_lines(fig)))
    print(f"{args.output}: {len(tb.blob):,} bytes, scheme {fig['scheme']}")
    opt = f" + optimizer {fig['optimizer_bytes']:,} B" if fig["optimizer_bytes"] else ""
    print(f"  training arena_peak {fig['arena_peak']:,} B + trainable {fig['trainable_bytes']:,} B"
          f"{opt} = {fig['total']:,} B; inference arena {fig['inference_arena']:,} B")
    if fig["layout"]["stage"]:
        print(f"  tiled stage: {fig['layout']['stage']['describe']}")
    if args.report_json:
        args.report_json.write_text(json.dumps(fig, indent=2))
    return 0
