"""tinyprop convert: an int8 .tflite -> a training blob (and optionally a C header)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..compile.blob import blob_header
from ..compile.budget import DEFAULT_RESERVE, Room, parse_budget
from ..compile.build import PATCH_MODES, build
from ..compile.kernels import DEFAULT_TARGET, TARGETS
from ..compile.report import figures, kernel_lines, layout_lines, report_lines
from ..data.datasets import PIXELS_HELP, pixel_range
from ..program import DEFAULT_GRAD, DEFAULT_LOSS, GRAD_FORMATS, LOSSES
from ..training.head import DEFAULT_HEAD_INIT, HEAD_INITS, read_labels


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("convert", help="convert a .tflite (int8 or float) or a Keras model into a "
                       "tinyprop training blob")
    p.add_argument("model", type=Path, help="int8 .tflite model; a float .tflite, Keras "
                   ".h5/.keras or SavedModel folder is quantized to int8 first, calibrated on "
                   "--calib (the int8 model is written beside the blob: BLOB.int8.tflite)")
    p.add_argument("-o", "--output", type=Path, required=True, help="blob to write (.tpb)")
    p.add_argument("--header", type=Path, help="also write the blob as a C header, with the "
                   "arena, params and input sizes the firmware sizes its buffers by")
    p.add_argument("--scheme",
                   help="bias-only | bias-last:N | last:K | auto | FILE.json (default: auto, "
                   "the best plan within --board's or --budget's memory; last:2 when neither "
                   "is named)")
    p.add_argument("--board", help="plan for this board's memory: its name (a folder under "
                   "boards/, e.g. nano33ble) or your own board's folder, by its profile.json: its "
                   "budget and reserve, on heap boards its largest blocks, and its --target")
    p.add_argument("--budget", help="board SRAM for the firmware, e.g. 64KB, 128KB, 256KB: "
                   "arena + trainable parameters must fit in it minus --reserve (overrides "
                   "--board's)")
    p.add_argument("--reserve",
                   help="SRAM the firmware needs besides arena and parameters (static RAM and "
                   f"stack; default {DEFAULT_RESERVE // 1024}KB, qemu-m4's 16 KB stack + "
                   "static, or --board's); 0: --budget limits arena + trainable alone")
    p.add_argument("--calib", type=Path, help="dataset (folder or .npz): calibration samples "
                   "for --scheme auto and for quantizing a float model")
    p.add_argument("--classes", metavar="A,B,C|DIR",
                   help="replace the classifier (the last FULLY_CONNECTED and its SOFTMAX) by a "
                   "new one with these classes (or DIR's class folders), to learn on the board; "
                   "the model with the new head is written beside the blob (BLOB.head.tflite, "
                   "its class names in BLOB.head.labels.txt)")
    p.add_argument("--head-init", choices=HEAD_INITS, default=DEFAULT_HEAD_INIT,
                   help="how the new head starts: means (nearest class mean of the --calib "
                   f"samples' features) or zero (default {DEFAULT_HEAD_INIT})")
    p.add_argument("--pixels", help=f"for --calib's images: {PIXELS_HELP}")
    p.add_argument("--calib-shift", default="none",
                   help="sensor shift applied to the calibration samples (the target camera)")
    p.add_argument("--momentum", action="store_true",
                   help="reserve SGD momentum's optimizer state: a float32 velocity per trained "
                   "parameter, counted in the budget (then train --momentum 0.9)")
    p.add_argument("--target", choices=list(TARGETS),
                   help="the kernels the board's firmware builds, whose scratch the blob plans: "
                   "cortex-m4 (also m7, m33: the DSP kernels) or ref (any CPU); default "
                   f"--board's (its profile.json's kernels.target), else {DEFAULT_TARGET}")
    p.add_argument("--patch", default="auto", choices=PATCH_MODES,
                   help="run the frozen first ops tile by tile (recomputing the tiles' overlap) "
                   "and depthwise ops in place: auto (default) only as far as --budget needs, "
                   "with the fewest recomputed MACs; min for the smallest arena; none")
    p.add_argument("--input-rows", action="store_true",
                   help="read the input in row bands as the first tiles need them (a camera "
                   "that delivers rows) instead of holding it whole; the firmware asks a row "
                   "source for them (tp_set_row_source)")
    p.add_argument("--grad", default=DEFAULT_GRAD, choices=list(GRAD_FORMATS),
                   help="the gradient maps' format: int16 or int8 values with one power-of-two "
                   f"scale per map, or float32 (docs/training.md); default {DEFAULT_GRAD}")
    p.add_argument("--loss", default=DEFAULT_LOSS, choices=list(LOSSES),
                   help="what training minimises: xent (softmax cross-entropy of the logits "
                   "and the label, a classifier; default) or mse (the mean squared error of "
                   "the output against the input: an autoencoder learning what normal is)")
    p.add_argument("--report", action="store_true",
                   help="print the per-layer memory table and each op's kernel")
    p.add_argument("--report-json", type=Path, help="write the memory figures as JSON")
    p.set_defaults(func=run)


def plan_room(board: str | None, budget: str | None, reserve: str | None) -> Room | None:
    """What the plan must fit: the board profile's room, with --budget/--reserve overriding
    its figures; without --board, --budget less --reserve (default 24 KB); None: no limit."""
    budget_b = parse_budget(budget) if budget else None
    reserve_b = parse_budget(reserve, "--reserve") if reserve else None
    if board is not None:
        from ..device.profiles import load_profile

        return load_profile(board).room(budget_b, reserve_b)
    if budget_b is None:
        return None
    return Room(budget_b, DEFAULT_RESERVE if reserve_b is None else reserve_b)


def run(args: argparse.Namespace) -> int:
    room = plan_room(args.board, args.budget, args.reserve)
    if args.target is not None or args.board is None:
        target = args.target or DEFAULT_TARGET
    else:
        from ..device.profiles import load_profile

        target = load_profile(args.board).kernels
    pixel_range(args.pixels)  # a bad --pixels stops here, before any slow work
    model = int8_model(args.model, args.calib, args.calib_shift, args.output, args.pixels)
    if args.classes:
        model = with_new_head(model, args.classes, args.calib, args.calib_shift, args.head_init,
                              args.output, args.pixels)
    scheme = args.scheme or ("auto" if room is not None else "last:2")
    tb = build(model, scheme, room, args.calib, calib_shift=args.calib_shift,
               momentum=args.momentum, target=target, patch=args.patch,
               input_rows=args.input_rows, grad=args.grad, labels=read_labels(model),
               loss=args.loss, pixels=args.pixels)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_bytes(tb.blob)
    if args.header:
        args.header.write_text(blob_header(tb.blob))
    fig = figures(tb.program, tb.blob)
    if args.report:
        print("\n".join(report_lines(fig) + layout_lines(fig) + kernel_lines(fig)))
    print(f"{args.output}: {len(tb.blob):,} bytes, scheme {fig['scheme']}")
    if scheme == "auto" and args.calib is None:
        print("  auto ranked the layers by their depth alone: --calib DATA ranks them by their "
              "gradients on your data")
    opt = f" + optimizer {fig['optimizer_bytes']:,} B" if fig["optimizer_bytes"] else ""
    print(f"  training arena_peak {fig['arena_peak']:,} B + trainable {fig['trainable_bytes']:,} B"
          f"{opt} = {fig['total']:,} B; inference arena {fig['inference_arena']:,} B")
    if fig["layout"]["stage"]:
        print(f"  tiled stage: {fig['layout']['stage']['describe']}")
    if room is not None:
        print(f"  {room_line(room)}")
    if args.report_json:
        if room is not None:
            fig["room"] = {"board": room.board, "budget": room.budget, "reserve": room.reserve,
                           "arena_block": room.arena_block, "params_block": room.params_block}
        args.report_json.write_text(json.dumps(fig, indent=2))
    return 0


def int8_model(model: Path, calib: Path | None, shift: str, blob: Path,
               pixels: str | None = None) -> Path:
    """`model` if it is int8; else its int8 copy, quantized on `calib` (images in pixel range
    `pixels`, default 0:1) and written beside the blob, with both models' accuracy printed."""
    from ..frontend.quantize import model_kind, quantization_accuracy, quantize_model

    if model_kind(model) == "int8":
        return model
    out = blob.with_suffix(".int8.tflite")
    print(f"{model}: a float model; quantizing it to int8 on {calib} (TensorFlow, full integer)")
    quantize_model(model, calib, out, shift, pixels=pixels)
    acc = quantization_accuracy(model, out, calib, shift, pixels=pixels)
    print(f"{out}: int8 model; accuracy on {calib.name} {acc['split']} ({acc['n']} samples): "
          f"float {acc['float']:.1%}, int8 {acc['int8']:.1%}")
    return out


def with_new_head(model: Path, classes: str, calib: Path | None, shift: str, init: str,
                  blob: Path, pixels: str | None = None) -> Path:
    """`model` with a new head for `classes` (names, comma-separated, or a dataset folder whose
    class folders name them), written beside the blob."""
    from ..training.head import new_head

    folder = Path(classes)
    if folder.is_dir():
        from ..data.datasets import load_dataset

        names = load_dataset(folder).classes
    else:
        names = tuple(c.strip() for c in classes.split(",") if c.strip())
    out = new_head(model, names, calib, blob.with_suffix(".head.tflite"), init, shift, pixels)
    print(f"{out}: new head for {len(names)} classes ({', '.join(names)}), initialised from "
          f"{'the class means of ' + str(calib) if init == 'means' else 'zero'}")
    return out


def room_line(room: Room) -> str:
    """Which room the plan was made for: the profile and its figures."""
    where = (f"board {room.board} ({room.source})" if room.board
             else "--budget")
    blocks = (f"; arena within the largest heap block {room.arena_block:,} B, params within "
              f"the second {room.params_block:,} B" if room.arena_block is not None else "")
    return (f"planned for {where}: {room.budget:,} B less a {room.reserve:,} B reserve = "
            f"{room.limit:,} B for arena + trainable{blocks}")
