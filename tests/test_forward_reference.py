"""The NumPy reference forward equals the TFLite interpreter's reference kernels (BUILTIN_REF), bit
for bit, on every intermediate tensor: on each generated model of tests/modelgen.py and on the
real MLPerf VWW model over every image of vww-mini."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import modelgen
import numpy as np
import pytest
from tinyprop.data.datasets import load_split
from tinyprop.frontend.graph import Graph
from tinyprop.frontend.opparams import all_op_params
from tinyprop.frontend.tflite_reader import read_tflite
from tinyprop.reference.forward import Forward

tf = pytest.importorskip("tensorflow")

INPUTS_PER_MODEL = 6
# TF 2.21 warns that tf.lite.Interpreter moves to ai_edge_litert; it is still the reference here.
pytestmark = pytest.mark.filterwarnings("ignore:.*tf.lite.Interpreter is deprecated")


@pytest.fixture(scope="session")
def model_paths() -> dict[str, Path]:
    """Every generated model, converted once per modelgen.py version (see modelgen.build_tflite)."""
    return {name: modelgen.build_tflite(name) for name in modelgen.MODELS}


class RefInterpreter:
    """TFLite's reference kernels with every intermediate tensor kept after invoke."""

    def __init__(self, path: Path):
        self.interp = tf.lite.Interpreter(
            model_path=str(path),
            experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_REF,
            experimental_preserve_all_tensors=True,
        )
        self.interp.allocate_tensors()
        self.input_index = self.interp.get_input_details()[0]["index"]

    def run(self, x: np.ndarray, tensor_indices: list[int]) -> dict[int, np.ndarray]:
        self.interp.set_tensor(self.input_index, x)
        self.interp.invoke()
        return {i: self.interp.get_tensor(i) for i in tensor_indices}


def assert_same_everywhere(graph: Graph, fwd: Forward, interp: RefInterpreter, x: np.ndarray,
                           what: str) -> None:
    """Every op's output, in execution order; the first mismatch names the op."""
    outs = [op.outputs[0] for op in graph.ops]
    ours = fwd.run(x, keep=True)
    theirs = interp.run(x.reshape(graph.input.shape), outs)
    for op in graph.ops:
        t = op.outputs[0]
        a, b = ours[t], theirs[t]
        assert a.shape == b.shape and a.dtype == b.dtype, (
            what, op.index, op.kind, a.shape, b.shape)
        if not np.array_equal(a, b):
            diff = np.abs(a.astype(int) - b.astype(int))
            raise AssertionError(
                f"{what}: op #{op.index} {op.kind} {op.options}: {int((diff > 0).sum())} of "
                f"{diff.size} values differ (max {int(diff.max())})"
            )


@pytest.mark.parametrize("name", sorted(modelgen.MODELS))
def test_reference_equals_tflite_on_generated_model(name, model_paths):
    path = model_paths[name]
    graph = read_tflite(path)
    fwd, interp = Forward(graph), RefInterpreter(path)
    xs = list(modelgen.sample_inputs(path, INPUTS_PER_MODEL, seed=7))
    # Plus the int8 extremes: saturation and the zero-point edges.
    rng = np.random.default_rng(11)
    shape = graph.input.shape[1:]
    xs += [rng.integers(-128, 128, shape, dtype=np.int8), np.full(shape, -128, np.int8),
           np.full(shape, 127, np.int8)]
    for k, x in enumerate(xs):
        assert_same_everywhere(graph, fwd, interp, x, f"{name} input {k}")


@pytest.mark.parametrize("name", sorted(modelgen.MODELS))
def test_generated_model_holds_intended_ops(name, model_paths):
    kinds = {op.kind for op in read_tflite(model_paths[name]).ops}
    assert kinds == modelgen.EXPECTED_OPS[name]


def _features(graph: Graph) -> set[str]:
    """What each op of a graph exercises, as readable labels."""
    t = graph.tensors
    out: set[str] = set()
    for op, p in zip(graph.ops, all_op_params(graph), strict=True):
        k, o = op.kind, op.options
        if "activation" in o:
            out.add(f"{k} fused {o['activation']}")
        if k in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            kh, kw = t[op.inputs[1]].shape[1:3]
            out |= {f"{k} {kh}x{kw}", f"{k} stride {o['stride'][0]}x{o['stride'][1]}",
                    f"{k} {o['padding']}"}
            if kh != kw:
                out.add(f"{k} non-square kernel")
            h, w = t[op.inputs[0]].shape[1:3]
            if h % 2 and w % 2:
                out.add(f"{k} odd input")
            if k == "DEPTHWISE_CONV_2D":
                out.add(f"{k} multiplier {o['depth_multiplier']}")
                if o["stride"] == (2, 2) and o["padding"] == "SAME":
                    out.add(f"{k} stride 2 SAME")
        elif k == "FULLY_CONNECTED":
            prev = graph.producer(op.inputs[0])
            out.add(f"{k} after {prev.kind if prev else 'input'}")
            out.add(f"{k} per-{'channel' if t[op.inputs[1]].scale.size > 1 else 'tensor'} weights")
        elif k == "ADD":
            a, b = (t[i] for i in op.inputs)
            if a.s != b.s:
                out.add(f"{k} different input scales")
        elif k in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
            (kh, kw), (oh, ow) = o["filter"], p.geometry["out_hw"]
            h, w = t[op.inputs[0]].shape[1:3]
            sh, sw = o["stride"]
            covered = ((oh - 1) * sh + kh, (ow - 1) * sw + kw)
            if covered != (h, w):
                out.add(f"{k} {o['padding']} window not dividing the map")
        elif k == "MEAN":
            a, b = t[op.inputs[0]], t[op.outputs[0]]
            same = a.s == b.s and a.zp == b.zp
            out.add(f"{k} keep_dims={o['keep_dims']} {'same' if same else 'new'} quantization")
        elif k == "PAD":
            (t0, b0), (l0, r0) = o["pads"]
            if t0 != b0 or l0 != r0:
                out.add(f"{k} asymmetric")
        else:
            out.add(k)
    return out


REQUIRED_FEATURES = {
    "CONV_2D 1x1", "CONV_2D 3x3", "CONV_2D 5x5", "CONV_2D non-square kernel",
    "CONV_2D stride 1x1", "CONV_2D stride 2x2", "CONV_2D stride 1x2", "CONV_2D stride 2x1",
    "CONV_2D SAME", "CONV_2D VALID", "CONV_2D odd input",
    "CONV_2D fused NONE", "CONV_2D fused RELU", "CONV_2D fused RELU6",
    "DEPTHWISE_CONV_2D multiplier 1", "DEPTHWISE_CONV_2D multiplier 2",
    "DEPTHWISE_CONV_2D stride 2 SAME", "DEPTHWISE_CONV_2D VALID", "DEPTHWISE_CONV_2D 5x5",
    "DEPTHWISE_CONV_2D non-square kernel", "DEPTHWISE_CONV_2D odd input",
    "DEPTHWISE_CONV_2D fused NONE", "DEPTHWISE_CONV_2D fused RELU",
    "DEPTHWISE_CONV_2D fused RELU6",
    "FULLY_CONNECTED after RESHAPE", "FULLY_CONNECTED after MEAN", "FULLY_CONNECTED after input",
    "FULLY_CONNECTED after FULLY_CONNECTED", "FULLY_CONNECTED per-channel weights",
    "FULLY_CONNECTED per-tensor weights",
    "FULLY_CONNECTED fused NONE", "FULLY_CONNECTED fused RELU", "FULLY_CONNECTED fused RELU6",
    "ADD different input scales", "ADD fused NONE", "ADD fused RELU",
    "AVERAGE_POOL_2D SAME window not dividing the map",
    "AVERAGE_POOL_2D VALID window not dividing the map",
    "MAX_POOL_2D SAME window not dividing the map", "MAX_POOL_2D VALID window not dividing the map",
    "MAX_POOL_2D fused NONE", "MAX_POOL_2D fused RELU", "MAX_POOL_2D fused RELU6",
    "MEAN keep_dims=True new quantization", "MEAN keep_dims=False new quantization",
    "MEAN keep_dims=True same quantization", "MEAN keep_dims=False same quantization",
    "PAD asymmetric", "RESHAPE", "SOFTMAX",
}


def test_op_coverage(model_paths):
    """Every op and option tinyprop supports is exercised by some generated model."""
    by_feature: dict[str, list[str]] = {}
    for name, path in model_paths.items():
        for f in _features(read_tflite(path)):
            by_feature.setdefault(f, []).append(name)
    table = "\n".join(f"{f:52s} {', '.join(sorted(ms))}" for f, ms in sorted(by_feature.items()))
    print("\nop coverage of the generated models:\n" + table)
    missing = REQUIRED_FEATURES - set(by_feature)
    assert not missing, f"not covered: {sorted(missing)}\n{table}"


@pytest.mark.slow  # all 397 images
def test_vww_reference_equals_tflite_on_every_image(vww_model_path, vww_data_dir):
    graph = read_tflite(vww_model_path)
    kinds = Counter(op.kind for op in graph.ops)
    assert kinds == {"CONV_2D": 14, "DEPTHWISE_CONV_2D": 13, "AVERAGE_POOL_2D": 1, "RESHAPE": 1,
                     "FULLY_CONNECTED": 1, "SOFTMAX": 1}
    xs, _labels, names = load_split(vww_data_dir, "all", graph.input.s, graph.input.zp)
    assert len(xs) == 397
    fwd, interp = Forward(graph), RefInterpreter(vww_model_path)
    for x, name in zip(xs, names, strict=True):
        assert_same_everywhere(graph, fwd, interp, x, f"vww {name}")
