"""Reference points for the adaptation benchmark, computed off-device with TensorFlow.

- `int8_accuracy`: the unmodified int8 model on a (shifted) split, with the TFLite interpreter's
  reference kernels: the "before" number on-device training starts from.
- `float_finetune`: full fine-tuning of the float Keras model on the shifted train split,
  evaluated on the shifted holdout: what an unconstrained, server-side update reaches.

`python -m tinyprop.bench.baseline` prints both for each shift and writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from ..data import assets
from ..data.datasets import load_images, load_split
from ..data.shifts import SHIFTS
from ..errors import TinypropError
from ..extras import require
from ..frontend.quantize import load_keras


def int8_accuracy(
    model_path: str | os.PathLike, data_dir: str | os.PathLike, shift: str = "none",
    split: str = "holdout",
) -> float:
    """Top-1 accuracy of an int8 .tflite on a split, TFLite reference kernels, one image a call."""
    tf = require("tensorflow", "the float baseline")

    interp = tf.lite.Interpreter(
        model_path=str(model_path),
        experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_REF,
    )
    interp.allocate_tensors()
    inp = interp.get_input_details()[0]
    out = interp.get_output_details()[0]
    scale, zero_point = inp["quantization"]
    size = tuple(inp["shape"][1:3])
    x, labels, _ = load_split(data_dir, split, scale, zero_point, shift, size)
    predictions = []
    for image in x:
        interp.set_tensor(inp["index"], image[None])
        interp.invoke()
        predictions.append(int(np.argmax(interp.get_tensor(out["index"])[0])))
    return float(np.mean(np.array(predictions) == labels))


def _float_accuracy(model, x: np.ndarray, labels: np.ndarray) -> float:
    probs = model.predict(x, batch_size=64, verbose=0)
    return float(np.mean(np.argmax(probs, axis=1) == labels))


def float_finetune(
    h5_path: str | os.PathLike,
    data_dir: str | os.PathLike,
    shift: str,
    epochs: int,
    lr: float,
    seed: int,
    batch_size: int = 32,
) -> dict:
    """Fine-tune every convolution and dense weight and bias of the float model (Adam,
    cross-entropy, BatchNorm frozen) on the shifted train split; report holdout accuracy
    before and after.

    Seeds Python/NumPy/TF and turns on TF op determinism, so a rerun on the same machine gives
    the same numbers."""
    tf = require("tensorflow", "the float baseline")
    keras = require("keras", "the float baseline")

    keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()
    model = load_keras(h5_path)
    # BatchNorm is frozen (inference mode, statistics and affine kept): the int8 model has BN
    # folded into its convolutions, so this is the float twin of updating the deployed weights.
    # (Training BN on batch statistics of 276 shifted images dragged the moving averages and the
    # holdout accuracy fell to the all-non_person floor: 56.2 % at lr 1e-3.)
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.trainable = False
    size = tuple(model.input_shape[1:3])
    # The model was trained on pixel/255 (Keras rescale=1/255).
    x_train, y_train, _ = load_images(data_dir, "train", shift, size)
    x_hold, y_hold, _ = load_images(data_dir, "holdout", shift, size)
    x_train = x_train.astype(np.float32) / 255.0
    x_hold = x_hold.astype(np.float32) / 255.0

    before = _float_accuracy(model, x_hold, y_hold)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=lr),
        loss=keras.losses.SparseCategoricalCrossentropy(),
    )
    start = time.perf_counter()
    history = model.fit(
        x_train, y_train, batch_size=batch_size, epochs=epochs, shuffle=True, verbose=0
    )
    seconds = time.perf_counter() - start
    return {
        "shift": shift,
        "accuracy_before": before,
        "accuracy_after": _float_accuracy(model, x_hold, y_hold),
        "train_loss": [float(v) for v in history.history["loss"]],
        "train_images": len(y_train),
        "holdout_images": len(y_hold),
        "epochs": epochs,
        "lr": lr,
        "seed": seed,
        "batch_size": batch_size,
        "train_seconds": seconds,
    }


def float_new_head(
    h5_path: str | os.PathLike,
    data_dir: str | os.PathLike,
    head_only: bool,
    epochs: int,
    lr: float,
    seed: int,
    batch_size: int = 32,
) -> dict:
    """The float baseline of a new-class task: the float model's classifier (its last Dense)
    replaced by a Dense with a unit a class of `data_dir` (Glorot init), trained with Adam and
    cross-entropy on the train split, alone (`head_only`) or with every other weight (BatchNorm
    frozen, as float_finetune); holdout accuracy after. Seeded and deterministic."""
    tf = require("tensorflow", "the float baseline")
    keras = require("keras", "the float baseline")
    from ..data.datasets import load_dataset

    keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()
    base = load_keras(h5_path)
    dense = [layer for layer in base.layers if isinstance(layer, keras.layers.Dense)][-1]
    classes = load_dataset(data_dir).classes
    features = dense.input
    logits = keras.layers.Dense(len(classes), name="new_head")(features)
    model = keras.Model(base.input, keras.layers.Softmax()(logits))
    for layer in model.layers:
        if layer.name != "new_head" and (head_only or isinstance(
                layer, keras.layers.BatchNormalization)):
            layer.trainable = False
    size = tuple(model.input_shape[1:3])
    x_train, y_train, _ = load_images(data_dir, "train", None, size)
    x_hold, y_hold, _ = load_images(data_dir, "holdout", None, size)
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=lr),
                  loss=keras.losses.SparseCategoricalCrossentropy())
    model.fit(x_train.astype(np.float32) / 255.0, y_train, batch_size=batch_size, epochs=epochs,
              shuffle=True, verbose=0)
    return {"accuracy_after": _float_accuracy(model, x_hold.astype(np.float32) / 255.0, y_hold),
            "head_only": head_only, "classes": list(classes), "train_images": len(y_train),
            "holdout_images": len(y_hold), "epochs": epochs, "lr": lr, "seed": seed}


def _run(args: argparse.Namespace) -> list[dict]:
    require("tensorflow", "the float baseline")  # before any download
    model = assets.resolve_model(args.model)
    h5 = assets.resolve_model(args.h5, variant="h5")
    data = assets.resolve_dataset(args.data)
    results = []
    for shift in args.shifts:
        row = float_finetune(h5, data, shift, args.epochs, args.lr, args.seed)
        row["int8_accuracy_before"] = int8_accuracy(model, data, shift)
        results.append(row)
        print(
            f"{shift:6s} int8 before {row['int8_accuracy_before']:.1%}  float before "
            f"{row['accuracy_before']:.1%}  after {row['accuracy_after']:.1%}  "
            f"({row['epochs']} epochs, {row['train_seconds']:.1f} s)",
            flush=True,
        )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tinyprop.bench.baseline",
        description="int8 'before' accuracy and the float fine-tuning baseline, per sensor shift.",
    )
    parser.add_argument("--model", help="int8 .tflite (default: resolved like every asset)")
    parser.add_argument("--h5", help="float Keras .h5 (default: resolved like every asset)")
    parser.add_argument("--data", help="dataset folder (default: $TINYPROP_ASSETS vww-mini)")
    parser.add_argument("--shifts", nargs="+", default=list(SHIFTS), choices=list(SHIFTS))
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)

    try:
        results = _run(args)
    except TinypropError as exc:
        print(f"tinyprop.bench.baseline: error: {exc}", file=sys.stderr)
        return exc.exit_code
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
