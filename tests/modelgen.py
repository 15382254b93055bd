"""Small int8 test models built in code, one a feature of every op tinyprop runs.

Each model is a Keras model with fixed seeds and realistic weights (per-channel magnitudes that
differ, non-zero biases, BatchNorm with non-trivial statistics), post-training quantized to full
int8 by the TFLite converter. Conversion takes about a second a model, so `build_tflite` converts
once and caches under build/testmodels/<hash of this file and the TF version>/.

`EXPECTED_OPS[name]` is the exact set of op kinds the converted model must hold: a model that does
not exercise what it was written for fails tests/test_forward_reference.py, not silently.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
from tinyprop.paths import made_once

REPO_ROOT = Path(__file__).resolve().parents[1]
REP_SAMPLES = 32  # representative-dataset size: enough for stable ranges, fast to calibrate


def _keras():
    # TensorFlow takes seconds to import; only building a model needs it.
    import keras

    return keras


# ---- builders -------------------------------------------------------------------------------


def _realistic(model, seed: int):
    """Give every layer weights that look trained: output channels of different magnitudes
    (so per-channel scales differ), non-zero biases, BatchNorm statistics far from identity."""
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        kind = type(layer).__name__
        ws = layer.get_weights()
        if not ws:
            continue
        if kind == "BatchNormalization":
            c = ws[0].shape[0]
            gamma = rng.uniform(0.5, 1.5, c)
            beta = rng.normal(0.0, 0.3, c)
            mean = rng.normal(0.0, 0.5, c)
            var = rng.uniform(0.3, 2.0, c)
            layer.set_weights([a.astype(np.float32) for a in (gamma, beta, mean, var)])
            continue
        # Drawn here, not taken from Keras' initializers: those draw from a generator that
        # k.utils.set_random_seed does not reset, so a model would differ with what the process
        # built before it (Glorot-uniform limits, as Keras' default).
        shape = ws[0].shape
        receptive = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
        limit = np.sqrt(6.0 / (receptive * (shape[-2] + shape[-1])))
        kernel = rng.uniform(-limit, limit, shape).astype(np.float32)
        # Conv/Dense kernels end with the output channel; depthwise (kh, kw, cin, mult) too.
        gains = rng.uniform(0.3, 2.0, kernel.shape[-1]).astype(np.float32)
        out = [kernel * gains]
        if len(ws) > 1:
            out.append(rng.normal(0.0, 0.2, ws[1].shape).astype(np.float32))
        layer.set_weights(out)
    return model


def _input(k, shape: tuple[int, ...]):
    # A static batch of 1 (what the firmware runs): with a dynamic batch, Flatten converts to
    # SHAPE/STRIDED_SLICE/PACK feeding the RESHAPE, which tinyprop refuses.
    return k.Input(shape, batch_size=1)


def _seq(input_shape: tuple[int, ...], *layers, seed: int = 0):
    k = _keras()
    k.utils.set_random_seed(seed)
    return _realistic(k.Sequential([_input(k, input_shape), *layers]), seed)


def _functional(input_shape: tuple[int, ...], body: Callable, seed: int = 0):
    k = _keras()
    k.utils.set_random_seed(seed)
    x = _input(k, input_shape)
    return _realistic(k.Model(x, body(k.layers, x)), seed)


def _head(L, n: int = 3):
    return [L.GlobalAveragePooling2D(), L.Dense(n), L.Softmax()]


def conv1x1_none():
    L = _keras().layers
    return _seq((8, 8, 4), L.Conv2D(6, 1), L.Conv2D(5, 1, activation="relu"), seed=1)


def conv3x3_same_relu():
    L = _keras().layers
    return _seq((9, 9, 3), L.Conv2D(8, 3, padding="same", activation="relu"), *_head(L), seed=2)


def conv3x3_valid_s2_relu6():
    L = _keras().layers
    return _seq((13, 11, 3), L.Conv2D(8, 3, strides=2, padding="valid", activation="relu6"),
                L.Conv2D(4, 3, padding="valid"), seed=3)


def conv5x5_same_s2():
    L = _keras().layers
    return _seq((13, 11, 2), L.Conv2D(6, 5, strides=2, padding="same"), seed=4)


def conv_nonsquare():
    L = _keras().layers
    return _seq((7, 9, 3), L.Conv2D(4, (1, 3), padding="same", activation="relu"),
                L.Conv2D(5, (3, 1), padding="valid", activation="relu6"),
                L.Conv2D(6, (2, 3), strides=(1, 2), padding="same"),
                L.Conv2D(4, (3, 2), strides=(2, 1), padding="valid"), seed=5)


def conv_bn_relu():
    L = _keras().layers
    return _seq((10, 10, 3), L.Conv2D(8, 3, padding="same", use_bias=False),
                L.BatchNormalization(), L.ReLU(), L.Conv2D(6, 3, strides=2, padding="same"),
                L.BatchNormalization(), L.ReLU(6.0), seed=6)


def dw_m1_relu6():
    L = _keras().layers
    return _seq((9, 9, 6), L.DepthwiseConv2D(3, padding="same", activation="relu6"),
                L.DepthwiseConv2D(3, padding="valid"), seed=7)


def dw_m2_valid():
    L = _keras().layers
    return _seq((8, 7, 4), L.DepthwiseConv2D(3, depth_multiplier=2, activation="relu"), seed=8)


def dw_s2_same_odd():
    L = _keras().layers
    return _seq((13, 11, 5), L.DepthwiseConv2D(3, strides=2, padding="same", activation="relu6"),
                L.DepthwiseConv2D(5, strides=2, padding="same"), seed=9)


def dw_m2_s2_same():
    L = _keras().layers
    return _seq((10, 9, 3), L.DepthwiseConv2D(3, strides=2, padding="same", depth_multiplier=2),
                L.DepthwiseConv2D((1, 3), depth_multiplier=2, activation="relu"), seed=10)


def fc_flatten():
    L = _keras().layers
    return _seq((5, 5, 3), L.Conv2D(4, 3, activation="relu"), L.Flatten(), L.Dense(10),
                L.Softmax(), seed=11)


def fc_dense_only():
    L = _keras().layers
    return _seq((24,), L.Dense(16, activation="relu"), L.Dense(12, activation="relu6"),
                L.Dense(5), seed=12)


def add_residual_scales():
    def body(L, x):
        a = L.Conv2D(8, 3, padding="same", activation="relu6")(x)
        b = L.Conv2D(8, 3, padding="same")(a)  # wider range than a: the ADD inputs' scales differ
        return L.Add()([a, b])

    return _functional((7, 7, 3), body, seed=13)


def add_relu():
    def body(L, x):
        a = L.Conv2D(6, 1)(x)
        b = L.DepthwiseConv2D(3, padding="same")(a)
        y = L.ReLU()(L.Add()([b, a]))
        return L.Add()([y, L.Conv2D(6, 1)(y)])

    return _functional((6, 8, 4), body, seed=14)


def avgpool_same_odd():
    L = _keras().layers
    return _seq((13, 11, 4), L.Conv2D(4, 1, activation="relu"),
                L.AveragePooling2D(3, strides=2, padding="same"),
                L.AveragePooling2D((2, 3), strides=(2, 2), padding="same"), seed=15)


def avgpool_valid_nondivide():
    L = _keras().layers
    return _seq((7, 7, 4), L.Conv2D(5, 1), L.AveragePooling2D(2, padding="valid"),
                L.AveragePooling2D((3, 2), strides=(1, 2), padding="valid"), seed=16)


def maxpool_same_odd():
    L = _keras().layers
    return _seq((13, 11, 4), L.Conv2D(4, 1, activation="relu"),
                L.MaxPooling2D(3, strides=2, padding="same"),
                L.MaxPooling2D((2, 3), strides=(2, 2), padding="same"), seed=26)


def maxpool_valid_fused():
    """Max pools whose windows do not divide the map, the converter fusing RELU and RELU6."""
    L = _keras().layers
    return _seq((7, 7, 4), L.Conv2D(5, 1), L.MaxPooling2D(2, padding="valid"), L.ReLU(),
                L.MaxPooling2D((3, 2), strides=(1, 2), padding="valid"), L.ReLU(6.0), seed=27)


def maxpool_cnn():
    """A classic small CNN: conv, max pool, conv, overlapping max pool, MEAN, FC (training
    through max pools: tests/test_kernels.py)."""
    L = _keras().layers
    return _seq((12, 12, 3), L.Conv2D(8, 3, padding="same", activation="relu"),
                L.MaxPooling2D(2), L.Conv2D(8, 3, padding="same", activation="relu"),
                L.MaxPooling2D(3, strides=2, padding="same"), *_head(L, 3), seed=28)


def mean_keepdims():
    L = _keras().layers
    return _seq((7, 7, 6), L.Conv2D(6, 3, padding="same", activation="relu"),
                L.GlobalAveragePooling2D(keepdims=True), L.Conv2D(4, 1), L.Flatten(),
                L.Softmax(), seed=17)


def mean_nokeep():
    L = _keras().layers
    return _seq((11, 13, 5), L.Conv2D(8, 3, strides=2, padding="same"), *_head(L, 4), seed=18)


def pad_asym_conv():
    L = _keras().layers
    return _seq((7, 6, 3), L.ZeroPadding2D(((1, 2), (0, 3))), L.Conv2D(5, 3, activation="relu"),
                L.ZeroPadding2D(((0, 1), (2, 0))), L.DepthwiseConv2D(3, strides=2), seed=19)


def pad_asym_pool():
    L = _keras().layers
    return _seq((9, 9, 3), L.Conv2D(4, 1), L.ZeroPadding2D(((2, 1), (1, 0))),
                L.AveragePooling2D(3, strides=2), seed=20)


def odd_7x7_stack():
    L = _keras().layers
    return _seq((7, 7, 3), L.Conv2D(6, 3, padding="same", activation="relu6"),
                L.DepthwiseConv2D(3, strides=2, padding="same", activation="relu6"),
                L.Conv2D(8, 1, activation="relu6"), L.DepthwiseConv2D(3, padding="valid"),
                L.Flatten(), L.Dense(2), L.Softmax(), seed=21)


def mbv2_block():
    def body(L, x):
        y = L.ReLU(6.0)(L.BatchNormalization()(L.Conv2D(24, 1, use_bias=False)(x)))
        y = L.DepthwiseConv2D(3, padding="same", use_bias=False)(y)
        y = L.ReLU(6.0)(L.BatchNormalization()(y))
        y = L.BatchNormalization()(L.Conv2D(8, 1, use_bias=False)(y))
        y = L.Add()([x, y])
        for layer in _head(L, 2):
            y = layer(y)
        return y

    return _functional((12, 12, 8), body, seed=22)


def mbv1_tail():
    """The last blocks of a MobileNetV1 (the VWW model's shape): dw/pw pairs, then AvgPool over
    the whole map, RESHAPE, FULLY_CONNECTED, SOFTMAX."""
    L = _keras().layers

    def dw_pw(c, stride):
        return [L.DepthwiseConv2D(3, strides=stride, padding="same", use_bias=False),
                L.BatchNormalization(), L.ReLU(6.0), L.Conv2D(c, 1, use_bias=False),
                L.BatchNormalization(), L.ReLU(6.0)]

    return _seq((12, 12, 16), *dw_pw(32, 2), *dw_pw(32, 1), L.AveragePooling2D(6),
                L.Flatten(), L.Dense(2), L.Softmax(), seed=23)


def fc_per_tensor():
    """Dense layers with per-tensor weight scales, like the MLPerf VWW classifier."""
    L = _keras().layers
    return _seq((3, 3, 16), L.AveragePooling2D(3), L.Flatten(), L.Dense(12, activation="relu"),
                L.Dense(2), L.Softmax(), seed=25)


def softmax_wide():
    L = _keras().layers
    return _seq((40,), L.Dense(32), L.Softmax(), seed=24)


MODELS: dict[str, Callable] = {f.__name__: f for f in (
    conv1x1_none, conv3x3_same_relu, conv3x3_valid_s2_relu6, conv5x5_same_s2, conv_nonsquare,
    conv_bn_relu, dw_m1_relu6, dw_m2_valid, dw_s2_same_odd, dw_m2_s2_same, fc_flatten,
    fc_dense_only, add_residual_scales, add_relu, avgpool_same_odd, avgpool_valid_nondivide,
    maxpool_same_odd, maxpool_valid_fused, maxpool_cnn, mean_keepdims, mean_nokeep,
    pad_asym_conv, pad_asym_pool, odd_7x7_stack, mbv2_block, mbv1_tail, fc_per_tensor,
    softmax_wide,
)}
MODELS["mean_same_quant"] = mean_nokeep
MODELS["mean_keepdims_same_quant"] = mean_keepdims
# Converted with per-tensor (not per-channel) FULLY_CONNECTED weights.
PER_TENSOR_DENSE = {"fc_per_tensor"}

# Models the reader must refuse (tests/test_convert_errors.py), with the op it must name.


def multiply():
    def body(L, x):
        return L.Multiply()([L.Conv2D(3, 1)(x), L.Conv2D(3, 3, padding="same")(x)])

    return _functional((8, 8, 3), body, seed=30)


def concatenation():
    def body(L, x):
        return L.Concatenate()([L.Conv2D(3, 1)(x), L.Conv2D(2, 3, padding="same")(x)])

    return _functional((6, 6, 3), body, seed=31)


def tanh():
    L = _keras().layers
    return _seq((16,), L.Dense(8, activation="tanh"), seed=32)


def dilated_conv():
    L = _keras().layers
    return _seq((12, 12, 3), L.Conv2D(4, 3, dilation_rate=2, padding="same"), seed=33)


def dilated_depthwise():
    L = _keras().layers
    return _seq((12, 12, 3), L.Conv2D(4, 1),
                L.DepthwiseConv2D(3, dilation_rate=2, padding="valid"), seed=34)


REFUSED: dict[str, Callable] = {f.__name__: f for f in (
    multiply, concatenation, tanh, dilated_conv, dilated_depthwise,
)}
# A float model: the same Keras model converted without quantization.
FLOAT_MODELS = {"float_conv": conv3x3_same_relu}


_C, _D, _F, _A = "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD"
_P, _X, _M, _PAD = "AVERAGE_POOL_2D", "MAX_POOL_2D", "MEAN", "PAD"
_R, _S = "RESHAPE", "SOFTMAX"
EXPECTED_OPS: dict[str, set[str]] = {
    "conv1x1_none": {_C},
    "conv3x3_same_relu": {_C, _M, _F, _S},
    "conv3x3_valid_s2_relu6": {_C},
    "conv5x5_same_s2": {_C},
    "conv_nonsquare": {_C},
    "conv_bn_relu": {_C},
    "dw_m1_relu6": {_D},
    "dw_m2_valid": {_D},
    "dw_s2_same_odd": {_D},
    "dw_m2_s2_same": {_D},
    "fc_flatten": {_C, _R, _F, _S},
    "fc_dense_only": {_F},
    "add_residual_scales": {_C, _A},
    "add_relu": {_C, _D, _A},
    "avgpool_same_odd": {_C, _P},
    "avgpool_valid_nondivide": {_C, _P},
    "maxpool_same_odd": {_C, _X},
    "maxpool_valid_fused": {_C, _X},
    "maxpool_cnn": {_C, _X, _M, _F, _S},
    "mean_keepdims": {_C, _M, _R, _S},
    "mean_nokeep": {_C, _M, _F, _S},
    "pad_asym_conv": {_PAD, _C, _D},
    "pad_asym_pool": {_C, _PAD, _P},
    "odd_7x7_stack": {_C, _D, _R, _F, _S},
    "mbv2_block": {_C, _D, _A, _M, _F, _S},
    "mbv1_tail": {_C, _D, _P, _F, _S},  # FULLY_CONNECTED reads the 1x1 map: no RESHAPE
    "fc_per_tensor": {_P, _F, _S},
    "softmax_wide": {_F, _S},
    "mean_same_quant": {_C, _M, _F, _S},
    "mean_keepdims_same_quant": {_C, _M, _R, _S},
}


# ---- conversion and cache -------------------------------------------------------------------


def _float_inputs(shape: tuple[int, ...], n: int, seed: int) -> np.ndarray:
    """Float inputs like the calibration data: skewed (not centred on 0), so the input zero
    point is not trivial."""
    rng = np.random.default_rng(seed)
    return rng.normal(0.3, 0.6, (n, *shape)).clip(-1.0, 2.0).astype(np.float32)


def convert(model, per_channel_dense: bool = True, quantize: bool = True) -> bytes:
    """Full-integer post-training quantization: int8 weights, activations, input and output
    (with quantize=False: a plain float32 model)."""
    import tensorflow as tf

    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    if not quantize:
        return conv.convert()
    shape = tuple(model.inputs[0].shape[1:])
    calib = _float_inputs(shape, REP_SAMPLES, seed=1234)

    def representative():
        for x in calib:
            yield [x[None]]

    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = representative
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    # The converter's only switch for per-tensor dense weights (what older converters produced).
    conv._experimental_disable_per_channel_quantization_for_dense_layers = not per_channel_dense
    return conv.convert()


def same_quant_mean(data: bytes) -> bytes:
    """Give each MEAN's output its input's scale and zero point, in the flatbuffer itself: the
    converter never emits that, but other tools do and TFLite runs it on a separate path."""
    import tflite

    buf = bytearray(data)
    sg = tflite.Model.GetRootAsModel(buf, 0).Subgraphs(0)
    model = tflite.Model.GetRootAsModel(buf, 0)
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        code = model.OperatorCodes(op.OpcodeIndex())
        if max(code.BuiltinCode(), code.DeprecatedBuiltinCode()) != tflite.BuiltinOperator.MEAN:
            continue
        src = sg.Tensors(int(op.Inputs(0))).Quantization()
        dst = sg.Tensors(int(op.Outputs(0))).Quantization()
        # The numpy views alias the bytearray, so these assignments patch the model in place.
        dst.ScaleAsNumpy()[:] = src.ScaleAsNumpy()
        dst.ZeroPointAsNumpy()[:] = src.ZeroPointAsNumpy()
    return bytes(buf)


# Rewrites of the converted bytes, for cases the converter does not produce by itself.
POSTPROCESS: dict[str, Callable[[bytes], bytes]] = {
    "mean_same_quant": same_quant_mean,
    "mean_keepdims_same_quant": same_quant_mean,
}


def default_cache_dir() -> Path:
    """build/testmodels/<key>: the key changes with this file or the TensorFlow version, since
    either changes the converted bytes."""
    import tensorflow as tf

    h = hashlib.sha256(Path(__file__).read_bytes() + tf.__version__.encode()).hexdigest()
    return REPO_ROOT / "build" / "testmodels" / h[:16]


def build_tflite(name: str, cache_dir: Path | None = None) -> Path:
    """The converted .tflite of MODELS[name] (or of REFUSED / FLOAT_MODELS), built on first use
    and cached."""
    out_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return made_once(out_dir / f"{name}.tflite", lambda: _convert_model(name))


def _convert_model(name: str) -> bytes:
    if name in FLOAT_MODELS:
        return convert(FLOAT_MODELS[name](), quantize=False)
    builder = MODELS.get(name) or REFUSED[name]
    data = convert(builder(), per_channel_dense=name not in PER_TENSOR_DENSE)
    return POSTPROCESS.get(name, bytes)(data)


def sample_inputs(path: str | Path, n: int, seed: int) -> np.ndarray:
    """n int8 inputs for the model at `path`: calibration-like floats quantized with the model's
    input scale and zero point (saturating at the int8 range, as TFLite's QUANTIZE does)."""
    from tinyprop.frontend.tflite_reader import read_tflite

    tin = read_tflite(path).input
    x = _float_inputs(tuple(tin.shape[1:]), n, seed)
    q = np.round(x / np.float32(tin.s)) + tin.zp
    return np.clip(q, -128, 127).astype(np.int8)
