"""The NumPy reference's gradients against TensorFlow autodiff (issue #3), layer by layer.

The equivalent float model is built in TensorFlow from the graph IR: real weights w_q * s_w
(per output channel), real biases b_q * s_x * s_w (the TFLite bias scale), and each op's own
geometry (strides, SAME/VALID, pool windows, PAD amounts; TensorFlow works out SAME padding by
itself). Its forward values are pinned to the int8 forward's, the straight-through convention
the reference follows:

- every op output y is used as  y_q + (y - stop_gradient(y)) * mask:  its value is the
  dequantized int8 output y_q of the reference forward (so each layer sees exactly the
  activations the reference saved), and its gradient passes the requantization unchanged;
- mask is 1, except after a fused RELU/RELU6 where it is the int8 output strictly inside the
  clamp (q > act_min, and q < act_max for RELU6): the reference's 1-bit masks;
- the loss is softmax cross-entropy on the dequantized int8 logits.

tf.GradientTape then gives dL/dW and dL/db of every trained layer, which must match
backward.step_gradients with float32 gradient maps with cosine similarity >= 0.99 (measured:
1 - 1e-12 or closer; float32 summation order is the only difference), and with int8 maps (the
default; each map rounded to 7 bits and one exponent, layer after layer) >= COSINE_MIN["int8"].
The comparison is shown able to fail at both thresholds: the same float model with the clamp
masks dropped, or with kxk kernels transposed, falls below them.
"""

from __future__ import annotations

import json

import modelgen
import numpy as np
import pytest
from tinyprop.compile.scheme import from_json, parse_scheme
from tinyprop.compile.train_plan import build_program
from tinyprop.data.datasets import load_split
from tinyprop.frontend.opparams import all_op_params
from tinyprop.frontend.tflite_reader import read_tflite
from tinyprop.reference.backward import step_gradients
from tinyprop.reference.forward import Forward

# the converter's note about the generated models' float calibration; nothing to act on
pytestmark = pytest.mark.filterwarnings("ignore:Statistics for quantized inputs:UserWarning")
COSINE_MIN = {"float32": 0.99, "int8": 0.95}
# VWW: biases of all 28 weighted ops, weights of the 3x3 stem conv, two stride-2 depthwise
# convs, two pointwise convs with a fraction of their channels, and the classifier, so the
# backward runs through every op of the model down to op 0.
VWW_SCHEME = {"bias_last": 28, "weights": [{"op": 0}, {"op": 3}, {"op": 12, "fraction": 0.5},
                                          {"op": 23}, {"op": 26, "fraction": 0.25}]}


def _pad_add_flatten():
    """PAD and ADD between trained layers: conv 3x3 RELU6, asymmetric PAD, conv 3x3 RELU,
    depthwise RELU6 + conv 1x1 residual ADD with a RELU, average pool, PAD, conv 3x3 stride 2,
    RESHAPE, FULLY_CONNECTED."""

    def body(L, x):
        x = L.Conv2D(8, 3, padding="same", activation="relu6")(x)
        a = L.Conv2D(8, 3, activation="relu")(L.ZeroPadding2D(((1, 0), (0, 1)))(x))
        b = L.Conv2D(8, 1)(L.DepthwiseConv2D(3, padding="same", activation="relu6")(a))
        y = L.AveragePooling2D(2)(L.ReLU()(L.Add()([a, b])))
        y = L.Conv2D(6, 3, strides=2)(L.ZeroPadding2D(((0, 1), (1, 0)))(y))
        return L.Dense(3)(L.Flatten()(y))

    return modelgen._functional((12, 12, 3), body, seed=41)


def _pad_add_mean():
    """PAD before a depth-multiplier depthwise conv, ADD of two branches, MEAN, FC."""

    def body(L, x):
        x = L.Conv2D(6, 3, activation="relu")(L.ZeroPadding2D(((2, 1), (1, 1)))(x))
        d = L.DepthwiseConv2D(3, strides=2, padding="same", depth_multiplier=2,
                              activation="relu6")(x)
        p = L.Conv2D(12, 3, padding="valid")(L.ZeroPadding2D(1)(d))
        y = L.Add()([d, p])
        return L.Dense(2)(L.GlobalAveragePooling2D()(L.Conv2D(8, 1, activation="relu6")(y)))

    return modelgen._functional((10, 10, 4), body, seed=42)


MODELGEN = ("mbv2_block", "fc_flatten", "maxpool_cnn")
GENERATED = {"pad_add_flatten": (_pad_add_flatten, {"PAD", "ADD", "RESHAPE", "AVERAGE_POOL_2D"}),
             "pad_add_mean": (_pad_add_mean, {"PAD", "ADD", "MEAN", "DEPTHWISE_CONV_2D"})}


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


@pytest.fixture(scope="module")
def cases(tf, vww_model_path, vww_data_dir, tmp_path_factory):
    """name -> (graph, program, int8 samples): the VWW model on vww-mini photos, and generated
    models (all layers trained) on calibration-like inputs."""
    out = {}
    tmp = tmp_path_factory.mktemp("grad")
    g = read_tflite(vww_model_path)
    spec = tmp / "vww_grad.json"
    spec.write_text(json.dumps(VWW_SCHEME))
    xs, _, _ = load_split(vww_data_dir, "holdout", g.input.s, g.input.zp)
    for fmt in COSINE_MIN:
        out["vww", fmt] = (g, build_program(g, from_json(g, spec), grad=fmt), xs[:2])
    for name, (builder, must_have) in GENERATED.items():
        path = tmp / f"{name}.tflite"
        path.write_bytes(modelgen.convert(builder()))
        g = read_tflite(path)
        assert must_have <= {op.kind for op in g.ops}, f"{name} lost an op in conversion"
        k = len(g.weighted_ops())
        for fmt in COSINE_MIN:
            out[name, fmt] = (g, build_program(g, parse_scheme(g, f"last:{k}"), grad=fmt),
                              modelgen.sample_inputs(path, 3, seed=5))
    # from modelgen's cached set: MobileNetV2 block (ADD, MEAN), Flatten (RESHAPE) -> FC, and
    # a CNN with max pools between its trained layers
    for name in MODELGEN:
        path = modelgen.build_tflite(name)
        g = read_tflite(path)
        k = len(g.weighted_ops())
        for fmt in COSINE_MIN:
            out[name, fmt] = (g, build_program(g, parse_scheme(g, f"last:{k}"), grad=fmt),
                              modelgen.sample_inputs(path, 3, seed=6))
    return out


def _dequantized(graph, values: dict, ti: int) -> np.ndarray:
    t = graph.tensors[ti]
    return ((values[ti].astype(np.int32) - t.zp) * np.float32(t.s)).astype(np.float32)


def _clamp_mask(op, p, q: np.ndarray) -> np.ndarray:
    if op.activation not in ("RELU", "RELU6"):
        return np.ones(q.shape, np.float32)
    keep = q > p.act_min
    if op.activation == "RELU6":
        keep &= q < p.act_max
    return keep.astype(np.float32)


def real_params(graph, op) -> tuple[np.ndarray, np.ndarray]:
    """Real weights (TFLite layout, w_q * s_w per output channel) and biases (b_q * s_x * s_w)."""
    t = graph.tensors
    w = t[op.inputs[1]]
    dw = op.kind == "DEPTHWISE_CONV_2D"
    n_out = w.shape[3] if dw else w.shape[0]
    s_w = np.broadcast_to(w.scale.astype(np.float32), (n_out,))
    w_real = w.data.astype(np.float32) * (s_w if dw else s_w.reshape((n_out,) + (1,) * (
        w.data.ndim - 1)))
    has_bias = len(op.inputs) > 2 and op.inputs[2] >= 0
    b_q = t[op.inputs[2]].data if has_bias else np.zeros(n_out, np.int32)
    return w_real, (b_q * (np.float32(t[op.inputs[0]].s) * s_w)).astype(np.float32)


def tf_gradients(tf, graph, program, x: np.ndarray, label: int,
                 mistake: str | None = None) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """{trained op: (dL/db, dL/dW in the TFLite weight layout)} by tf.GradientTape on the
    equivalent float model. `mistake`: "no_mask" drops the clamp masks, "transposed" swaps the
    kernel's height and width axes in kxk convs (negative controls)."""
    t = graph.tensors
    params = all_op_params(graph)
    values = Forward(graph).run(x, keep=True)
    L = program.logits
    w_var = {k: tf.Variable(real_params(graph, graph.ops[k])[0]) for k in program.scheme.layers}
    b_var = {k: tf.Variable(real_params(graph, graph.ops[k])[1]) for k in program.scheme.layers}

    def weights_bias(op):
        if op.index in w_var:
            return w_var[op.index], b_var[op.index]
        return tuple(tf.constant(a) for a in real_params(graph, op))

    def float_op(op, act):
        xin = act[op.inputs[0]]
        kind, o = op.kind, op.options
        if kind in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
            w, b = weights_bias(op)
            if kind == "FULLY_CONNECTED":
                return tf.reshape(tf.reshape(xin, (1, -1)) @ tf.transpose(w) + b,
                                  t[op.outputs[0]].shape)
            strides = (1, *o["stride"], 1)
            if kind == "CONV_2D":
                if mistake == "transposed" and w.shape[1] == w.shape[2] > 1:
                    w = tf.transpose(w, (0, 2, 1, 3))
                return tf.nn.conv2d(xin, tf.transpose(w, (1, 2, 3, 0)), strides,
                                    o["padding"]) + b
            c = xin.shape[3]
            f = tf.reshape(w[0], (w.shape[1], w.shape[2], c, w.shape[3] // c))
            return tf.nn.depthwise_conv2d(xin, f, strides, o["padding"]) + b
        if kind == "ADD":
            return xin + act[op.inputs[1]]
        if kind == "AVERAGE_POOL_2D":
            return tf.nn.avg_pool2d(xin, o["filter"], o["stride"], o["padding"])
        if kind == "MAX_POOL_2D":  # its gradient goes to the first of equals, as ours
            return tf.nn.max_pool2d(xin, o["filter"], o["stride"], o["padding"])
        if kind == "MEAN":
            return tf.reshape(tf.reduce_mean(xin, axis=(1, 2)), t[op.outputs[0]].shape)
        if kind == "PAD":
            return tf.pad(xin, ((0, 0), o["pads"][0], o["pads"][1], (0, 0)))
        if kind == "RESHAPE":
            return tf.reshape(xin, t[op.outputs[0]].shape)
        raise AssertionError(kind)

    with tf.GradientTape() as tape:
        act = {graph.inputs[0]: tf.constant(_dequantized(graph, values, graph.inputs[0]))}
        for op, p in zip(graph.ops[: L + 1], params, strict=False):
            ti = op.outputs[0]
            y = float_op(op, act)
            mask = (np.ones(t[ti].shape, np.float32) if mistake == "no_mask"
                    else _clamp_mask(op, p, values[ti]))
            act[ti] = _dequantized(graph, values, ti) + (y - tf.stop_gradient(y)) * mask
        z = tf.reshape(act[graph.ops[L].outputs[0]], (1, -1))
        loss = tf.nn.sparse_softmax_cross_entropy_with_logits([label], z)
    keys = sorted(w_var)
    grads = tape.gradient(loss, [b_var[k] for k in keys] + [w_var[k] for k in keys],
                          unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return {k: (grads[i].numpy(), grads[len(keys) + i].numpy()) for i, k in enumerate(keys)}


def as_rows(op, dw: np.ndarray, channels: list[int]) -> np.ndarray:
    """A TFLite-layout weight gradient as the reference's rows of the selected channels."""
    if op.kind == "DEPTHWISE_CONV_2D":  # (1, KH, KW, C*M): a channel's row is its taps
        return dw[0].reshape(-1, dw.shape[3]).T[channels]
    return dw.reshape(dw.shape[0], -1)[channels]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0  # a layer whose clamps block every path: both zero
    return float(a @ b / (na * nb))


def layer_cosines(tf, graph, program, xs, mistake: str | None = None) -> dict[str, float]:
    """Min over samples of the cosine of each trained layer's bias and weight gradients, keyed
    "op<k>.b" / "op<k>.w". The label is the class the model ranks lowest, so the loss is large."""
    out: dict[str, float] = {}
    for x in xs:
        label = int(np.argmin(Forward(graph).run(x, keep=True)[graph.ops[program.logits]
                                                               .outputs[0]]))
        ref = step_gradients(program, x, label)
        ours = tf_gradients(tf, graph, program, x, label, mistake)
        assert set(ref) == set(program.scheme.layers) == set(ours)
        for k, lu in program.scheme.layers.items():
            db, dw = ref[k]
            tdb, tdw = ours[k]
            assert (db is not None) == lu.bias and (dw is not None) == lu.weights, k
            if lu.bias:
                out[f"op{k}.b"] = min(out.get(f"op{k}.b", 1.0), cosine(db, tdb))
            if lu.weights:
                rows = as_rows(graph.ops[k], tdw, program.ops[k].channels)
                out[f"op{k}.w"] = min(out.get(f"op{k}.w", 1.0), cosine(dw, rows))
    return out


@pytest.mark.parametrize("fmt", list(COSINE_MIN))
@pytest.mark.parametrize("name", ["vww", *GENERATED, *MODELGEN])
def test_reference_gradients_match_tensorflow_autodiff(name, fmt, cases, tf):
    graph, program, xs = cases[name, fmt]
    cos = layer_cosines(tf, graph, program, xs)
    worst = min(cos, key=cos.get)
    print(f"{name} {fmt}: {len(cos)} gradients, min cosine 1 - {1 - cos[worst]:.1e} ({worst})")
    assert cos[worst] >= COSINE_MIN[fmt], cos
    # the scheme really updates weights of every weighted kind the model has
    kinds = {graph.ops[k].kind for k, lu in program.scheme.layers.items() if lu.weights}
    assert kinds == {op.kind for op in graph.weighted_ops()}


@pytest.mark.parametrize("fmt", list(COSINE_MIN))
@pytest.mark.parametrize("mistake", ["no_mask", "transposed"])
@pytest.mark.parametrize("name", list(GENERATED))
def test_a_wrong_gradient_falls_below_the_threshold(name, mistake, fmt, cases, tf):
    graph, program, xs = cases[name, fmt]
    cos = layer_cosines(tf, graph, program, xs, mistake)
    worst = min(cos, key=cos.get)
    print(f"{name} {mistake} {fmt}: min cosine {cos[worst]:.3f} ({worst})")
    assert cos[worst] < COSINE_MIN[fmt], cos
