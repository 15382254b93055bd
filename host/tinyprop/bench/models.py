"""The models of the TTE comparison, at 128x128x3, 10 classes: built with Keras, full-integer
int8 through the real TFLite converter, cached.

- `mbv2-w0.35`: TTE's MobileNetV2-w0.35 (mit-han-lab/tiny-training, `mbv2-w0.35`): stem 3x3/2
  3->16, inverted residual blocks of widths 8, 8x2, 16x3, 24x4, 32x3, 56x3, 112 (expansion 6,
  block 0 expansion 1, residual only where stride 1, expansion > 1 and widths match), no
  112->1280 convolution: the classifier reads the 112 pooled channels.
- `keras-mbv2-w0.35`: Keras' MobileNetV2(alpha=0.35), with its 1280-channel head.
- `proxyless-w0.3`: a ProxylessNAS-Mobile-like network at width 0.3: 3x3, 5x5 and 7x7
  depthwise, expansions 3 and 6.
- `mcunet`: an MCUNet-like network: 3x3, 5x5 and 7x7 depthwise, expansions 1, 3, 4, 5 and 6.

Weights are random but look trained (per-channel magnitudes that differ, BatchNorm statistics
away from identity), calibrated on 16 random images: memory does not depend on the values, and
training needs only a sane model. A conversion is not bit-identical from one run to the next,
so nothing computed from one is committed; `build_model` converts once and caches under
build/tte/<hash of this file and the TensorFlow version>/.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from ..extras import require
from ..paths import BUILD_ROOT, made_once

SIZE = 128
CLASSES = 10
CALIB_IMAGES = 16

# (expansion, output channels, depthwise kernel, stride) per block, widths already scaled
MBV2_W035 = [(1, 8, 3, 1), (6, 8, 3, 2), (6, 8, 3, 1), (6, 16, 3, 2), (6, 16, 3, 1),
             (6, 16, 3, 1), (6, 24, 3, 2), (6, 24, 3, 1), (6, 24, 3, 1), (6, 24, 3, 1),
             (6, 32, 3, 1), (6, 32, 3, 1), (6, 32, 3, 1), (6, 56, 3, 2), (6, 56, 3, 1),
             (6, 56, 3, 1), (6, 112, 3, 1)]
PROXYLESS_W03 = [(1, 8, 3, 1), (3, 8, 5, 2), (3, 8, 3, 1), (3, 16, 7, 2), (3, 16, 3, 1),
                 (3, 16, 5, 1), (3, 16, 5, 1), (6, 24, 7, 2), (3, 24, 5, 1), (3, 24, 5, 1),
                 (3, 24, 5, 1), (6, 32, 5, 1), (3, 32, 5, 1), (3, 32, 5, 1), (3, 32, 5, 1),
                 (6, 56, 7, 2), (6, 56, 7, 1), (3, 56, 7, 1), (3, 56, 7, 1), (6, 96, 7, 1)]
MCUNET = [(1, 8, 3, 1), (3, 16, 7, 2), (3, 16, 3, 1), (6, 24, 5, 2), (4, 24, 5, 1),
          (5, 24, 3, 1), (5, 40, 7, 2), (4, 40, 5, 1), (4, 40, 3, 1), (5, 48, 5, 1),
          (4, 48, 3, 1), (6, 96, 7, 2), (5, 96, 5, 1), (4, 96, 3, 1), (6, 160, 7, 1)]
BLOCKS = {"mbv2-w0.35": MBV2_W035, "proxyless-w0.3": PROXYLESS_W03, "mcunet": MCUNET}
MODELS = ("mbv2-w0.35", "keras-mbv2-w0.35", "proxyless-w0.3", "mcunet")
STEM = 16


def _realistic(model, seed: int):
    """Weights that look trained: per-output-channel gains (per-channel scales differ), biases,
    BatchNorm statistics away from identity (tests/modelgen.py does the same)."""
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        ws = layer.get_weights()
        if not ws:
            continue
        if type(layer).__name__ == "BatchNormalization":
            c = ws[0].shape[0]
            new = (rng.uniform(0.5, 1.5, c), rng.normal(0.0, 0.3, c), rng.normal(0.0, 0.5, c),
                   rng.uniform(0.3, 2.0, c))
            layer.set_weights([a.astype(np.float32) for a in new])
            continue
        out = [ws[0] * rng.uniform(0.3, 2.0, ws[0].shape[-1]).astype(np.float32)]
        out += [rng.normal(0.0, 0.2, w.shape).astype(np.float32) for w in ws[1:]]
        layer.set_weights(out)
    return model


def inverted_residual_net(blocks: list[tuple[int, int, int, int]], seed: int = 0):
    """Stem 3x3/2 to STEM channels, then MBConv blocks (1x1 expansion, k x k depthwise, 1x1
    linear projection; a residual ADD where stride 1, expansion > 1 and widths match, as
    TTE's networks), global average pooling, the classifier. TFLite's SAME padding."""
    keras = require("keras", "the TTE models")

    L = keras.layers
    keras.utils.set_random_seed(seed)
    x = inp = keras.Input((SIZE, SIZE, 3), batch_size=1)

    def bn_act(y, act=True):
        y = L.BatchNormalization()(y)
        return L.ReLU(6.0)(y) if act else y

    x = bn_act(L.Conv2D(STEM, 3, strides=2, padding="same", use_bias=False)(x))
    cin = STEM
    for t, c, k, s in blocks:
        y = x
        if t != 1:
            y = bn_act(L.Conv2D(cin * t, 1, use_bias=False)(y))
        y = bn_act(L.DepthwiseConv2D(k, strides=s, padding="same", use_bias=False)(y))
        y = bn_act(L.Conv2D(c, 1, use_bias=False)(y), act=False)
        x = L.Add()([x, y]) if s == 1 and t > 1 and cin == c else y
        cin = c
    x = L.Dense(CLASSES)(L.GlobalAveragePooling2D()(x))
    return _realistic(keras.Model(inp, L.Softmax()(x)), seed)


def keras_mbv2():
    """Keras' MobileNetV2(alpha=0.35), its 1280-channel head included, random weights."""
    keras = require("keras", "Keras' MobileNetV2")

    keras.utils.set_random_seed(0)
    return keras.applications.MobileNetV2(input_shape=(SIZE, SIZE, 3), alpha=0.35,
                                          weights=None, classes=CLASSES)


def keras_model(name: str):
    if name == "keras-mbv2-w0.35":
        return keras_mbv2()
    if name not in BLOCKS:
        raise ValueError(f"unknown model {name}; one of {', '.join(MODELS)}")
    return inverted_residual_net(BLOCKS[name])


def convert(model) -> bytes:
    """Full-integer post-training quantization: int8 weights, activations, input and output."""
    tf = require("tensorflow", "converting the TTE models")

    from ..frontend.quantize import full_int8

    rng = np.random.default_rng(0)

    def representative():
        for _ in range(CALIB_IMAGES):
            yield [rng.uniform(-1, 1, (1, SIZE, SIZE, 3)).astype(np.float32)]

    return full_int8(tf.lite.TFLiteConverter.from_keras_model(model), representative)


def cache_dir() -> Path:
    tf = require("tensorflow", "the TTE models' cache")

    h = hashlib.sha256(Path(__file__).read_bytes() + tf.__version__.encode()).hexdigest()
    return BUILD_ROOT / "tte" / h[:16]


def build_model(name: str, directory: Path | None = None) -> Path:
    """The int8 .tflite of model `name`, converted on first use (about a minute) and cached."""
    path = Path(directory or cache_dir()) / f"{name}.tflite"
    return made_once(path, lambda: convert(keras_model(name)))
