"""The MLPerf Tiny models trained by tinyprop (`tinyprop bench --only models`).

Each model of SUITE is converted as

    tinyprop convert MODEL -o M.tpb --scheme auto --budget 256KB --target cortex-m4 --calib DATA

makes it, then trained STEPS steps, the same samples, labels, lr and seed, on the NumPy
reference, the host C core and the board (qemu-m4: instructions counted with -icount); the
figures: the ops (kinds and counts), classes, input, the plan (training arena + trainable
parameters within the budget, and the inference arena), instructions per training step (the
median of the steps) and per inference on the board, the weighted ops that run the reference
kernels (those of a kind with no DSP kernel, and those whose DSP kernel falls back: the
scratch plan's note says why), and the CRC-32 of the trained parameters on each engine: equal on all
three is bit for bit.

DATA: vww-mini's photos for the VWW models (and its coco3 task for the new head); no CIFAR-10,
Speech Commands or ToyCar data is reachable here, so the image-classification and keyword
models calibrate and train on GENERATED int8 inputs, uniformly random from a fixed seed,
labelled round robin, and the anomaly-detection autoencoder (`--loss mse`) on generated
machine sounds (data/synthetic.py), its normal ones. The models are read from the folder the
MLPerf VWW model lies in (its parent holds mlperf-tiny-vww/, -ic/, -kws/ and -ad/, as
$TINYPROP_ASSETS/models does).
"""

from __future__ import annotations

import time
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import TinypropError

STEPS = 20  # training steps on every engine
LR = 0.01
SEED = 0
BUDGET = "256KB"  # less convert's default reserve
TARGET = "cortex-m4"
GENERATED = 24  # generated samples of a model without reachable data (calibration and steps)


@dataclass(frozen=True)
class SuiteModel:
    key: str  # its files' names under the output folder
    name: str
    path: str  # under the models folder
    data: str  # "vww-mini", "coco3" (vww-mini's 3-class task: a new head), "generated", or
    # "sounds" (data/synthetic's generated machine sounds, for the autoencoder)
    loss: str = "xent"  # convert --loss: mse for the autoencoder (trained on normal sounds)


SUITE = (
    SuiteModel("vww", "MLPerf VWW", "mlperf-tiny-vww/vww_96_int8.tflite", "vww-mini"),
    SuiteModel("ic", "MLPerf IC (ResNet-8)", "mlperf-tiny-ic/pretrainedResnet_quant.tflite",
               "generated"),
    SuiteModel("kws", "MLPerf KWS (DS-CNN)", "mlperf-tiny-kws/kws_ref_model.tflite",
               "generated"),
    SuiteModel("ad", "MLPerf AD (FC autoencoder)", "mlperf-tiny-ad/ad01_int8.tflite",
               "sounds", loss="mse"),
    SuiteModel("vww-coco3", "VWW, new head: coco3", "mlperf-tiny-vww/vww_96_int8.tflite",
               "coco3"),
    SuiteModel("vww-keras", "VWW Keras float (vww_96.h5), quantized by tinyprop",
               "mlperf-tiny-vww/vww_96.h5", "vww-mini"),
)


def _generated(model: Path, out: Path) -> Path:
    """A .npz of GENERATED random int8 inputs of `model`, labelled round robin."""
    from ..frontend.tflite_reader import read_tflite

    g = read_tflite(model)
    n_out = g.tensors[g.logits_op().outputs[0]].size
    rng = np.random.default_rng(SEED)
    xs = rng.integers(-128, 128, (GENERATED, *g.input.shape[1:]), dtype=np.int8)
    np.savez(out, x=xs, y=np.arange(GENERATED) % n_out)
    return out


def prepare(m: SuiteModel, models: Path, vww_mini: Path, out: Path) -> tuple[Path, Path, dict]:
    """(the int8 model convert takes, its calibration and training data, what was done to
    make them) of `m`: a float model quantized (frontend.quantize), a new head put on."""
    src = models / m.path
    if not src.exists():
        raise TinypropError(f"{src}: missing; the models bench reads the MLPerf Tiny models "
                            "beside the VWW model: set $TINYPROP_ASSETS to the shared folder "
                            "that holds models/mlperf-tiny-*/")
    out.mkdir(parents=True, exist_ok=True)
    notes: dict = {}
    if m.data == "generated":
        return src, _generated(src, out / f"{m.key}.npz"), {"data": "generated int8"}
    if m.data == "sounds":
        from ..data.synthetic import machine_sounds

        return src, machine_sounds(out / f"{m.key}.npz"), {"data": "generated machine sounds"}
    data = vww_mini
    model = src
    if src.suffix != ".tflite":
        from ..frontend.quantize import quantize_model

        t0 = time.time()
        model = quantize_model(src, vww_mini, out / f"{m.key}.int8.tflite")
        notes["quantize_seconds"] = round(time.time() - t0, 1)
    if m.data == "coco3":
        from ..data.datasets import load_dataset
        from ..data.tasks import build_task
        from ..training.head import new_head

        data = build_task("coco3", vww_mini, out / "coco3")
        model = new_head(model, load_dataset(data).classes, data, out / "coco3.head.tflite")
        notes["head"] = "new, class means"
    notes["data"] = data.name
    return model, data, notes


def train_on(engine: str, tb, xs: np.ndarray, ys: np.ndarray) -> dict:
    """Train `tb` on `engine`, one step a sample, and infer one sample: the trained
    parameters' CRC-32 and, on a board, its counter per step (median) and per inference."""
    from ..engines import HParams, open_engine

    t0 = time.time()
    with open_engine(engine, tb, HParams(LR, SEED)) as eng:
        eng.prepare(xs, ys)
        steps = [eng.train(xs[i], int(ys[i]), i) for i in range(len(xs))]
        inference = eng.evaluate(xs[:1], ys[:1])[0].counter
        out = {"params_crc": f"{zlib.crc32(eng.params()):08x}", "unit": eng.counter_unit,
               "seconds": round(time.time() - t0, 1)}
    if out["unit"] is not None:
        out["per_step"] = int(np.median([s.counter for s in steps]))
        out["per_inference"] = inference
    return out


def measure(m: SuiteModel, models: Path, vww_mini: Path, out: Path,
            engines: tuple[str, ...] = ("reference", "host", "qemu-m4")) -> dict:
    """The figures of `m` (module docstring), trained on each of `engines`."""
    from ..compile.auto import calibration_samples
    from ..compile.build import build
    from ..compile.report import figures
    from ..data.datasets import load_dataset, load_split
    from ..frontend.ops import spec
    from ..training.anomaly import normal_samples
    from ..training.head import read_labels

    t0 = time.time()
    model, data, notes = prepare(m, models, vww_mini, out)
    tb = build(model, "auto", BUDGET, data, target=TARGET, labels=read_labels(model),
               loss=m.loss)
    (out / f"{m.key}.tpb").write_bytes(tb.blob)
    fig = figures(tb.program, tb.blob)
    g, t_in = tb.graph, tb.graph.input
    xs, ys, _ = load_split(data, "train", t_in.s, t_in.zp, size=t_in.shape[1:])
    if tb.autoencoder:  # it trains on the normal sounds
        xs, ys = normal_samples(xs, ys, load_dataset(data).classes, data)
    picked = calibration_samples(xs, ys, STEPS)  # spread over the classes
    xs = np.stack([x for x, _ in picked])
    ys = np.array([y for _, y in picked])
    if len(xs) < STEPS:
        raise TinypropError(f"{data}: {len(xs)} training samples; the models bench trains "
                            f"{STEPS} steps on distinct samples")
    runs = {e: train_on(e, tb, xs, ys) for e in engines}
    crcs = {r["params_crc"] for r in runs.values()}
    on_reference = [r for r in fig["scratch"]["ops"] if spec(r["kind"]).weighted
                    and "reference" in (r["kernel_infer"], r["kernel_train"])]
    return {"key": m.key, "model": m.name, "source": str(models / m.path),
            "int8_model": str(model), **notes,
            "ops": dict(Counter(op.kind for op in g.ops)), "loss": m.loss,
            "classes": None if tb.autoencoder else tb.classes,
            "labels": list(tb.labels) if tb.labels else None,
            "input": {"shape": list(t_in.shape[1:]), "dtype": "int8",
                      "scale": float(t_in.s), "zero_point": int(t_in.zp)},
            "scheme": fig["scheme"], "arena_peak": fig["arena_peak"],
            "trainable_bytes": fig["trainable_bytes"], "total": fig["total"],
            "inference_arena": fig["inference_arena"],
            "reference_kernels": [f"{r['kind']} #{r['op']}" for r in on_reference
                                  if not r["note"]],
            "dsp_fallbacks": [f"{r['kind']} #{r['op']}: {r['note']}" for r in on_reference
                              if r["note"]],
            "steps": STEPS, "lr": LR, "seed": SEED, "engines": runs,
            "bit_exact": len(crcs) == 1, "seconds": round(time.time() - t0, 1)}


def run_suite(models: Path, vww_mini: Path, out: Path, board: str = "qemu-m4",
              say=print) -> list[dict]:
    figs = []
    for m in SUITE:
        fig = measure(m, models, vww_mini, out, ("reference", "host", board))
        say(f"  {m.name}: {fig['scheme']}, {fig['total']:,} B, params "
            f"{'equal' if fig['bit_exact'] else 'DIFFERENT'} on {', '.join(fig['engines'])} "
            f"({fig['seconds']} s)")
        figs.append(fig)
    return figs


def _ops(ops: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(ops.items(), key=lambda kv: -kv[1]))


def table(figs: list[dict]) -> list[str]:
    """The figures as a Markdown table, one row a model."""
    rows = ["| model | ops | classes | input | plan: arena + trainable = total (inference "
            "arena) | instructions / step, / inference | params CRC: reference, host C, board |",
            "|---|---|---:|---|---:|---:|---|"]
    for f in figs:
        board = [r for r in f["engines"].values() if r["unit"] is not None]
        per = (f"{board[0]['per_step'] / 1e6:.2f} M / {board[0]['per_inference'] / 1e6:.2f} M"
               if board else "")
        classes = ("none (autoencoder, --loss mse)" if f["classes"] is None else f"{f['classes']}"
                   + (f" ({', '.join(f['labels'])})" if f["labels"] else ""))
        shape = "x".join(map(str, f["input"]["shape"]))
        crcs = ", ".join(r["params_crc"] for r in f["engines"].values())
        rows.append(f"| {f['model']} | {_ops(f['ops'])} | {classes} | {shape} int8 | "
                    f"{f['arena_peak']:,} + {f['trainable_bytes']:,} = {f['total']:,} "
                    f"({f['inference_arena']:,}) | {per} | {crcs}: "
                    f"{'equal' if f['bit_exact'] else 'DIFFERENT'} |")
    return rows
