"""The same work as MIT's Tiny Training Engine (TTE, NeurIPS'22), measured with tinyprop.

TTE's "99 KB" sparse-update scheme for MobileNetV2-w0.35 at 128x128: biases of the last 25
convolutions; weights of convolutions 27, 30, 33, 36, 39 fully, 42 at 1/8, 45 at 1/2 and 48
fully, counting convolutions (CONV_2D and DEPTHWISE_CONV_2D) from the input, 0-based. They
measured 141 KB peak memory for it. Here the model is Keras' MobileNetV2(alpha=0.35, 128x128x3,
10 classes, random weights: memory does not depend on the values), int8 with full-integer
quantization, and the scheme is planned by tinyprop's own planner.

Counting: the graph has 52 convolutions (0..51); the final dense layer does not count (TTE counts
conv modules; its classifier is a linear layer). tinyprop always trains the classifier, bias and
weights, as TTE does, so it is added on top of the listed layers. Convolutions 27..48 in steps of
3 are the 1x1 expansion convs of blocks 9..16, the only weight gradients TTE's kernels compute.

    python -m tinyprop.bench.tte [--model build/tte/....tflite]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from ..compile.scheme import LayerUpdate, SparseScheme, pick_channels, with_classifier
from ..extras import require
from ..frontend.graph import Graph
from ..paths import BUILD_ROOT

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


def default_model_path() -> Path:
    tf = require("tensorflow", "the TTE comparison")

    return BUILD_ROOT / "tte" / f"mbv2_w035_128_c10_int8_tf{tf.__version__}.tflite"


def build_mbv2_tflite(path: Path) -> Path:
    """Keras MobileNetV2(alpha=0.35, 128x128x3, 10 classes, random weights) as an int8 .tflite
    (full-integer quantization, int8 input and output, 32 random calibration images). Reuses the
    file when it exists: the conversion takes about a minute."""
    path = Path(path)
    if path.exists():
        return path
    tf = require("tensorflow", "the TTE comparison")

    tf.keras.utils.set_random_seed(0)
    model = tf.keras.applications.MobileNetV2(input_shape=(128, 128, 3), alpha=0.35,
                                              weights=None, classes=10)
    rng = np.random.default_rng(0)

    def representative():
        for _ in range(32):
            yield [rng.uniform(-1, 1, (1, 128, 128, 3)).astype(np.float32)]

    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = representative
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    raw = conv.convert()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(raw)
    tmp.replace(path)  # atomic: a concurrent reader never sees half a model
    return path


def measure(model: Path) -> dict:
    """Memory figures of TTE's scheme on `model` under tinyprop's planner."""
    from ..compile.memory import plan_inference
    from ..compile.train_plan import build_program
    from ..frontend.tflite_reader import read_tflite

    graph = read_tflite(model)
    prog = build_program(graph, tte_scheme(graph))
    total = prog.arena_bytes + prog.params_bytes
    return {"model": str(model), "scheme": prog.scheme.describe(),
            "inference_arena": plan_inference(graph)[1], "arena_peak": prog.arena_bytes,
            "trainable_bytes": prog.params_bytes, "total": total,
            "tte_peak_bytes": TTE_PEAK_KB * 1024}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tinyprop.bench.tte",
                                description=__doc__.split("\n")[0])
    p.add_argument("--model", type=Path, help="the int8 .tflite (default: build it, cached)")
    p.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = p.parse_args(argv)
    fig = measure(build_mbv2_tflite(args.model or default_model_path()))
    print(f"MobileNetV2-w0.35 128x128 int8, TTE's 99 KB scheme: {fig['scheme']}")
    print(f"  inference arena {fig['inference_arena']:,} B")
    print(f"  training arena_peak {fig['arena_peak']:,} B + trainable {fig['trainable_bytes']:,} B"
          f" = {fig['total']:,} B ({fig['total'] / 1024:.1f} KB) vs TTE's {TTE_PEAK_KB} KB")
    if args.json:
        args.json.write_text(json.dumps(fig, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
