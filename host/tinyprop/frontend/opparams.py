"""Per-op integer parameters computed once on the host (TFLite's Prepare step).

The reference engine and the blob packer both read these, so the firmware runs with exactly the
multipliers and shifts the reference used.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..reference.quant import activation_range, quantize_multiplier, softmax_params
from .graph import Graph, Op


def same_padding(in_size: int, filt: int, stride: int) -> tuple[int, int]:
    """TFLite ComputePaddingHeightWidth for SAME: (out_size, pad_before)."""
    out = (in_size + stride - 1) // stride
    total = max((out - 1) * stride + filt - in_size, 0)
    return out, total // 2


def conv_geometry(op: Op, in_hw: tuple[int, int], k_hw: tuple[int, int]) -> dict:
    sh, sw = op.options["stride"]
    if op.options["padding"] == "SAME":
        oh, ph = same_padding(in_hw[0], k_hw[0], sh)
        ow, pw = same_padding(in_hw[1], k_hw[1], sw)
    else:
        oh = (in_hw[0] - k_hw[0] + sh) // sh
        ow = (in_hw[1] - k_hw[1] + sw) // sw
        ph = pw = 0
    return {"stride": (sh, sw), "pad": (ph, pw), "out_hw": (oh, ow), "k": k_hw}


@dataclass
class OpParams:
    """Integer parameters of one op; fields unused by an op stay at their defaults."""

    in_zp: int = 0
    in2_zp: int = 0
    out_zp: int = 0
    act_min: int = -128
    act_max: int = 127
    mult: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    shift: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    # ADD: input multipliers and the left shift; MEAN: which TFLite path (2); SOFTMAX: diff_min
    mult2: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    shift2: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    left_shift: int = 0
    mode: int = 0
    diff_min: int = 0
    geometry: dict = field(default_factory=dict)
    float_scale: float = 0.0  # unused since MEAN went integer; kept in the op record layout
    real_scale: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))  # FC, double


def op_params(graph: Graph, op: Op) -> OpParams:
    t = graph.tensors
    ti, to = t[op.inputs[0]], t[op.outputs[0]]
    p = OpParams(in_zp=ti.zp, out_zp=to.zp)
    p.act_min, p.act_max = activation_range(op.activation, to.s, to.zp)
    prepare = op.spec.hook("params")
    if prepare is not None:
        prepare(graph, op, p)
    return p


def _channel_multipliers(graph: Graph, op: Op, p: OpParams) -> np.ndarray:
    """A weighted op's per-channel requantization (mult, shift into p); returns the weight
    scale of each output channel."""
    t = graph.tensors
    ti, w, to = t[op.inputs[0]], t[op.inputs[1]], t[op.outputs[0]]
    n_out = w.shape[-1] if op.spec.channels_last else w.shape[0]
    wscale = np.broadcast_to(w.scale.astype(np.float64), (n_out,))
    pairs = [quantize_multiplier(float(ti.s) * float(s) / float(to.s)) for s in wscale]
    p.mult = np.array([m for m, _ in pairs], np.int64)
    p.shift = np.array([s for _, s in pairs], np.int64)
    return wscale


def conv_params(graph: Graph, op: Op, p: OpParams) -> None:
    _channel_multipliers(graph, op, p)
    p.geometry = conv_geometry(op, graph.tensors[op.inputs[0]].shape[1:3],
                               graph.tensors[op.inputs[1]].shape[1:3])


def fc_params(graph: Graph, op: Op, p: OpParams) -> None:
    wscale = _channel_multipliers(graph, op, p)
    ti, to = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    # TFLite's reference FULLY_CONNECTED requantizes in double, not with mult/shift.
    p.real_scale = np.float64(ti.s) * wscale / np.float64(to.s)


def add_params(graph: Graph, op: Op, p: OpParams) -> None:
    ti, t2, to = (graph.tensors[i] for i in (*op.inputs[:2], op.outputs[0]))
    p.in2_zp = t2.zp
    p.left_shift = 20
    twice_max = 2 * max(float(ti.s), float(t2.s))
    m1, s1 = quantize_multiplier(float(ti.s) / twice_max)
    m2, s2 = quantize_multiplier(float(t2.s) / twice_max)
    mo, so = quantize_multiplier(twice_max / ((1 << p.left_shift) * float(to.s)))
    p.mult = np.array([mo], np.int64)
    p.shift = np.array([so], np.int64)
    p.mult2 = np.array([m1, m2], np.int64)
    p.shift2 = np.array([s1, s2], np.int64)


def pool_params(graph: Graph, op: Op, p: OpParams) -> None:
    p.geometry = conv_geometry(op, graph.tensors[op.inputs[0]].shape[1:3], op.options["filter"])


def mean_params(graph: Graph, op: Op, p: OpParams) -> None:
    # TFLite (2.21, measured: keep_dims or not, same quantization or not) runs one integer
    # path, reference_ops::QuantizedMeanOrSum: 1/n folded into the in/out multiplier with
    # its clamps on the extra shift, then out = mbqm(sum - zp_in * n) + zp_out. Older
    # releases had three paths; mode 2 names this one in the blob.
    ti, to = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    p.mode = 2
    n = ti.shape[1] * ti.shape[2]
    m, s = quantize_multiplier(float(ti.s) / float(to.s))
    extra = min(n.bit_length() - 1, 32, 31 + s)
    p.mult = np.array([(m << extra) // n], np.int64)
    p.shift = np.array([s - extra], np.int64)


def softmax_op_params(graph: Graph, op: Op, p: OpParams) -> None:
    m, s, dmin = softmax_params(op.options["beta"], float(graph.tensors[op.inputs[0]].s))
    p.mult = np.array([m], np.int64)
    p.shift = np.array([s], np.int64)
    p.diff_min = dmin


def all_op_params(graph: Graph) -> list[OpParams]:
    return [op_params(graph, op) for op in graph.ops]
