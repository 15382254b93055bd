"""The figures docs/benchmarks.md quotes, measured (`tinyprop bench` prints them and writes JSON).

Sections (`tinyprop bench --only` picks some):
  memory    tinyprop's inference arena and TFLite Micro's (smallest arena its Python interpreter
            runs the model in), training arena_peak + trainable bytes for bias-only, last:2 and
            auto at 256/128/64 KB.
  board     one short training run on the emulated Cortex-M4: instructions per training step and
            per inference, SRAM (static + arena high-water + trainable + stack high-water, as the
            device reports them), flash of the firmware with the blob, samples per second.
  accuracy  holdout accuracy before/after training on the shifted train split (host C core, bit
            for bit the board's arithmetic; the fine-tuned .tflite scored by TFLite): the default
            scheme, the same without QAS, bias-only, last:2, and the default on `night`.
  rounding  what stochastic rounding keeps: the share of updates under half an LSB (all lost to
            round-to-nearest), how much of them SR applies, and the accuracy of the default run
            with nearest rounding instead (NumPy reference; the firmware rounds stochastically).
  baseline  the float model fully fine-tuned in TensorFlow on the same shifted data, and how much
            of its gain the on-device sparse update recovers.
  kernels   one VWW inference on the emulated Cortex-M4 with the reference and with the Cortex-M
            DSP kernels in one run (firmware/apps/kerneltest, tinyprop.bench.kernels):
            instructions of the whole model and per layer type (first conv, pointwise,
            depthwise, pool + FC + softmax), per multiply-accumulate, the ratio, and CMSIS-NN's
            figures beside them.
  tte       TTE's models at 128x128 (tinyprop.bench.tte): per model the inference arena with
            whole tensors and with the first ops in tiles, the training plan of TTE's scheme
            both ways, the recomputed MACs, and instructions per training step and per
            inference on the section's board; the table, and docs/tte-memory.png redrawn under
            the output folder.
  step      one training step of the demo's scheme on the emulated Cortex-M4 (kerneltest's
            training mode, DSP kernels), instructions split into forward, loss, backward per
            layer type (input gradients, then weight and bias gradients) and update, for each
            gradient-map format.
  cycles    modelled Cortex-M4 cycles (tinyprop.bench.cycles: the TRM's instruction timings over
            QEMU's execution trace; a model, not silicon) next to instructions: one VWW
            inference whole and per layer type and the demo's training step (auto 256 KB),
            per MAC, the microbenchmark validation table (firmware/apps/cyclebench) and the
            MLPerf Tiny anchors (ST, Plumerai, TFLM + CMSIS-NN on the STM32L4R5).
  grads     float32, int16 and int8 gradient maps: auto at 256 KB calibrated on each of haze,
            night and sodium, its planned bytes and holdout accuracy after training (host C core).
  frontier  accuracy after training on the shift vs planned bytes (arena + trainable) for auto
            under 48, 64, 96, 128, 192 and 256 KB (no reserve: the plan's cap) with the default
            maps: a table and OUT/frontier.png.
  models    the MLPerf Tiny models, VWW with a new head (coco3) and the Keras float VWW model
            quantized by tinyprop (tinyprop.bench.suite): each converted with auto at 256 KB for
            the Cortex-M4 kernels, its ops, classes, input and plan, instructions per step and
            per inference on the section's board, and whether 20 training steps leave the same
            parameters (CRC) on the NumPy reference, the host C core and the board.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..compile.blobfile import TrainingBlob
from ..engines import Engine, HParams
from ..extras import require

SECTIONS = ("memory", "board", "accuracy", "rounding", "baseline", "kernels", "tte", "step",
            "cycles", "grads", "frontier", "models", "camera", "fleet", "faults")
GRAD_SHIFTS = ("haze", "night", "sodium")  # the grads section's camera shifts
FRONTIER_KB = (48, 64, 96, 128, 192, 256)  # the frontier section's budgets
BOARD_STEPS = 12  # training steps of the board section: the counter is exact, a few suffice
FAULT_STORE_STRIDE = 1024  # the faults section cuts every erase, header operation and 1,024th
# word program of a save of the demo's record (a cut costs a training step to check the resume)
FAULT_LINK_STEPS = 8  # training steps through the lossy line at each rate
FLEET_COUNTER_JITTER = 1e-5  # relative: qemu-m4 step counts vary by ~40 in 21 M run to run
STEP_SAMPLES = 3  # training steps the step section profiles (it reports the last)


@dataclass
class BenchConfig:
    """What `tinyprop bench` measures with: the camera shift and training run of the accuracy
    sections, the board of the board section, the assets (None: resolved as every asset is)
    and where the tuned models go."""

    shift: str = "haze"
    epochs: int = 3
    lr: float = 0.005
    seed: int = 0
    seeds: tuple[int, ...] = ()  # the accuracy sections train once a seed (empty: `seed` once)
    board: str = "qemu-m4"
    model: str | None = None
    data: str | None = None
    out: Path = Path("out/bench")


@contextmanager
def _tflm_quiet():
    """File descriptor 2 on /dev/null meanwhile: TFLite Micro's C++ prints "Failed to resize
    buffer" there for every arena the bisection tries too small, which is how it finds the
    smallest (the failure itself reaches Python as an exception)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def tflm_arena(model: Path) -> int:
    """Smallest arena (bytes) in which TFLite Micro's Python interpreter allocates and runs the
    model: a bisection over arena_size (allocation fails below it)."""
    runtime = require("tflite_micro.python.tflite_micro.runtime", "the TFLite Micro arena")
    with _tflm_quiet():
        return _bisect_arena(runtime, model)


def _bisect_arena(runtime, model: Path) -> int:
    x = None

    def runs(size: int) -> bool:
        nonlocal x
        try:
            it = runtime.Interpreter.from_file(str(model), arena_size=size)
            if x is None:
                d = it.get_input_details(0)
                x = np.zeros(d["shape"], d["dtype"])
            it.set_input(x, 0)
            it.invoke()
            return True
        except (RuntimeError, ValueError):
            return False

    lo, hi = 1024, 4 << 20
    if not runs(hi):
        return -1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if runs(mid) else (mid, hi)
    return hi


class Ctx:
    """Assets, converted blobs (calibration is the slow part: each blob is built once) and the
    shifted splits, shared by the sections; `say` shows a progress line."""

    def __init__(self, cfg: BenchConfig, say: Callable[[str], None] = print):
        from ..data.assets import resolve_dataset, resolve_model

        self.cfg = cfg
        self.say = say
        self.model = resolve_model(cfg.model)
        self.data = resolve_dataset(cfg.data)
        self._blobs: dict = {}
        self._splits: dict = {}
        self._input = None  # the model's input tensor: its quantization makes the samples

    def blob(self, scheme: str, budget: str | None = None, reserve: str | None = None,
             shift: str | None = None, grad: str | None = None) -> tuple[TrainingBlob, dict]:
        """(TrainingBlob, figures) for a scheme; auto calibrates on `shift`'s train split;
        `grad` the gradient maps' format (None: the default)."""
        from ..compile.budget import DEFAULT_RESERVE
        from ..compile.build import build
        from ..compile.report import figures
        from ..program import DEFAULT_GRAD

        key = (scheme, budget, reserve, shift, grad or DEFAULT_GRAD)
        if key not in self._blobs:
            calib = self.data if scheme == "auto" else None
            tb = build(self.model, scheme, budget, calib, reserve or DEFAULT_RESERVE,
                       shift or self.cfg.shift, grad=grad or DEFAULT_GRAD)
            (self.cfg.out / f"vww_{len(self._blobs)}.tpb").write_bytes(tb.blob)
            self._blobs[key] = (tb, figures(tb.program, tb.blob))
        return self._blobs[key]

    def split(self, name: str, shift: str):
        from ..data.datasets import load_split
        from ..frontend.tflite_reader import read_tflite

        if (name, shift) not in self._splits:
            t_in = self._input = self._input or read_tflite(self.model).input
            self._splits[name, shift] = load_split(self.data, name, t_in.s, t_in.zp,
                                                   shift=shift)[:2]
        return self._splits[name, shift]


def drain(tb: TrainingBlob, engine: Engine, xs: np.ndarray, ys: np.ndarray, steps: int,
          lr: float, seed: int) -> dict:
    """Run the training loop of `tinyprop train` (same order, same lr schedule) to its end;
    the summary event plus the last step's memory."""
    from ..training.run import RunConfig, training_events

    last: dict = {}
    for ev in training_events(RunConfig(lr, seed), tb, engine, xs, ys, steps, 0):
        if ev["type"] == "step":
            last = ev
        elif ev["type"] == "summary":
            return {**ev, "memory": last.get("memory", {})}
    return {}


def memory(ctx: Ctx) -> dict:
    fig = ctx.blob("last:2")[1]
    out = {"inference_arena": fig["inference_arena"],
           "tflm_inference_arena": tflm_arena(ctx.model), "schemes": {}}
    for label, scheme, budget, reserve in (
            ("bias-only", "bias-only", None, None), ("last:2", "last:2", None, None),
            ("auto 256KB", "auto", "256KB", None), ("auto 128KB", "auto", "128KB", None),
            ("auto 64KB, reserve 8KB", "auto", "64KB", "8KB")):
        f = ctx.blob(scheme, budget, reserve)[1]
        out["schemes"][label] = {k: f[k] for k in ("scheme", "arena_peak", "trainable_bytes",
                                                   "total", "flash_bytes")}
    return out


def elf_sizes(elf: Path) -> dict:
    """flash (text + data) and static RAM (data + bss) of a firmware ELF."""
    text, data, bss = (int(v) for v in subprocess.run(
        ["arm-none-eabi-size", str(elf)], capture_output=True, text=True, check=True
    ).stdout.splitlines()[1].split()[:3])
    return {"flash": text + data, "static_ram": data + bss}


def board(ctx: Ctx) -> dict:
    from ..device.firmware import build_device_firmware
    from ..engines import open_engine

    tb, fig = ctx.blob("auto", "256KB")
    xs, ys = ctx.split("train", ctx.cfg.shift)
    with open_engine(ctx.cfg.board, tb, HParams(ctx.cfg.lr, ctx.cfg.seed)) as engine:
        s = drain(tb, engine, xs[:BOARD_STEPS], ys[:BOARD_STEPS], BOARD_STEPS, ctx.cfg.lr,
                  ctx.cfg.seed)
    mem = s["memory"]
    unit = s.get("counter_unit", "us")
    out = {"board": ctx.cfg.board, "scheme": fig["scheme"], "steps": BOARD_STEPS,
           f"{unit}_per_step": s.get(f"{unit}_per_step"),
           f"{unit}_per_inference": s.get(f"{unit}_per_inference"),
           "memory": mem, "samples_per_s": s["samples_per_s"]}
    if {"static", "arena_peak", "trainable", "stack_peak"} <= set(mem):
        out["total_sram"] = sum(mem[k] for k in ("static", "arena_peak", "trainable",
                                                 "stack_peak"))
    if ctx.cfg.board == "qemu-m4":
        out["firmware"] = elf_sizes(build_device_firmware("qemu-m4", tb.blob))
    return out


def adapt(ctx: Ctx, tb: TrainingBlob, shift: str, engine_for: Callable[[int], Engine],
          tag: str) -> dict:
    """Train an engine (engine_for(seed), once a seed of the config) on the shifted train
    split, export each as out/tuned_<tag>[_s<seed>].tflite, score it with TFLite on the shifted
    holdout: the mean accuracy, each seed's and their range, with the holdout's size."""
    from ..training.evaluate import evaluate_tflite
    from ..training.export import export_params

    xs, ys = ctx.split("train", shift)
    holdout = ctx.split("holdout", shift)
    steps = len(xs) * ctx.cfg.epochs
    seeds = ctx.cfg.seeds or (ctx.cfg.seed,)
    runs, seconds = {}, 0.0
    for seed in seeds:
        t0 = time.time()
        with engine_for(seed) as engine:
            drain(tb, engine, xs, ys, steps, ctx.cfg.lr, seed)
            params = engine.params()
        seconds += time.time() - t0
        tuned = ctx.cfg.out / (f"tuned_{tag}.tflite" if len(seeds) == 1
                               else f"tuned_{tag}_s{seed}.tflite")
        export_params(tb, params, tuned)
        runs[seed] = evaluate_tflite(tuned, *holdout)["accuracy"]
    accs = list(runs.values())
    return {"accuracy_after": float(np.mean(accs)), "accuracy_runs": runs,
            "accuracy_range": [min(accs), max(accs)], "holdout": len(holdout[1]),
            "steps": steps, "host_seconds": round(seconds, 1)}


def fmt_after(r: dict) -> str:
    """An accuracy after training: the mean, and its range when several seeds ran."""
    if len(r.get("accuracy_runs", {})) < 2:
        return f"{r['accuracy_after']:.1%}"
    lo, hi = r["accuracy_range"]
    return f"{r['accuracy_after']:.1%} ({lo:.1%}-{hi:.1%})"


def rounding(ctx: Ctx) -> dict:
    from ..engines.reference import ReferenceEngine

    tb, fig = ctx.blob("auto", "256KB")
    out = {"scheme": fig["scheme"], "shift": ctx.cfg.shift}
    for mode in ("stochastic", "nearest"):
        t: dict = {}  # the tally of every seed's run

        def engine_for(seed: int, mode=mode, t=t) -> ReferenceEngine:
            engine = ReferenceEngine(tb, HParams(ctx.cfg.lr, seed))
            engine.trainer.rounding, engine.trainer.tally = mode, t
            return engine

        r = adapt(ctx, tb, ctx.cfg.shift, engine_for, f"rounding_{mode}")
        out[mode] = {"accuracy_after": r["accuracy_after"],
                     "accuracy_runs": r["accuracy_runs"], "holdout": r["holdout"],
                     "updates": t["n"], "sub_lsb_share": round(t["sub_lsb"] / t["n"], 4),
                     "sub_lsb_applied_over_expected": round(t["sub_applied"] / t["sub_abs"], 4)}
        ctx.say(f"  {mode:<10} after {fmt_after(r)}; "
                f"{out[mode]['sub_lsb_share']:.1%} of updates under half an LSB, applied "
                f"{out[mode]['sub_lsb_applied_over_expected']:.3f} of their sum")
    return out


def accuracy(ctx: Ctx) -> dict:
    from ..engines import open_engine
    from ..training.evaluate import evaluate_tflite

    out = {"lr": ctx.cfg.lr, "epochs": ctx.cfg.epochs, "schedule": "linear", "runs": {}}
    before = {}
    for shift in dict.fromkeys((ctx.cfg.shift, "night")):
        before[shift] = evaluate_tflite(ctx.model, *ctx.split("holdout", shift))["accuracy"]
    default = ctx.blob("auto", "256KB")
    night = ctx.blob("auto", "256KB", shift="night")
    for label, (tb, fig), shift, qas in (
            ("auto 256KB (default)", default, ctx.cfg.shift, True),
            ("auto 256KB, no QAS", default, ctx.cfg.shift, False),
            ("bias-only", ctx.blob("bias-only"), ctx.cfg.shift, True),
            ("last:2", ctx.blob("last:2"), ctx.cfg.shift, True),
            ("auto 256KB on night", night, "night", True)):
        # the host C core: the board's arithmetic, bit for bit
        r = adapt(ctx, tb, shift,
                  lambda seed, tb=tb, qas=qas: open_engine("host", tb,
                                                           HParams(ctx.cfg.lr, seed, qas)),
                  f"{shift}_{tb.program.scheme.name}_{int(qas)}")
        out["runs"][label] = {"shift": shift, "scheme": fig["scheme"], "qas": qas,
                              "accuracy_before": before[shift], **r,
                              "memory_total": fig["total"]}
        ctx.say(f"  {label:<24} {shift:<6} {before[shift]:.1%} -> {fmt_after(r)}")
    return out


def baseline(ctx: Ctx, measured: dict) -> dict:
    from ..data.assets import resolve_model
    from .baseline import float_finetune

    h5 = resolve_model(None, variant="h5")
    out = {}
    for shift in dict.fromkeys((ctx.cfg.shift, "night")):
        fs = {seed: float_finetune(h5, ctx.data, shift, epochs=20, lr=1e-4, seed=seed)
              for seed in ctx.cfg.seeds or (ctx.cfg.seed,)}
        accs = [f["accuracy_after"] for f in fs.values()]
        row = {k: next(iter(fs.values()))[k] for k in ("accuracy_before", "epochs", "lr")}
        row.update(accuracy_after=float(np.mean(accs)), accuracy_range=[min(accs), max(accs)],
                   accuracy_runs={seed: f["accuracy_after"] for seed, f in fs.items()})
        runs = [r for r in measured.get("runs", {}).values()
                if r["shift"] == shift and r["qas"] and r["scheme"].startswith("auto")]
        gain = row["accuracy_after"] - row["accuracy_before"]
        if runs and gain > 0:
            ours = runs[0]["accuracy_after"] - runs[0]["accuracy_before"]
            row["sparse_gain_over_float_gain"] = round(ours / gain, 3)
        out[shift] = row
    return out


def kernels(ctx: Ctx) -> dict:
    from ..frontend.tflite_reader import read_tflite
    from .kernels import LAYER_TYPES, vww_costs

    out = vww_costs(read_tflite(ctx.model), ctx.split("holdout", "none")[0][0])
    ctx.say(f"  {'layer type':<20} {'MACs':>10} {'reference':>12} {'/MAC':>6} {'DSP':>12} "
            f"{'/MAC':>6} {'ratio':>6} {'CMSIS-NN':>10} {'/MAC':>6}")
    for name in (*LAYER_TYPES, "whole"):
        t = out["whole"] if name == "whole" else out["types"][name]
        cm = t.get("cmsis_nn")
        cm_mac = f"{cm / t['macs']:6.2f}" if cm and t["macs"] else f"{'':6}"
        ctx.say(f"  {name:<20} {t['macs']:>10,} {t['ref']:>12,} {t['ref_per_mac'] or 0:6.2f} "
                f"{t['opt']:>12,} {t['opt_per_mac'] or 0:6.2f} {t['ratio']:6.2f} "
                f"{int(cm) if cm else 0:>10,} {cm_mac}")
    return out


def step(ctx: Ctx) -> dict:
    from ..frontend.tflite_reader import read_tflite
    from ..program import GRAD_FORMATS
    from .kernels import step_costs

    graph = read_tflite(ctx.model)
    xs, ys = ctx.split("train", ctx.cfg.shift)
    out: dict = {"board": "qemu-m4", "scheme_of": f"auto 256KB on {ctx.cfg.shift}",
                 "formats": {}}
    for fmt in GRAD_FORMATS:
        tb, fig = ctx.blob("auto", "256KB", grad=fmt)
        s = step_costs(graph, tb.blob, xs[:STEP_SAMPLES], ys[:STEP_SAMPLES])
        out["formats"][fmt] = {"scheme": fig["scheme"], "planned_bytes": fig["total"], **s}
        p = s["parts"]
        ctx.say(f"  {fmt:<8} {s['instructions'] / 1e6:7.2f} M a step: forward "
                f"{p['forward'] / 1e6:.2f}, loss {p['loss'] / 1e6:.3f}, backward "
                f"{sum(p['backward'].values()) / 1e6:.2f} ("
                + ", ".join(f"{k} {v / 1e6:.2f}" for k, v in p["backward"].items())
                + f"), weight/bias grads {sum(p['weight_bias_grad'].values()) / 1e6:.2f}, "
                f"update {p['update'] / 1e6:.2f}  [{fig['scheme']}]")
    return out


def cycles(ctx: Ctx) -> dict:
    from ..frontend.tflite_reader import read_tflite
    from .cycles import MLPERF_VWW, report, step_cycles, validate, vww_cycles

    graph = read_tflite(ctx.model)
    tb, fig = ctx.blob("auto", "256KB")
    xs, ys = ctx.split("train", ctx.cfg.shift)
    out = {"validation": validate(),
           "inference": vww_cycles(graph, ctx.split("holdout", "none")[0][0]),
           "step_scheme": f"auto 256KB on {ctx.cfg.shift}", "step_plan": fig["scheme"],
           "step": step_cycles(tb.blob, xs[:STEP_SAMPLES], ys[:STEP_SAMPLES]),
           "mlperf_vww_cycles": MLPERF_VWW}
    for line in report(out):
        ctx.say(line)
    return out


def _train_score(ctx: Ctx, tb: TrainingBlob, shift: str, tag: str) -> dict:
    """Train on the host C core (the board's arithmetic, bit for bit) and score the export."""
    from ..engines import open_engine

    return adapt(ctx, tb, shift, lambda seed: open_engine("host", tb, HParams(ctx.cfg.lr, seed)),
                 tag)


def grads(ctx: Ctx) -> dict:
    from ..program import GRAD_FORMATS
    from ..training.evaluate import evaluate_tflite

    out: dict = {"scheme": "auto 256KB", "epochs": ctx.cfg.epochs, "shifts": {}}
    for shift in GRAD_SHIFTS:
        before = evaluate_tflite(ctx.model, *ctx.split("holdout", shift))["accuracy"]
        row: dict = {"accuracy_before": before}
        for fmt in GRAD_FORMATS:
            tb, fig = ctx.blob("auto", "256KB", shift=shift, grad=fmt)
            r = _train_score(ctx, tb, shift, f"grads_{shift}_{fmt}")
            row[fmt] = {"scheme": fig["scheme"], "planned_bytes": fig["total"], **r}
            ctx.say(f"  {shift:<7} {fmt:<8} {fig['total']:>8,} B  {before:.1%} -> "
                    f"{fmt_after(r)}  {fig['scheme']}")
        out["shifts"][shift] = row
    return out


def frontier(ctx: Ctx) -> dict:
    from ..errors import TinypropError

    rows = []
    for kb in FRONTIER_KB:  # no reserve: the budget is what the plan may take
        try:
            tb, fig = ctx.blob("auto", f"{kb}KB", "0KB")
        except TinypropError as e:  # not even the classifier fits
            ctx.say(f"  {kb:>4} KB  {e}")
            continue
        r = _train_score(ctx, tb, ctx.cfg.shift, f"frontier_{kb}")
        rows.append({"budget_kb": kb, "planned_bytes": fig["total"], "scheme": fig["scheme"],
                     **r})
        ctx.say(f"  {kb:>4} KB  {fig['total']:>8,} B  {fmt_after(r)}  {fig['scheme']}")
    out = {"shift": ctx.cfg.shift, "grad": ctx.blob("auto", "256KB")[0].program.grad,
           "rows": rows, "tflm_inference_arena": tflm_arena(ctx.model)}
    out["png"] = str(draw_frontier(out, ctx.cfg.out / "frontier.png"))
    return out


def draw_frontier(fig: dict, path: Path) -> Path:
    """The frontier as a PNG: accuracy after training (the seeds' mean, their range as error
    bars) against planned bytes, TFLite Micro's inference arena marked."""
    from matplotlib.figure import Figure

    f = Figure(figsize=(6, 3.6), dpi=100)
    ax = f.add_subplot()
    kb = [r["planned_bytes"] / 1024 for r in fig["rows"]]
    acc = [100 * r["accuracy_after"] for r in fig["rows"]]
    lo_hi = [[100 * v for v in r.get("accuracy_range", [r["accuracy_after"]] * 2)]
             for r in fig["rows"]]
    # at least 0: the mean of equal accuracies can round a hair beyond them
    err = [[max(0.0, a - lo) for a, (lo, _) in zip(acc, lo_hi, strict=True)],
           [max(0.0, hi - a) for a, (_, hi) in zip(acc, lo_hi, strict=True)]]
    seeds = len(fig["rows"][0].get("accuracy_runs", {})) if fig["rows"] else 0
    ax.errorbar(kb, acc, yerr=err, fmt="o-", color="tab:blue", capsize=3,
                label=f"tinyprop auto ({fig['grad']} maps)"
                + (f": mean and range of {seeds} seeds" if seeds > 1 else ""))
    labels: dict = {}  # budgets whose plans are the same point share one label
    for r, x, y in zip(fig["rows"], kb, acc, strict=True):
        labels.setdefault((x, y), []).append(str(r["budget_kb"]))
    for (x, y), names in labels.items():
        ax.annotate(f"{', '.join(names)} KB budget", (x, y), textcoords="offset points",
                    xytext=(4, -12), fontsize=7)
    ax.axvline(fig["tflm_inference_arena"] / 1024, color="tab:red", ls="--", lw=1,
               label="TFLite Micro inference arena")
    ax.set_xlabel("planned bytes: arena + trainable (KB)")
    ax.set_ylabel(f"holdout accuracy on {fig['shift']} (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    f.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    f.savefig(path)
    return path


def measure_section(ctx: Ctx, section: str, measured: dict) -> dict:
    """The figures of one of SECTIONS; `measured` holds the sections done before it (the
    baseline compares with the accuracy section's runs)."""
    if section == "baseline":
        return baseline(ctx, measured.get("accuracy", {}))
    return {"memory": memory, "board": board, "accuracy": accuracy,
            "rounding": rounding, "kernels": kernels, "tte": tte, "step": step,
            "cycles": cycles,
            "grads": grads, "frontier": frontier, "models": models,
            "camera": camera, "fleet": fleet, "faults": faults}[section](ctx)


def tte(ctx: Ctx) -> dict:
    from .models import MODELS, build_model
    from .tte import memory_png, run_all, table

    figs = run_all(list(MODELS), ctx.cfg.board, say=ctx.say)
    for line in table(figs):
        ctx.say(line)
    png = memory_png("mbv2-w0.35", build_model("mbv2-w0.35"), ctx.cfg.out / "tte-memory.png")
    return {"models": figs, "png": str(png)}


def camera(ctx: Ctx) -> dict:
    """The learn app's figures (tinyprop.bench.camera) with the demo's blob."""
    from .camera import camera as measure

    return measure(ctx.blob("auto", "256KB")[0], ctx.data, ctx.cfg.shift, ctx.cfg.lr,
                   ctx.cfg.epochs, ctx.cfg.seeds or (ctx.cfg.seed,), ctx.cfg.board,
                   ctx.cfg.out, ctx.say)


def models(ctx: Ctx) -> dict:
    from .suite import run_suite, table

    # the MLPerf Tiny models lie beside the VWW model: models/mlperf-tiny-*/
    figs = run_suite(ctx.model.parent.parent, ctx.data, ctx.cfg.out / "models", ctx.cfg.board,
                     say=ctx.say)
    for line in table(figs):
        ctx.say(line)
    return {"board": ctx.cfg.board, "models": figs}


def fleet(ctx: Ctx) -> dict:
    """What being in a fleet costs: the bytes a board sends a round (the trainable parameters
    of the fleet's VWW last:2 blob, and with Flower installed its message) against the model's
    parameters; and on the board (--board, qemu-m4 by default), the steps of a fleet round
    (the global parameters pushed first, PUSH_PARAMS, then pulled, PULL_PARAMS) against the
    same steps of `tinyprop train`: instructions a step and memory, equal when nothing
    changed, and the seconds the push and pull take over the link."""
    import time

    from ..engines import open_engine
    from ..fleet.params import ParamsLayout

    tb, _ = ctx.blob("last:2")
    layout = ParamsLayout.from_blob(tb.blob, tb.name)
    out: dict = {"scheme": "last:2", "trainable_bytes": layout.params_bytes,
                 "model_parameter_bytes": layout.model_bytes}
    try:
        from ..fleet.apps import to_record

        out["message_bytes"] = to_record(layout.initial_arrays()).count_bytes()
    except ImportError:  # Flower not installed: its envelope is not measured
        out["message_bytes"] = None
    xs, ys = ctx.split("train", ctx.cfg.shift)
    runs = {}
    for mode in ("train", "fleet"):
        with open_engine(ctx.cfg.board, tb, HParams(ctx.cfg.lr, ctx.cfg.seed)) as engine:
            t0 = time.monotonic()
            if mode == "fleet":  # a round starts from the global parameters, pushed
                engine.load_params(layout.join(layout.initial_arrays()), 0)
            pushed = time.monotonic() - t0
            s = drain(tb, engine, xs[:BOARD_STEPS], ys[:BOARD_STEPS], BOARD_STEPS,
                      ctx.cfg.lr, ctx.cfg.seed)
            t0 = time.monotonic()
            params = engine.params() if mode == "fleet" else None  # and pulled at its end
            pulled = time.monotonic() - t0
        unit = s.get("counter_unit", "us")
        runs[mode] = {f"{unit}_per_step": s.get(f"{unit}_per_step"), "memory": s["memory"]}
        if params is not None:
            runs[mode].update(push_s=round(pushed, 3), pull_s=round(pulled, 3),
                              pulled_bytes=len(params))
    out["board"] = ctx.cfg.board
    out["steps"] = BOARD_STEPS
    out["train"], out["fleet_round"] = runs["train"], runs["fleet"]
    # Memory must be equal. Instructions too, but for the counter's own jitter: its window
    # takes in a few polls of the UART, so two `tinyprop train` runs of the same steps differ
    # by tens of instructions in 21 M (FLEET_COUNTER_JITTER); a count of time (the host board's
    # us) is not compared.
    compared = [k for k in runs["train"] if k == "memory" or k.startswith("instructions")]
    out["board_cost_unchanged"] = all(
        abs(runs["train"][k] - runs["fleet"][k]) <= FLEET_COUNTER_JITTER * runs["train"][k]
        if k.startswith("instructions") else runs["train"][k] == runs["fleet"][k]
        for k in compared)
    out["compared"] = compared
    ctx.say(f"fleet: a board sends {out['trainable_bytes']:,} B of parameters a round (the "
            f"model's: {out['model_parameter_bytes']:,} B); on {ctx.cfg.board} a fleet round's "
            f"steps cost {'the same' if out['board_cost_unchanged'] else 'NOT the same'} "
            f"{' and '.join(compared)} as tinyprop train's; push {runs['fleet']['push_s']} s, "
            f"pull {runs['fleet']['pull_s']} s")
    return out


def faults(ctx: Ctx) -> dict:
    """What a board that learns in the field survives (tinyprop.faults), with the demo's blob:
    power cuts and torn operations in every save of its parameters record on the simulated NOR
    flash of the Nano and the ESP32 (records lost: goal 0); training through a lossy line at
    three fault rates on --board (steps whose parameters differ from a clean run's: goal 0);
    and, from the last long runs' committed figures (hours of CPU, not rerun here), each fuzz
    target's executions and crashes and the 10,000-step soak's divergences."""
    from ..faults import fuzz, link, soak, store

    tb, _ = ctx.blob("auto", "256KB")
    xs, ys = ctx.split("train", ctx.cfg.shift)
    cuts = store.measure(tb.blob, xs[:8], ys[:8], stride=FAULT_STORE_STRIDE,
                         save_minutes=120.0)
    ctx.say(f"store: {cuts['power_cuts']:,} power cuts, {cuts['records_lost']} records lost; "
            f"{cuts['torn_ops']:,} torn operations, {cuts['torn_records_lost']} lost")
    line = link.measure(tb, xs, ys, board=ctx.cfg.board, steps=FAULT_LINK_STEPS,
                        lr=ctx.cfg.lr, seed=ctx.cfg.seed)
    ctx.say(f"link ({ctx.cfg.board}): {line['link_faults']:,} faults injected, "
            f"{line['wrong_steps']} wrong steps, {line['frames_retried']:,} frames retried, "
            f"{line['seconds_lost']} s lost")
    out = {key: cuts[key] for key in ("power_cuts", "records_lost", "torn_ops",
                                      "torn_records_lost")}
    out.update({key: line[key] for key in ("link_faults", "wrong_steps", "frames_retried",
                                           "seconds_lost")})
    fuzzed = fuzz.figures()
    soaked = soak.last_figures()
    out.update(fuzz_execs=fuzzed["fuzz_execs"], fuzz_crashes=fuzzed["fuzz_crashes"],
               soak_steps=soaked["soak_steps"], soak_divergences=soaked["soak_divergences"])
    for target, runs in fuzzed["fuzz_execs"].items():
        ctx.say(f"fuzz {target}: {runs:,} executions, {fuzzed['fuzz_crashes'][target]} crashes "
                f"({fuzzed['fuzz_runs'][target]['date']}, the last long run)")
    ctx.say(f"soak: {soaked['soak_steps']:,} steps on {soaked['board']}, "
            f"{soaked['soak_divergences']} divergences (the last full run)")
    out["store"], out["link"], out["soak"] = cuts, line, soaked
    return out
