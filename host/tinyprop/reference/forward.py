"""NumPy reference forward: TFLite's int8 reference kernels, bit for bit, readable.

Each kernel takes int8 arrays for one sample (NHWC with N = 1) and returns int8. Sums use int64
so they are exact; requantization is quant.mbqm, the same fixed-point arithmetic as TFLite.
"""

from __future__ import annotations

import numpy as np

from ..frontend.graph import Graph, Op
from ..frontend.opparams import OpParams, all_op_params
from .quant import mbqm, requantize_double, softmax_int8


def _clamp(acc: np.ndarray, p: OpParams) -> np.ndarray:
    return np.clip(acc, p.act_min, p.act_max).astype(np.int8)


def _padded(x: np.ndarray, geo: dict, value: int) -> np.ndarray:
    """Input padded on H and W (TFLite skips padded taps; with x - zp they contribute 0)."""
    (ph, pw), (kh, kw), (sh, sw), (oh, ow) = geo["pad"], geo["k"], geo["stride"], geo["out_hw"]
    need_h = (oh - 1) * sh + kh
    need_w = (ow - 1) * sw + kw
    h, w = x.shape[1:3]
    return np.pad(
        x,
        ((0, 0), (ph, max(need_h - h - ph, 0)), (pw, max(need_w - w - pw, 0)), (0, 0)),
        constant_values=value,
    )


def patches(x: np.ndarray, geo: dict) -> np.ndarray:
    """im2col view: (OH, OW, KH, KW, C) windows of a padded (1, H, W, C) input."""
    (kh, kw), (sh, sw), (oh, ow) = geo["k"], geo["stride"], geo["out_hw"]
    win = np.lib.stride_tricks.sliding_window_view(x[0], (kh, kw), axis=(0, 1))
    # win: (H', W', C, KH, KW) -> strided output positions, (OH, OW, KH, KW, C)
    return win[: (oh - 1) * sh + 1 : sh, : (ow - 1) * sw + 1 : sw].transpose(0, 1, 3, 4, 2)


def conv2d(x, w, b, p: OpParams) -> np.ndarray:
    xc = _padded(x.astype(np.int64) - p.in_zp, p.geometry, 0)
    cols = patches(xc, p.geometry)  # (OH, OW, KH, KW, Cin)
    oh, ow = p.geometry["out_hw"]
    acc = cols.reshape(oh * ow, -1) @ w.reshape(w.shape[0], -1).astype(np.int64).T
    if b is not None:
        acc = acc + b.astype(np.int64)
    out = mbqm(acc, p.mult, p.shift) + p.out_zp
    return _clamp(out, p).reshape(1, oh, ow, w.shape[0])


def depthwise_conv2d(x, w, b, p: OpParams, depth_multiplier: int) -> np.ndarray:
    xc = _padded(x.astype(np.int64) - p.in_zp, p.geometry, 0)
    cols = patches(xc, p.geometry)  # (OH, OW, KH, KW, Cin)
    cols = np.repeat(cols, depth_multiplier, axis=-1)  # output channel c*M+m reads input c
    acc = np.einsum("hwijc,ijc->hwc", cols, w[0].astype(np.int64))
    if b is not None:
        acc = acc + b.astype(np.int64)
    out = mbqm(acc, p.mult, p.shift) + p.out_zp
    return _clamp(out, p)[None]


def fully_connected(x, w, b, p: OpParams) -> np.ndarray:
    acc = (x.reshape(1, -1).astype(np.int64) - p.in_zp) @ w.astype(np.int64).T
    if b is not None:
        acc = acc + b.astype(np.int64)
    return _clamp(requantize_double(acc, p.real_scale) + p.out_zp, p)


def add(x1, x2, p: OpParams) -> np.ndarray:
    s1 = mbqm((x1.astype(np.int64) - p.in_zp) << p.left_shift, p.mult2[0], p.shift2[0])
    s2 = mbqm((x2.astype(np.int64) - p.in2_zp) << p.left_shift, p.mult2[1], p.shift2[1])
    out = mbqm(s1 + s2, p.mult[0], p.shift[0]) + p.out_zp
    return _clamp(out, p)


def pool_windows(geo: dict, h: int, w: int):
    """(oy, ox, rows, cols) of each pooling window in raster order, clipped to the map."""
    (kh, kw), (sh, sw), (oh, ow), (ph, pw) = geo["k"], geo["stride"], geo["out_hw"], geo["pad"]
    for oy in range(oh):
        y0 = oy * sh - ph
        ys = slice(max(y0, 0), min(y0 + kh, h))
        for ox in range(ow):
            x0 = ox * sw - pw
            yield oy, ox, ys, slice(max(x0, 0), min(x0 + kw, w))


def average_pool(x, p: OpParams) -> np.ndarray:
    oh, ow = p.geometry["out_hw"]
    h, w, c = x.shape[1:]
    out = np.empty((1, oh, ow, c), np.int64)
    for oy, ox, ys, xs in pool_windows(p.geometry, h, w):
        win = x[0, ys, xs].astype(np.int64)
        n = win.shape[0] * win.shape[1]
        s = win.sum(axis=(0, 1))
        # C integer division truncates toward zero; TFLite rounds half away first
        num = np.where(s > 0, s + n // 2, s - n // 2)
        out[0, oy, ox] = np.where(num >= 0, num // n, -((-num) // n))
    return _clamp(out, p)


def max_pool(x, p: OpParams) -> np.ndarray:
    """Each window's largest input (the cells clipped off, padding, are not taps), clamped."""
    oh, ow = p.geometry["out_hw"]
    out = np.empty((1, oh, ow, x.shape[3]), np.int64)
    for oy, ox, ys, xs in pool_windows(p.geometry, *x.shape[1:3]):
        out[0, oy, ox] = x[0, ys, xs].max(axis=(0, 1))
    return _clamp(out, p)


def pool_argmax(x: np.ndarray, geo: dict):
    """(oy, ox, rows, cols) of each window in raster order with, per channel, the input
    position of its largest value: the first in the window's row-major order among equals
    (where a max pool's backward sends dY)."""
    for oy, ox, ys, xs in pool_windows(geo, *x.shape[1:3]):
        win = x[0, ys, xs]
        first = win.reshape(-1, win.shape[2]).argmax(axis=0)  # argmax: the first of equals
        width = xs.stop - xs.start
        yield oy, ox, ys.start + first // width, xs.start + first % width


def mean_hw(x, p: OpParams, out_shape: tuple[int, ...]) -> np.ndarray:
    acc = (x.astype(np.int64) - p.in_zp).sum(axis=(1, 2))  # 1/(H*W) is folded into p.mult
    out = np.clip(mbqm(acc, p.mult[0], p.shift[0]) + p.out_zp, -128, 127)
    return out.astype(np.int8).reshape(out_shape)


def pad(x, pads, value: int) -> np.ndarray:
    return np.pad(x, ((0, 0), pads[0], pads[1], (0, 0)), constant_values=value).astype(np.int8)


def run_op(graph: Graph, op: Op, p: OpParams, values: dict[int, np.ndarray]) -> np.ndarray:
    """One op's int8 output from the values of its inputs (its kind's `forward`, ops.py)."""
    return op.spec.hook("forward")(graph, op, p, values)


# The kinds' forward entries: (graph, op, p, values) -> output. `values` may hold a constant's
# trained copy (the training reference passes them), else the model's constant is read.

def _const(graph: Graph, op: Op, values: dict, pos: int) -> np.ndarray | None:
    if len(op.inputs) <= pos or op.inputs[pos] < 0:
        return None
    return values.get(op.inputs[pos], graph.tensors[op.inputs[pos]].data)


def run_conv2d(graph: Graph, op: Op, p: OpParams, values: dict) -> np.ndarray:
    return conv2d(values[op.inputs[0]], _const(graph, op, values, 1),
                  _const(graph, op, values, 2), p)


def run_depthwise_conv2d(graph: Graph, op: Op, p: OpParams, values: dict) -> np.ndarray:
    return depthwise_conv2d(values[op.inputs[0]], _const(graph, op, values, 1),
                            _const(graph, op, values, 2), p, op.options["depth_multiplier"])


def run_fully_connected(graph: Graph, op: Op, p: OpParams, values: dict) -> np.ndarray:
    return fully_connected(values[op.inputs[0]], _const(graph, op, values, 1),
                           _const(graph, op, values, 2), p).reshape(
        graph.tensors[op.outputs[0]].shape)


def run_add(graph: Graph, op: Op, p: OpParams, values: dict) -> np.ndarray:
    return add(values[op.inputs[0]], values[op.inputs[1]], p)


def run_average_pool(graph: Graph, op: Op, p: OpParams, values: dict) -> np.ndarray:
    return average_pool(values[op.inputs[0]], p)


def run_max_pool(graph: Graph, op: Op, p: OpParams, values: dict) -> np.ndarray:
    return max_pool(values[op.inputs[0]], p)


def run_mean(graph: Graph, op: Op, p: OpParams, values: dict) -> np.ndarray:
    return mean_hw(values[op.inputs[0]], p, graph.tensors[op.outputs[0]].shape)


def run_pad(graph: Graph, op: Op, p: OpParams, values: dict) -> np.ndarray:
    return pad(values[op.inputs[0]], op.options["pads"], p.out_zp)


def run_reshape(graph: Graph, op: Op, p: OpParams, values: dict) -> np.ndarray:
    return values[op.inputs[0]].reshape(graph.tensors[op.outputs[0]].shape)


def run_softmax(graph: Graph, op: Op, p: OpParams, values: dict) -> np.ndarray:
    return softmax_int8(values[op.inputs[0]], int(p.mult[0]), int(p.shift[0]), p.diff_min)


class Forward:
    """Runs a graph sample by sample; keeps every intermediate value for inspection."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.params = all_op_params(graph)

    def run(self, x: np.ndarray, keep: bool = False) -> np.ndarray | dict[int, np.ndarray]:
        g = self.graph
        values = {g.inputs[0]: np.asarray(x, np.int8).reshape(g.input.shape)}
        for op, p in zip(g.ops, self.params, strict=True):
            values[op.outputs[0]] = run_op(g, op, p, values)
        return values if keep else values[g.outputs[0]]

    def run_batch(self, xs: np.ndarray) -> np.ndarray:
        return np.stack([self.run(x)[0] if self.graph.output.shape[0] == 1 else self.run(x)
                         for x in xs])
