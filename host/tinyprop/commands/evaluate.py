"""`tinyprop eval MODEL --data DIR`: accuracy and per-class accuracy of a model on a split; of
an autoencoder (a blob converted with --loss mse, or a .tflite whose output is its input's size
and no SOFTMAX's), the reconstruction error per class and the AUC of telling anomalies by it
(training.anomaly).

A .tflite runs in the TFLite interpreter (its reference kernels); a .tpb blob runs on an engine
(`--board reference|host|BOARD|PORT`, BOARD a board tinyprop starts: its name or folder), with
its parameters as converted.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..data.datasets import PIXELS_HELP, SPLITS
from ..data.shifts import SHIFTS
from ..engines import BOARD_HELP
from ..errors import TinypropError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="accuracy of a .tflite or a .tpb on a dataset split",
                       description="Accuracy and per-class accuracy of MODEL on a split of DIR "
                       "(a sub-folder of images or .npy files a class, e.g. person/ and "
                       "non_person/, optional holdout.txt; or a .npz with x and y).")
    p.add_argument("model", type=Path, metavar="MODEL.tflite|MODEL.tpb")
    p.add_argument("--data", type=Path, required=True, metavar="DIR", help="dataset folder")
    p.add_argument("--split", choices=SPLITS, default="holdout")
    p.add_argument("--holdout", type=float, default=None, metavar="FRACTION",
                   help="the holdout is this seeded fraction of every class (as train's "
                   "--holdout) instead of the dataset's holdout.txt")
    p.add_argument("--shift", choices=sorted(SHIFTS), default="none",
                   help="sensor shift applied to the images first")
    p.add_argument("--pixels", help=f"for image datasets: {PIXELS_HELP}")
    p.add_argument("--camera", metavar="FORMAT", help="for image datasets: each image as a "
                   "board's camera in this tinyprop learn --format sends it (e.g. qcif-gray)")
    p.add_argument("--board", default=None,
                   help=f"for a .tpb: {BOARD_HELP} (default reference)")
    p.add_argument("--model", dest="source", type=Path, metavar="SRC.tflite",
                   help="for a .tpb: its source .tflite if it moved since convert")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def _evaluate(args: argparse.Namespace) -> tuple[str, dict]:
    """(engine name, scores) of args.model on args.split."""
    from ..data.datasets import load_dataset, load_split
    from ..training.anomaly import is_autoencoder
    from ..training.evaluate import (
        engine_outputs,
        evaluate_engine,
        evaluate_reconstruction,
        evaluate_tflite,
        label_names,
        tflite_outputs,
    )
    from ..training.head import read_labels

    model: Path = args.model
    if not model.is_file():
        raise TinypropError(f"{model}: no such file; pass a .tflite model or a .tpb blob")
    if model.suffix == ".tflite":
        if args.board is not None:
            raise TinypropError(f"--board {args.board}: boards run a .tpb blob; make one with "
                                f"tinyprop convert {model}, or drop --board")
        from ..frontend.tflite_reader import read_tflite

        graph = read_tflite(model)
        t_in = graph.input
        named = read_labels(model)  # a new head's classes pick the dataset's folders
        classes = load_dataset(args.data, args.holdout, named).classes
        xs, ys, _ = load_split(args.data, args.split, t_in.s, t_in.zp, args.shift,
                               t_in.shape[1:], args.holdout, named, args.pixels, args.camera)
        if is_autoencoder(graph):
            return "tflite", evaluate_reconstruction(tflite_outputs(model, xs), xs, ys, classes,
                                                     graph)
        names = label_names(classes, graph.tensors[graph.logits_op().outputs[0]].size, args.data)
        return "tflite", evaluate_tflite(model, xs, ys, names)
    if model.suffix != ".tpb":
        raise TinypropError(f"{model}: unknown model type; pass a .tflite or a .tpb blob")
    from ..compile.blobfile import load_blob
    from ..engines import open_engine

    tb = load_blob(model, args.source)
    t_in = tb.graph.input
    named = tb.labels or read_labels(tb.source)  # the blob's own class names first
    classes = load_dataset(args.data, args.holdout, named).classes
    xs, ys, _ = load_split(args.data, args.split, t_in.s, t_in.zp, args.shift, t_in.shape[1:],
                           args.holdout, named, args.pixels, args.camera)
    with open_engine(args.board or "reference", tb) as engine:
        if tb.autoencoder:
            return engine.name, evaluate_reconstruction(engine_outputs(engine, xs), xs, ys,
                                                        classes, tb.graph)
        return engine.name, evaluate_engine(engine, xs, ys, label_names(classes, tb.classes,
                                                                        args.data))


def run(args: argparse.Namespace) -> int:
    engine, result = _evaluate(args)
    result = {"model": str(args.model), "engine": engine, "split": args.split,
              "shift": args.shift, **result}
    if args.json:
        print(json.dumps(result))
        return 0
    if "auc" in result:
        print(reconstruction_lines(args, engine, result))
        return 0
    print(f"{args.model.name} on {args.data.name} {args.split} ({result['n']} samples, shift "
          f"{args.shift}, {engine}): accuracy {result['accuracy']:.1%}")
    for name, acc in result["per_class"].items():
        print(f"  {name:<12} {'-' if acc is None else f'{acc:.1%}'}")
    for key, value in result.items():
        if key.endswith("_per_inference"):
            print(f"  {key.replace('_', ' ')}: {value:,.0f}")
    return 0


def reconstruction_lines(args: argparse.Namespace, engine: str, result: dict) -> str:
    """An autoencoder's eval: the mean reconstruction error of each class and the AUC."""
    auc = "-" if result["auc"] is None else f"{result['auc']:.3f}"
    lines = [f"{args.model.name} on {args.data.name} {args.split} ({result['n']} samples: "
             f"{result['n_normal']} normal, {result['n_anomalous']} anomalous; {engine}): "
             f"reconstruction error (MSE) normal {_fmt(result['error_normal'])}, anomalous "
             f"{_fmt(result['error_anomalous'])}; AUC {auc}"]
    lines += [f"  {name:<12} {_fmt(err)}" for name, err in result["error_per_class"].items()]
    return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"
