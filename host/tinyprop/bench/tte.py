"""The same work as MIT's Tiny Training Engine (TTE, NeurIPS'22), measured with tinyprop.

The models TTE trains, at 128x128x3, 10 classes, int8 through the real TFLite converter
(tinyprop.bench.models): TTE's own `mbv2-w0.35` (no 112->1280 convolution), Keras'
MobileNetV2(alpha=0.35) with its 1280 head, a ProxylessNAS-w0.3-like and an MCUNet-like network.
Each with TTE's scheme (SCHEMES), planned by tinyprop: the inference arena with whole tensors
and with the frozen first ops run tile by tile (compile/patch.py, the smallest arena), the
training plan (arena + trainable) both ways, the multiply-accumulates the tiles recompute, and,
with `--board qemu-m4`, the instructions of a training step and of an inference on the
emulated Cortex-M4 with the blob `convert` makes within a 256 KB board (patch auto: the fewest
recomputed MACs that fit). Keras' MobileNetV2 also with the scheme `auto` finds at 256 KB.

TTE's "99 KB" scheme for MobileNetV2-w0.35: biases of the last 25 convolutions; weights of
convolutions 27, 30, 33, 36, 39 fully, 42 at 1/8, 45 at 1/2 and 48 fully, counting
convolutions (CONV_2D and DEPTHWISE_CONV_2D) from the input, 0-based; the final dense layer
does not count (TTE counts conv modules; its classifier is a linear layer). tinyprop always
trains the classifier, bias and weights, as TTE does, so it is added on top. Convolutions 27..48
in steps of 3 are 1x1 expansion convs, the only weight gradients TTE's kernels compute.

    python -m tinyprop.bench.tte [--models mbv2-w0.35 ...] [--board qemu-m4] [--json F] [--png F]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from ..compile.scheme import LayerUpdate, SparseScheme, pick_channels, with_classifier
from ..frontend.graph import Graph
from .models import MODELS, build_model

TTE_PEAK_KB = 141
BIAS_LAST = 25
WEIGHTS = {27: 1.0, 30: 1.0, 33: 1.0, 36: 1.0, 39: 1.0, 42: 0.125, 45: 0.5, 48: 1.0}
# model -> (biases of the last N convolutions, {convolution: fraction of its weights}).
# MobileNetV2 (both): the 99 KB scheme above. MCUNet: TTE's published 100 KB scheme for
# mcunet-5fps (algorithm/scripts/sparse_update.sh: --n_bias_update 22 --manual_weight_idx
# 21-24-27-30-36-39 --weight_update_ratio 1-1-1-1-0.125-0.25), the expansion convs of blocks
# 7-10, 12 and 13 here too. ProxylessNAS: TTE published no scheme; the MobileNetV2 pattern on
# the expansion convs of its last eight blocks (12-19).
SCHEMES = {
    "mbv2-w0.35": (BIAS_LAST, WEIGHTS),
    "keras-mbv2-w0.35": (BIAS_LAST, WEIGHTS),
    "proxyless-w0.3": (BIAS_LAST, {36: 1.0, 39: 1.0, 42: 1.0, 45: 1.0, 48: 1.0, 51: 0.125,
                                   54: 0.5, 57: 1.0}),
    "mcunet": (22, {21: 1.0, 24: 1.0, 27: 1.0, 30: 1.0, 36: 0.125, 39: 0.25}),
}
# TTE's peak memory (sparse update + operator reordering, their figure), KB
TTE_PEAKS_KB = {"mbv2-w0.35": 141, "keras-mbv2-w0.35": 141, "proxyless-w0.3": 135,
                "mcunet": 173}


def convolutions(graph: Graph) -> list[int]:
    """Op indices of the CONV_2D and DEPTHWISE_CONV_2D ops, from the input."""
    return [op.index for op in graph.ops if op.kind in ("CONV_2D", "DEPTHWISE_CONV_2D")]


def tte_scheme(graph: Graph, model: str = "mbv2-w0.35") -> SparseScheme:
    """TTE's scheme for `model` (SCHEMES) on this graph (plus the classifier, always
    trained)."""
    bias_last, weights = SCHEMES[model]
    convs = convolutions(graph)
    s = SparseScheme("tte-99KB" if "mbv2" in model else "tte",
                     {i: LayerUpdate(i, bias=True) for i in convs[-bias_last:]})
    for n, fraction in weights.items():
        op = convs[n]
        s.layers.setdefault(op, LayerUpdate(op)).channels = pick_channels(graph, op, fraction)
    return with_classifier(graph, s)


BUDGET = 256 * 1024  # the board the blobs are made for, less the default reserve
STEPS = 2  # training steps on the board: the counter is exact, two suffice


def measure(name: str, path: Path | None = None, board: str | None = None,
            steps: int = STEPS) -> dict:
    """The figures of model `name` (its .tflite: `path`, else built and cached) under TTE's
    scheme; `board`: also run `steps` training steps and one inference there."""
    from ..compile.build import build
    from ..compile.memory import plan_inference
    from ..compile.patch import op_macs
    from ..compile.train_plan import build_program
    from ..frontend.tflite_reader import read_tflite

    path = Path(path or build_model(name))
    graph = read_tflite(path)
    scheme = tte_scheme(graph, name)
    fig: dict = {"model": name, "path": str(path),
                 "macs": sum(op_macs(graph, op) for op in graph.ops),
                 "parameters": sum(graph.tensors[i].size for op in graph.weighted_ops()
                                   for i in op.inputs[1:3] if i >= 0),
                 "tte_peak_bytes": TTE_PEAKS_KB[name] * 1024, "scheme": scheme.describe()}
    whole, patch = plan_inference(graph, "none"), plan_inference(graph, "min")
    rows = plan_inference(graph, "min", input_rows=True)  # a camera that delivers rows
    fig["inference"] = {"whole": whole.arena, "patch": patch.arena, **_stage(patch),
                        "input_rows": {"arena": rows.arena, **_stage(rows)}}
    for label, mode in (("whole", "none"), ("patch", "min")):
        prog = build_program(graph, scheme, False, mode)
        fig[f"training_{label}"] = {"arena_peak": prog.arena_bytes,
                                    "trainable_bytes": prog.params_bytes,
                                    "total": prog.memory_bytes, **_stage(prog.layout)}
    # key -> (blob, the arena + trainable it must fit)
    blobs = {"tte_256KB": (_blob(path, scheme), _limit()),
             # TTE's scheme within TTE's own figure's size: the input in row bands
             "tte_128KB": (_blob(path, scheme, SMALL, input_rows=True), SMALL)}
    if name == "keras-mbv2-w0.35":
        tb = build(path, "auto", f"{BUDGET}B")
        blobs["auto_256KB"] = (tb, _limit())
        fig["auto_256KB"] = {"scheme": tb.program.scheme.describe()}
    for key, (tb, limit) in blobs.items():
        prog = tb.program
        entry = fig.setdefault(key, {})
        # the arena the device holds: the plan's, grown where the kernels' scratch did not
        # fit its gaps (within the limit)
        arena = max(prog.arena_bytes, tb.scratch.train_arena if tb.scratch else 0)
        total = arena + prog.memory_bytes - prog.arena_bytes
        entry.update({"arena_peak": arena, "trainable_bytes": prog.params_bytes,
                      "total": total, "limit": limit, "fits": total <= limit,
                      "flash_bytes": len(tb.blob), **_stage(prog.layout)})
        if board is not None and entry["fits"]:
            entry["board"] = on_board(tb, board, steps)
    return fig


def _limit() -> int:
    from ..compile.budget import DEFAULT_RESERVE

    return BUDGET - DEFAULT_RESERVE


SMALL = 128 * 1024  # arena + trainable within this: below TTE's reported 141 KB


def _blob(path: Path, scheme: SparseScheme, limit: int | None = None, input_rows: bool = False):
    """TTE's scheme as `convert` makes it within `limit` bytes of arena + trainable (default:
    a 256 KB board less the reserve; patch auto: whole tensors when they fit, else the stage
    with the fewest recomputed MACs that fits); `input_rows`: the input arrives in row bands."""
    from ..compile.blobfile import make_blob

    return make_blob(path, scheme, limit=limit or _limit(), input_rows=input_rows)


def _stage(layout) -> dict:
    st = layout.stage
    if st is None:
        return {"stage": None, "extra_macs": 0}
    return {"stage": st.describe(), "extra_macs": st.extra_macs}


def on_board(tb, board: str, steps: int) -> dict:
    """`steps` training steps on random samples and one inference on `board`: the counter per
    step and per inference, the memory the board reports, and whether the trained parameters
    equal the NumPy reference's bit for bit."""
    from ..engines import HParams, open_engine
    from ..reference.backward import ReferenceTrainer

    rng = np.random.default_rng(0)
    shape = tb.graph.input.shape[1:]
    xs = rng.integers(-128, 128, (steps, *shape), dtype=np.int8)
    ys = np.arange(steps) % CLASSES
    t0 = time.time()
    with open_engine(board, tb, HParams(lr=0.01, seed=0)) as eng:
        eng.prepare(xs, ys)
        results = [eng.train(xs[i], int(ys[i]), i) for i in range(steps)]
        inference = eng.evaluate(xs[:1], ys[:1])[0].counter
        unit = eng.counter_unit
        params = eng.params()
    ref = ReferenceTrainer(tb.program, 0.01, 0)
    losses = [ref.train_step(xs[i], int(ys[i])).loss for i in range(steps)]
    exact = params == ref.params_bytes() and all(
        np.float32(r.loss) == np.float32(loss) for r, loss in zip(results, losses, strict=True))
    mem = results[-1].memory
    out = {"board": board, "steps": steps, "unit": unit,
           "per_step": int(np.median([r.counter for r in results])),
           "per_inference": inference, "bit_exact": bool(exact), "memory": mem,
           "seconds": round(time.time() - t0, 1)}
    if {"static", "arena_peak", "trainable", "stack_peak"} <= set(mem):
        out["total_sram"] = sum(mem[k] for k in ("static", "arena_peak", "trainable",
                                                 "stack_peak"))
    return out


CLASSES = 10


def table(figs: list[dict]) -> list[str]:
    """The comparison as a Markdown table, one row a model."""
    rows = ["| model | MACs | inference arena: whole / first ops in tiles / and the input in "
            "row bands | training, TTE's "
            "scheme: whole | first ops in tiles (arena + trainable) | the blob "
            "(arena + trainable) | instructions / step, / inference | TTE's peak |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for f in figs:
        tw, tp = f["training_whole"], f["training_patch"]
        for key in ("tte_256KB", "tte_128KB", "auto_256KB"):
            if key not in f:
                continue
            blob, b = f[key], f[key].get("board")
            per = (f"{b['per_step'] / 1e6:.1f} M / {b['per_inference'] / 1e6:.1f} M"
                   + ("" if b["bit_exact"] else " (NOT bit-exact)") if b else "")
            if key == "tte_256KB":
                first = (f"| {f['model']} | {f['macs'] / 1e6:.2f} M | "
                         f"{f['inference']['whole']:,} / {f['inference']['patch']:,} "
                         f"(+{f['inference']['extra_macs'] / 1e6:.2f} M MACs) / "
                         f"{f['inference']['input_rows']['arena']:,} (+"
                         f"{f['inference']['input_rows']['extra_macs'] / 1e6:.2f} M) | "
                         f"{tw['total']:,} | {tp['total']:,} ({tp['arena_peak']:,} + "
                         f"{tp['trainable_bytes']:,}; +{tp['extra_macs'] / 1e6:.2f} M MACs)")
            elif key == "tte_128KB":
                first = (f"| {f['model']}, TTE's scheme within 128 KB, the input in row "
                         "bands | | | | ")
            else:
                first = f"| {f['model']}, scheme `auto` 256 KB | | | | "
            fits = "" if blob["fits"] else f" (over {blob['limit']:,})"
            rows.append(f"{first} | {blob['total']:,}{fits} (+{blob['extra_macs'] / 1e6:.2f} M "
                        f"MACs) | {per} | {f['tte_peak_bytes'] // 1024} KB |")
    return rows


def memory_png(name: str, path: Path, out: Path) -> Path:
    """Bytes live over the op sequence, whole tensors against the frozen first ops run tile by
    tile: inference (smallest arena) and a training step of TTE's scheme."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..compile.memory import plan_inference
    from ..compile.train_plan import build_program
    from ..frontend.tflite_reader import read_tflite

    graph = read_tflite(path)
    scheme = tte_scheme(graph, name)
    plans = [("inference", plan_inference(graph, "none"), plan_inference(graph, "min")),
             ("training step, TTE's scheme", build_program(graph, scheme, False, "none").layout,
              build_program(graph, scheme, False, "min").layout)]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), dpi=80)
    for ax, (title, before, after) in zip(axes, plans, strict=True):
        for layout, label in ((before, "whole tensors"), (after, "first ops in tiles")):
            steps = range(max(b.last for b in layout.buffers) + 1)
            live = [sum(b.size for b in layout.live(s)) / 1024 for s in steps]
            ax.step(list(steps), live, where="mid",
                    label=f"{label}: arena {layout.arena / 1024:.0f} KB")
        ax.set_title(f"{name}, {title}", fontsize=9)
        ax.set_xlabel("op step (training: forward, loss, backward)", fontsize=8)
        ax.set_ylabel("KB live", fontsize=8)
        ax.legend(fontsize=7)
        ax.tick_params(labelsize=7)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out


def run_all(models: list[str], board: str | None, say=print) -> list[dict]:
    figs = []
    for name in models:
        t0 = time.time()
        fig = measure(name, board=board)
        fig["seconds"] = round(time.time() - t0, 1)
        say(f"{name}: inference {fig['inference']['whole']:,} -> {fig['inference']['patch']:,} B"
            f" ({fig['inference']['stage']}); training {fig['training_whole']['total']:,} -> "
            f"{fig['training_patch']['total']:,} B ({fig['seconds']} s)")
        figs.append(fig)
    return figs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tinyprop.bench.tte",
                                description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    p.add_argument("--board", help="also train a few steps there (e.g. qemu-m4)")
    p.add_argument("--json", type=Path, help="also write the figures as JSON")
    p.add_argument("--png", type=Path, help="draw mbv2-w0.35's memory over the op sequence")
    args = p.parse_args(argv)
    figs = run_all(args.models, args.board)
    print("\n".join(table(figs)))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figs, indent=2))
    if args.png:
        print(f"wrote {memory_png('mbv2-w0.35', build_model('mbv2-w0.35'), args.png)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
