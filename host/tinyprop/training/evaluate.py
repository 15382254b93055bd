"""Accuracy of a model on labelled samples: the TFLite interpreter on a .tflite, or an engine
(the NumPy reference, the host C core, a board) on a training blob. `tinyprop eval`, the demo
and the bench all score through here, so their figures mean the same thing. An autoencoder is
scored by its reconstruction error instead (training.anomaly).

    evaluate_tflite(Path("vww.tflite"), xs, ys)   # {"accuracy": 0.81, "per_class": {...}, ...}
    evaluate_engine(engine, xs, ys)               # the same, plus "<unit>_per_inference" on a board
    evaluate_reconstruction(outputs, xs, ys, classes, graph)   # {"auc": 0.93, ...}
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..data.datasets import CLASSES
from ..engines import Engine
from ..errors import TinypropError
from ..extras import require
from ..frontend.graph import Graph
from .anomaly import anomaly_scores, reconstruction_errors


def scores(labels: Sequence[int], predictions: Sequence[int],
           classes: Sequence[str] = CLASSES) -> dict:
    """accuracy (a fraction), per-class accuracy (None for a class with no sample), the confusion
    matrix (rows: true label, columns: prediction) and n."""
    labels = np.asarray(labels, np.int64)
    predictions = np.asarray(predictions, np.int64)
    k = len(classes)
    confusion = np.zeros((k, k), np.int64)
    np.add.at(confusion, (labels, predictions), 1)
    per_class = {name: (float(confusion[i, i] / row.sum()) if row.sum() else None)
                 for i, (name, row) in enumerate(zip(classes, confusion, strict=True))}
    n = len(labels)
    return {"accuracy": float(np.trace(confusion) / n) if n else None, "per_class": per_class,
            "confusion": confusion.tolist(), "n": n}


def label_names(classes: Sequence[str], outputs: int, data: Path) -> tuple[str, ...]:
    """The names of a model's `outputs` classes from a dataset's `classes` (label order): a
    dataset with more classes than the model has outputs is refused; outputs beyond the
    dataset's classes are named by index."""
    if len(classes) > outputs:
        raise TinypropError(f"{data}: {len(classes)} classes ({', '.join(classes)}) for a model "
                            f"with {outputs} output(s); score a model with one output a class, "
                            "or a dataset of its classes")
    return tuple(classes) + tuple(f"output {i}" for i in range(len(classes), outputs))


def tflite_outputs(model: Path, xs: np.ndarray) -> np.ndarray:
    """The int8 output of each int8 sample (N x the output's shape), from TFLite's reference
    kernels (BUILTIN_REF: the kernels tinyprop's forward pass equals bit for bit)."""
    tf = require("tensorflow", "scoring a .tflite (the TFLite interpreter)")

    if not Path(model).is_file():
        raise TinypropError(f"{model}: no such file; pass an int8 .tflite model")
    try:
        with warnings.catch_warnings():  # its deprecation notice: LiteRT is not installed
            warnings.simplefilter("ignore", UserWarning)
            it = tf.lite.Interpreter(
                model_path=str(model),
                experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_REF)
        it.allocate_tensors()
    except (ValueError, RuntimeError) as exc:
        raise TinypropError(f"{model}: the TFLite interpreter cannot load it ({exc}); pass an "
                            "int8 .tflite model") from None
    i_in = it.get_input_details()[0]["index"]
    i_out = it.get_output_details()[0]["index"]
    outputs = []
    for x in xs:
        it.set_tensor(i_in, x[None])
        it.invoke()
        outputs.append(it.get_tensor(i_out)[0].copy())
    return np.stack(outputs)


def tflite_predictions(model: Path, xs: np.ndarray) -> np.ndarray:
    """argmax of the output for each int8 sample (tflite_outputs)."""
    outputs = tflite_outputs(model, xs)
    return np.argmax(outputs.reshape(len(xs), -1), axis=1).astype(np.int64)


def evaluate_tflite(model: Path, xs: np.ndarray, ys: np.ndarray,
                    classes: Sequence[str] = CLASSES) -> dict:
    """`scores` of a .tflite on int8 samples xs with labels ys, with the TFLite interpreter."""
    return scores(ys, tflite_predictions(model, xs), classes)


def evaluate_engine(engine: Engine, xs: np.ndarray, ys: np.ndarray,
                    classes: Sequence[str] = CLASSES) -> dict:
    """`scores` of an engine (tinyprop.engines) in its current state. An engine that counts its
    cost also gives the mean per inference as `<counter unit>_per_inference`
    (`instructions_per_inference` on qemu-m4)."""
    results = engine.evaluate(xs, ys)
    result = scores(ys, [r.prediction for r in results], classes)
    counters = [r.counter for r in results if r.counter is not None]
    if counters:
        result[f"{engine.counter_unit}_per_inference"] = float(np.mean(counters))
    return result


def engine_outputs(engine: Engine, xs: np.ndarray) -> np.ndarray:
    """The int8 output of each sample on an engine in its current state (N x the output)."""
    return np.stack([engine.infer(x) for x in xs])


def evaluate_reconstruction(outputs: np.ndarray, xs: np.ndarray, ys: np.ndarray,
                            classes: Sequence[str], graph: Graph) -> dict:
    """An autoencoder's scores (anomaly.anomaly_scores) from its int8 `outputs` of the int8
    samples xs (labels ys, of `classes`), quantized as `graph`'s input and output."""
    errors = reconstruction_errors(outputs, xs, graph.input, graph.output)
    return anomaly_scores(errors, ys, classes)
