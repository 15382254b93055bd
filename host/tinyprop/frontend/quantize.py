"""Float models made int8: a float `.tflite`, a Keras `.h5`/`.keras` or a SavedModel folder is
quantized with TensorFlow's own post-training full-integer quantization (int8 weights per
channel, int8 activations, int8 input and output), calibrated on samples of the user's dataset.
`tinyprop convert` calls it for any model that is not int8 already, then converts the int8
model it wrote as it would any other.

    int8 = quantize_model(Path("kws_float.tflite"), Path("data/"), Path("out/kws.int8.tflite"))

What the calibration sees: the dataset's train split as real-valued model inputs
(datasets.load_real: images in the pixel range --pixels names, 0:1 = pixel / 255 by default,
features as they are), at most CALIB_SAMPLES of them.
"""

from __future__ import annotations

import contextlib
import io
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from ..errors import TinypropError
from ..extras import require

CALIB_SAMPLES = 200  # TensorFlow's guidance is 100-500 representative samples
KERAS_SUFFIXES = (".h5", ".keras")


def model_kind(model: Path) -> str:
    """"int8" (a .tflite with an int8 input), "tflite" (a float .tflite), "keras" or
    "savedmodel"; a one-line error for anything else."""
    if model.is_dir():
        if (model / "saved_model.pb").is_file():
            return "savedmodel"
        raise TinypropError(f"{model}: a folder without saved_model.pb; pass a .tflite, a Keras "
                            ".h5/.keras file or a SavedModel folder")
    if not model.is_file():
        raise TinypropError(f"{model}: no such file; pass a .tflite, a Keras .h5/.keras file or "
                            "a SavedModel folder")
    if model.suffix in KERAS_SUFFIXES:
        return "keras"
    if model.suffix != ".tflite":
        raise TinypropError(f"{model}: unknown model type {model.suffix or '(no suffix)'}; pass "
                            "a .tflite, a Keras .h5/.keras file or a SavedModel folder")
    return "int8" if _tflite_input_dtype(model) == np.int8 else "tflite"


def _tflite_input_dtype(model: Path) -> np.dtype:
    import tflite

    try:
        m = tflite.Model.GetRootAsModel(model.read_bytes(), 0)
        sg = m.Subgraphs(0)
        t = sg.Tensors(sg.Inputs(0))
    except Exception as exc:  # the flatbuffer reader raises anything on a broken file
        raise TinypropError(f"{model}: not a readable .tflite ({exc}); pass a model the TFLite "
                            "converter wrote") from None
    return np.dtype(np.int8) if t.Type() == tflite.TensorType.INT8 else np.dtype(np.float32)


def quantize_model(model: Path, calib: Path | None, out: Path, shift: str = "none",
                   holdout: float | None = None, pixels: str | None = None) -> Path:
    """Write `model` (float) quantized to full int8 at `out`, calibrated on `calib`'s train
    split seen through `shift`, images in pixel range `pixels` (datasets.load_real); returns
    `out`."""
    kind = model_kind(model)
    if kind == "int8":
        return model
    if calib is None:
        raise TinypropError(f"{model}: a float model; pass --calib DIR (a dataset of its task) "
                            "so tinyprop can quantize it to int8 for you")
    tf = require("tensorflow", "quantizing a float model to int8")
    shape = _input_shape(tf, model, kind)
    xs = _calibration_inputs(calib, shape, shift, holdout, pixels)

    def representative() -> Iterator[list[np.ndarray]]:
        for x in xs:
            yield [x[None].astype(np.float32)]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        content = _converter(tf, model, kind)(representative)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(content)
    return out


def load_keras(path: str | os.PathLike):
    """A Keras .h5/.keras model, also one Keras 2.4 saved (the MLPerf VWW .h5): Keras 3 rejects
    the `groups` argument Keras 2.4 stored for DepthwiseConv2D (always 1 there, so dropping it
    changes nothing)."""
    keras = require("keras", "loading a Keras model")

    class DepthwiseConv2D(keras.layers.DepthwiseConv2D):
        def __init__(self, *args, groups: int = 1, **kwargs):
            super().__init__(*args, **kwargs)

    return keras.models.load_model(str(path), compile=False,
                                   custom_objects={"DepthwiseConv2D": DepthwiseConv2D})


def _input_shape(tf, model: Path, kind: str) -> tuple[int, ...]:
    """The model's input shape without the batch dimension."""
    if kind == "tflite":
        import tflite

        sg = tflite.Model.GetRootAsModel(model.read_bytes(), 0).Subgraphs(0)
        return tuple(int(d) for d in sg.Tensors(sg.Inputs(0)).ShapeAsNumpy()[1:])
    if kind == "keras":
        m = load_keras(model)
        return tuple(int(d) for d in m.inputs[0].shape[1:])
    loaded = tf.saved_model.load(str(model))
    fn = loaded.signatures["serving_default"]
    spec = next(iter(fn.structured_input_signature[1].values()))
    return tuple(int(d) for d in spec.shape[1:])


def _calibration_inputs(calib: Path, shape: tuple[int, ...], shift: str,
                        holdout: float | None, pixels: str | None) -> np.ndarray:
    from ..data.datasets import load_real

    xs = load_real(calib, "train", shift, shape, holdout, pixels=pixels)
    if len(xs) > CALIB_SAMPLES:  # an even spread over the (class-sorted) split
        xs = xs[np.linspace(0, len(xs) - 1, CALIB_SAMPLES).round().astype(int)]
    return xs


def _converter(tf, model: Path, kind: str) -> Callable[[Callable], bytes]:
    """A function that converts `model` with a representative dataset to full int8."""
    if kind == "tflite":
        # A float .tflite has no graph to convert again: TensorFlow's calibrator quantizes the
        # flatbuffer itself, as the converter does after converting a Keras model.
        from tensorflow.lite.python.optimize import calibrator

        def run(representative: Callable) -> bytes:
            cal = calibrator.Calibrator(_all_float(model.read_bytes()))
            return cal.calibrate_and_quantize(representative, tf.int8, tf.int8, False,
                                              activations_type=tf.int8)
        return run
    if kind == "keras":
        # a batch of one, as a board runs it: with Keras' free batch dimension a Flatten's
        # shape is computed at run time (SHAPE, STRIDED_SLICE, PACK: ops no board needs)
        m = load_keras(model)
        x = tf.keras.Input(batch_shape=(1, *m.inputs[0].shape[1:]))
        conv = tf.lite.TFLiteConverter.from_keras_model(tf.keras.Model(x, m(x)))
    else:
        conv = tf.lite.TFLiteConverter.from_saved_model(str(model))

    return lambda representative: full_int8(conv, representative)


def full_int8(conv, representative: Callable) -> bytes:
    """What a TFLiteConverter makes with full-integer post-training quantization: int8
    weights, activations, input and output, calibrated on `representative`."""
    import tensorflow as tf

    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = representative
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    with contextlib.redirect_stdout(io.StringIO()):  # a Keras model's export lists its graph
        return conv.convert()


def _all_float(content: bytes) -> bytes:
    """A float .tflite with every int8 constant (the weights of a dynamic-range model, such as
    MLPerf Tiny's keyword-spotting "float32" model) dequantized to float32: TensorFlow's
    calibrator takes only models without quantization parameters."""
    from tensorflow.lite.tools import flatbuffer_utils as fbu

    m = fbu.read_model_from_bytearray(bytearray(content))
    changed = False
    for sg in m.subgraphs:
        for t in sg.tensors:
            q = t.quantization
            data = m.buffers[t.buffer].data if t.buffer < len(m.buffers) else None
            if t.type != 9 or q is None or q.scale is None or data is None or not len(data):
                continue  # 9: TensorType.INT8; only constants with their scales are dequantized
            w = np.frombuffer(bytes(data), np.int8).reshape(t.shape).astype(np.float32)
            axis = [1] * w.ndim
            axis[q.quantizedDimension if len(q.scale) > 1 else 0] = len(q.scale)
            scale = np.asarray(q.scale, np.float32).reshape(axis)
            zp = np.asarray(q.zeroPoint, np.float32).reshape(axis)
            m.buffers[t.buffer].data = np.frombuffer(((w - zp) * scale).astype("<f4").tobytes(),
                                                     np.uint8)
            t.type, t.quantization, changed = 0, None, True  # 0: TensorType.FLOAT32
    return bytes(fbu.convert_object_to_bytearray(m)) if changed else content


def float_predictions(model: Path, xs: np.ndarray) -> np.ndarray:
    """argmax of a float model's output for real-valued samples xs (TFLite for a .tflite, Keras
    or the SavedModel's signature otherwise): the accuracy its int8 copy is compared with."""
    tf = require("tensorflow", "scoring a float model")
    kind = model_kind(model)
    if kind == "tflite":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            it = tf.lite.Interpreter(
                model_path=str(model), experimental_op_resolver_type=tf.lite.experimental.
                OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        it.allocate_tensors()
        i_in, i_out = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
        out = []
        for x in xs:
            it.set_tensor(i_in, x[None].astype(np.float32))
            it.invoke()
            out.append(int(np.argmax(it.get_tensor(i_out)[0])))
        return np.array(out, np.int64)
    if kind == "keras":
        y = load_keras(model).predict(xs, verbose=0)
    else:
        fn = tf.saved_model.load(str(model)).signatures["serving_default"]
        y = next(iter(fn(tf.constant(xs, tf.float32)).values())).numpy()
    return np.argmax(y, axis=-1).astype(np.int64)


def quantization_accuracy(float_model: Path, int8_model: Path, data: Path, shift: str = "none",
                          holdout: float | None = None, pixels: str | None = None) -> dict:
    """Accuracy of the float model and of its int8 copy on `data`'s holdout split (its train
    split if it has no holdout): {"split", "n", "float", "int8"}."""
    from ..data.datasets import load_dataset, load_real, quantize_real
    from ..training.evaluate import tflite_predictions
    from .tflite_reader import read_tflite

    ds = load_dataset(data, holdout)
    split = "holdout" if ds.split("holdout") else "train"
    ys = np.array([s.label for s in ds.split(split)], np.int64)
    t_in = read_tflite(int8_model).input
    xr = load_real(data, split, shift, t_in.shape[1:], holdout, pixels=pixels)
    # the int8 inputs from the real ones, as load_split makes them (decoded once, not twice)
    xq = quantize_real(xr, t_in.s, t_in.zp)
    return {"split": split, "n": len(ys),
            "float": float(np.mean(float_predictions(float_model, xr) == ys)),
            "int8": float(np.mean(tflite_predictions(int8_model, xq) == ys))}
