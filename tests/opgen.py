"""Small int8 graphs built directly in the graph IR (no TensorFlow): one op under test with random
shapes, strides, paddings, zero points, depth multipliers and per-channel scales, for op-level
kernel tests. `forward_case` gives a single-op graph (plus a 1x1 convolution where the op needs a
second activation); `training_case` a three-to-four-op graph whose backward pass runs the
op's gradient kernels (input and, for weighted ops, weight and bias gradients).

The arithmetic the graphs exercise is the reference's (tinyprop's NumPy reference is checked
against TFLite on real converted models elsewhere); here the point is coverage of the kernels'
parameter space, with a seed in every case's name so a failure is reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tinyprop.compile.scheme import LayerUpdate, SparseScheme
from tinyprop.frontend.graph import Graph, Op, Tensor
from tinyprop.frontend.opparams import conv_geometry

FORWARD_KINDS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "AVERAGE_POOL_2D",
                 "MEAN", "PAD", "SOFTMAX", "MAX_POOL_2D")
GRADIENT_KINDS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "AVERAGE_POOL_2D",
                  "MEAN", "PAD", "MAX_POOL_2D")


@dataclass
class Case:
    name: str  # kind, seed and the drawn parameters: what a failure message shows
    graph: Graph
    scheme: SparseScheme | None = None  # training cases


class _Builder:
    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.tensors: list[Tensor] = []
        self.ops: list[Op] = []

    def _add(self, name, shape, dtype, scale, zp, data=None, quant_dim=0) -> int:
        i = len(self.tensors)
        self.tensors.append(Tensor(i, name, tuple(int(d) for d in shape), dtype,
                                   np.atleast_1d(np.asarray(scale, np.float32)),
                                   np.atleast_1d(np.asarray(zp, np.int64)), quant_dim, data))
        return i

    def act(self, name: str, shape, scale: float | None = None, zp: int | None = None) -> int:
        r = self.rng
        scale = float(np.float32(r.uniform(0.004, 0.08))) if scale is None else scale
        zp = int(r.integers(-128, 128)) if zp is None else zp
        return self._add(name, shape, "int8", scale, zp)

    def const_int32(self, name: str, values) -> int:
        arr = np.asarray(values, np.int32)
        return self._add(name, arr.shape, "int32", 0.0, 0, arr)

    def weights(self, name: str, shape, channel_dim: int, per_channel: bool = True) -> int:
        r = self.rng
        n = shape[channel_dim] if per_channel else 1
        # two decades of channel scales: requantization shifts of both signs. The power in
        # float64, rounded once: numpy's float32 power has CPU-specific SIMD paths (AVX-512 or
        # not) that differ in the last bit, and these bytes must be the same on every machine.
        scales = (10.0 ** r.uniform(-3.3, -1.3, n)).astype(np.float32)
        data = r.integers(-127, 128, shape).astype(np.int8)
        return self._add(name, shape, "int8", scales, np.zeros(n, np.int64), data, channel_dim)

    def bias(self, name: str, n: int, s_in: float, w: int) -> int:
        scale = (np.float32(s_in) * self.tensors[w].scale).astype(np.float32)
        data = self.rng.integers(-3000, 3000, n).astype(np.int32)
        return self._add(name, (n,), "int32", np.broadcast_to(scale, (n,)), np.zeros(n), data)

    def op(self, kind: str, inputs: list[int], output: int, **options) -> int:
        self.ops.append(Op(len(self.ops), kind, inputs, [output], options))
        return len(self.ops) - 1

    def out_scale(self, s_in: float, w: int, taps: int) -> float:
        # about where a trained layer's output range lands; some channels' real scale s_in *
        # s_w / s_out then exceeds 1 (a positive shift), others fall far below
        s_w = float(np.median(self.tensors[w].scale))
        return float(np.float32(s_in * s_w * np.sqrt(taps) * 10.0 ** self.rng.uniform(-0.6, 1.8)))

    def calibrate(self, y: int, taps: int, zp: int) -> None:
        """Give y, the output of the last weighted op (taps weights a value), the scale a
        calibration on int8 inputs over the whole range sets: about 40 LSB of standard
        deviation (an input's 74 times a weight's 73, over sqrt(taps) taps), and zero point zp."""
        op = self.ops[-1]
        s_in = float(self.tensors[op.inputs[0]].s)
        s_w = float(np.median(self.tensors[op.inputs[1]].scale))
        t = self.tensors[y]
        t.scale[:] = np.float32(s_in * s_w * np.sqrt(taps) * 74.0 * 73.0 / 40.0)
        t.zero_point[:] = zp

    # -- weighted ops --
    def conv(self, x: int, kind: str, k=(3, 3), stride=(1, 1), padding="SAME", cout=None,
             mult=1, act="NONE", per_channel=True) -> int:
        t = self.tensors[x]
        _, h, w_, cin = t.shape
        if kind == "CONV_2D":
            w = self.weights(f"w{len(self.ops)}", (cout, *k, cin), 0, per_channel)
            n_out, taps = cout, k[0] * k[1] * cin
        else:
            n_out, taps = cin * mult, k[0] * k[1]
            w = self.weights(f"w{len(self.ops)}", (1, *k, n_out), 3, per_channel)
        b = self.bias(f"b{len(self.ops)}", n_out, t.s, w)
        opts = dict(stride=tuple(stride), padding=padding, activation=act)
        if kind == "DEPTHWISE_CONV_2D":
            opts["depth_multiplier"] = mult
        geo = conv_geometry(Op(0, kind, [], [], opts), (h, w_), tuple(k))
        y = self.act(f"y{len(self.ops)}", (1, *geo["out_hw"], n_out),
                     scale=self.out_scale(t.s, w, taps))
        self.op(kind, [x, w, b], y, **opts)
        return y

    def fc(self, x: int, n_out: int, act="NONE", per_channel=False) -> int:
        t = self.tensors[x]
        w = self.weights(f"w{len(self.ops)}", (n_out, t.size), 0, per_channel)
        b = self.bias(f"b{len(self.ops)}", n_out, t.s, w)
        y = self.act(f"y{len(self.ops)}", (1, n_out), scale=self.out_scale(t.s, w, t.size))
        self.op("FULLY_CONNECTED", [x, w, b], y, activation=act)
        return y

    def graph(self, x: int, y: int, name: str) -> Graph:
        return Graph(self.tensors, self.ops, [x], [y], name)


def _conv_draw(r: np.random.Generator, kind: str) -> dict:
    k = (int(r.choice([1, 2, 3, 5])), int(r.choice([1, 3, 5]))) if r.random() < 0.3 else \
        (int(r.choice([1, 3, 5, 7])),) * 2
    return dict(k=k, stride=(int(r.integers(1, 3)), int(r.integers(1, 3))),
                padding=str(r.choice(["SAME", "VALID"])),
                act=str(r.choice(["NONE", "RELU", "RELU6"])),
                per_channel=bool(r.random() < 0.85),
                mult=int(r.choice([1, 1, 2, 3])) if kind == "DEPTHWISE_CONV_2D" else 1,
                cout=int(r.integers(1, 24)))


def _spatial(r: np.random.Generator, k=(1, 1)) -> tuple[int, int, int]:
    h = int(r.integers(max(k[0], 1), 14))
    w = int(r.integers(max(k[1], 1), 14))
    return h, w, int(r.integers(1, 20))


def _pool_activation(r: np.random.Generator, kind: str) -> str:
    """A max pool's fused activation (drawn); an average pool's cases keep NONE (and their
    draws)."""
    return str(r.choice(["NONE", "RELU", "RELU6"])) if kind == "MAX_POOL_2D" else "NONE"


def forward_case(kind: str, seed: int) -> Case:
    """A graph whose last op is `kind`, its parameters drawn from `seed`."""
    r = np.random.default_rng([seed, FORWARD_KINDS.index(kind)])
    b = _Builder(r)
    if kind in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        d = _conv_draw(r, kind)
        h, w, c = _spatial(r, d["k"])
        x = b.act("x", (1, h, w, c))
        y = b.conv(x, kind, **d)
        desc = f"{h}x{w}x{c} {d}"
    elif kind == "FULLY_CONNECTED":
        n_in, n_out = int(r.integers(1, 300)), int(r.integers(1, 40))
        pc = bool(r.random() < 0.5)
        x = b.act("x", (1, n_in))
        y = b.fc(x, n_out, act=str(r.choice(["NONE", "RELU"])), per_channel=pc)
        desc = f"{n_in}->{n_out} per_channel={pc}"
    elif kind == "ADD":
        h, w, c = _spatial(r)
        x = b.act("x", (1, h, w, c))
        a = b.conv(x, "CONV_2D", k=(1, 1), cout=c)
        y = b.act("y", (1, h, w, c))
        act = str(r.choice(["NONE", "RELU", "RELU6"]))
        b.op("ADD", [a, x], y, activation=act)
        desc = f"{h}x{w}x{c} {act}"
    elif kind in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        k = (int(r.integers(1, 5)), int(r.integers(1, 5)))
        h, w, c = _spatial(r, k)
        x = b.act("x", (1, h, w, c))
        stride, padding = (int(r.integers(1, 4)), int(r.integers(1, 4))), str(
            r.choice(["SAME", "VALID"]))
        act = _pool_activation(r, kind)
        geo = conv_geometry(Op(0, kind, [], [], dict(stride=stride, padding=padding)), (h, w), k)
        t = b.tensors[x]
        y = b.act("y", (1, *geo["out_hw"], c), scale=t.s, zp=t.zp)
        b.op(kind, [x], y, stride=stride, padding=padding, filter=k, activation=act)
        desc = f"{h}x{w}x{c} k={k} stride={stride} {padding} {act}"
    elif kind == "MEAN":
        h, w, c = _spatial(r)
        x = b.act("x", (1, h, w, c))
        keep = bool(r.random() < 0.5)
        y = b.act("y", (1, 1, 1, c) if keep else (1, c))
        b.op(kind, [x, b.const_int32("axes", [1, 2])], y, keep_dims=keep)
        desc = f"{h}x{w}x{c} keep_dims={keep}"
    elif kind == "PAD":
        h, w, c = _spatial(r)
        x = b.act("x", (1, h, w, c))
        pads = tuple((int(r.integers(0, 4)), int(r.integers(0, 4))) for _ in range(2))
        t = b.tensors[x]
        y = b.act("y", (1, h + sum(pads[0]), w + sum(pads[1]), c), scale=t.s, zp=t.zp)
        table = [[0, 0], list(pads[0]), list(pads[1]), [0, 0]]
        b.op(kind, [x, b.const_int32("pads", table)], y, pads=pads)
        desc = f"{h}x{w}x{c} pads={pads}"
    elif kind == "SOFTMAX":
        n = int(r.integers(2, 300))
        x = b.act("x", (1, n))
        y = b.act("y", (1, n), scale=1.0 / 256, zp=-128)
        beta = float(r.choice([1.0, 0.5, 2.0]))
        b.op(kind, [x], y, beta=beta)
        desc = f"{n} beta={beta}"
    else:
        raise ValueError(kind)
    return Case(f"{kind} seed={seed} {desc}", b.graph(x, y, f"{kind}-{seed}"))


def training_case(kind: str, seed: int) -> Case:
    """x -> conv 1x1 (bias and weights trained) -> the op under test (trained when weighted) ->
    [a 1x1 conv / FC head, trained] -> logits: a step runs the op's input-gradient kernel, and
    its weight and bias kernels when it has weights."""
    r = np.random.default_rng([seed, 100 + GRADIENT_KINDS.index(kind)])
    b = _Builder(r)
    h, w, c = _spatial(r, (7, 7))
    x = b.act("x", (1, h, w, c))
    a = b.conv(x, "CONV_2D", k=(1, 1), cout=int(r.integers(1, 10)), act="RELU")
    trained = {0: None}
    if kind in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        d = _conv_draw(r, kind)
        d["k"] = tuple(min(k, s) for k, s in zip(d["k"], (h, w), strict=True))
        d["cout"] = min(d["cout"], 12)
        y = b.conv(a, kind, **d)
        desc = str(d)
        trained[1] = None
    elif kind == "FULLY_CONNECTED":
        flat = b.act("flat", (1, b.tensors[a].size), scale=b.tensors[a].s, zp=b.tensors[a].zp)
        b.op("RESHAPE", [a, b.const_int32("shape", [1, b.tensors[a].size])], flat)
        y = b.fc(flat, int(r.integers(2, 9)), per_channel=bool(r.random() < 0.5))
        trained[len(b.ops) - 1] = None
        desc = f"{b.tensors[a].size}->{b.tensors[y].size}"
    elif kind == "ADD":
        a2 = b.conv(x, "CONV_2D", k=(1, 1), cout=b.tensors[a].shape[3])
        y = b.act("sum", b.tensors[a].shape)
        b.op("ADD", [a, a2], y, activation=str(r.choice(["NONE", "RELU"])))
        trained[1] = None
        desc = "two trained branches"
    elif kind in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        k = (int(r.integers(1, 4)), int(r.integers(1, 4)))
        stride = (int(r.integers(1, 3)), int(r.integers(1, 3)))
        padding = str(r.choice(["SAME", "VALID"]))
        act = _pool_activation(r, kind)
        geo = conv_geometry(Op(0, kind, [], [], dict(stride=stride, padding=padding)), (h, w), k)
        t = b.tensors[a]
        y = b.act("pool", (1, *geo["out_hw"], t.shape[3]), scale=t.s, zp=t.zp)
        b.op(kind, [a], y, stride=stride, padding=padding, filter=k, activation=act)
        desc = f"k={k} stride={stride} {padding} {act}"
    elif kind == "MEAN":
        y = b.act("mean", (1, 1, 1, b.tensors[a].shape[3]))
        b.op(kind, [a, b.const_int32("axes", [1, 2])], y, keep_dims=True)
        desc = "keep_dims"
    elif kind == "PAD":
        pads = tuple((int(r.integers(0, 3)), int(r.integers(0, 3))) for _ in range(2))
        t = b.tensors[a]
        y = b.act("pad", (1, h + sum(pads[0]), w + sum(pads[1]), t.shape[3]), scale=t.s,
                  zp=t.zp)
        table = [[0, 0], list(pads[0]), list(pads[1]), [0, 0]]
        b.op(kind, [a, b.const_int32("pads", table)], y, pads=pads)
        desc = f"pads={pads}"
    else:
        raise ValueError(kind)
    head_in = y
    if len(b.tensors[y].shape) == 4:
        logits = b.conv(head_in, "CONV_2D", k=(1, 1), cout=int(r.integers(2, 5)))
    else:
        logits = b.fc(head_in, int(r.integers(2, 5)))
    trained[len(b.ops) - 1] = None
    layers = {}
    for i in trained:
        op = b.ops[i]
        wt = b.tensors[op.inputs[1]]
        n_out = wt.shape[3] if op.kind == "DEPTHWISE_CONV_2D" else wt.shape[0]
        # a few channels where there are many (rows nobody trains stay in the blob)
        chans = sorted(r.choice(n_out, size=max(1, n_out // 2), replace=False).tolist()) \
            if n_out > 3 and r.random() < 0.5 else list(range(n_out))
        layers[i] = LayerUpdate(i, True, [int(ch) for ch in chans])
    graph = b.graph(x, logits, f"train-{kind}-{seed}")
    return Case(f"{kind} seed={seed} {h}x{w}x{c} {desc}", graph, SparseScheme("test", layers))


def random_input(graph: Graph, rng: np.random.Generator) -> np.ndarray:
    return rng.integers(-128, 128, graph.input.shape).astype(np.int8)


def small_classifier(seed: int = 0) -> Graph:
    """A MobileNetV1 tail (the VWW model's shape, 12x12x16 input, 2 classes) built in the IR:
    DEPTHWISE 3x3/2 and 1x1 CONV pairs with RELU6, AVERAGE_POOL over the map, RESHAPE,
    FULLY_CONNECTED, SOFTMAX. Unlike a TFLite conversion (tests/modelgen.py, not bit-identical
    from one conversion to the next), its bytes are the same on every machine, so outputs
    computed from it can be committed (micropython/tests/*.py.exp). Output scales are set as a
    calibration would set them for int8 inputs over the whole range: about 40 LSB of standard
    deviation before the activation, RELU6 outputs from zero point -128."""
    b = _Builder(np.random.default_rng([seed, 0x5C1A55]))
    x = b.act("x", (1, 12, 12, 16), scale=1.0 / 255, zp=-128)

    y = x
    for stride in (2, 1):
        y = b.conv(y, "DEPTHWISE_CONV_2D", k=(3, 3), stride=(stride, stride), act="RELU6")
        b.calibrate(y, 9, -128)
        y = b.conv(y, "CONV_2D", k=(1, 1), cout=32, act="RELU6")
        b.calibrate(y, 16 if stride == 2 else 32, -128)
    t = b.tensors[y]
    pooled = b.act("pool", (1, 1, 1, 32), scale=t.s, zp=t.zp)
    b.op("AVERAGE_POOL_2D", [y], pooled, stride=(6, 6), padding="VALID", filter=(6, 6),
         activation="NONE")
    flat = b.act("flat", (1, 32), scale=t.s, zp=t.zp)
    b.op("RESHAPE", [pooled, b.const_int32("shape", [1, 32])], flat)
    logits = b.fc(flat, 2)
    b.calibrate(logits, 32, 0)
    probs = b.act("probs", (1, 2), scale=1.0 / 256, zp=-128)
    b.op("SOFTMAX", [logits], probs, beta=1.0)
    return b.graph(x, probs, f"small-classifier-{seed}")


def stage_case(seed: int) -> Case:
    """A graph whose first ops can run as a tiled stage (compile/patch.py): a random chain over
    a map of 9..30 pixels a side of CONV_2D (1x1 to 7x7, strides 1 and 2, SAME and VALID),
    DEPTHWISE_CONV_2D (multipliers 1 and 2), PAD, AVERAGE_POOL_2D, MAX_POOL_2D and MobileNetV2
    residual blocks (1x1 expansion, depthwise, 1x1 projection, ADD), then a 1x1 CONV_2D and
    MEAN that run whole."""
    r = np.random.default_rng([seed, 0x7173])
    b = _Builder(r)
    h, w = int(r.integers(9, 31)), int(r.integers(9, 31))
    x = b.act("x", (1, h, w, int(r.integers(1, 5))))
    y, desc = x, []
    for _ in range(int(r.integers(2, 6))):
        t = b.tensors[y]
        _, hh, ww, c = t.shape
        kind = str(r.choice(["conv", "dw", "pad", "pool", "block"]))
        s = int(r.integers(1, 3)) if min(hh, ww) >= 8 else 1
        k = int(r.choice([1, 3, 5, 7]))
        k = min(k, hh, ww)
        pad = str(r.choice(["SAME", "VALID"]))
        if kind == "conv":
            y = b.conv(y, "CONV_2D", k=(k, k), stride=(s, s), padding=pad,
                       cout=int(r.integers(1, 12)), act=str(r.choice(["RELU6", "NONE"])))
            desc.append(f"conv{k}s{s}{pad[0]}")
        elif kind == "dw":
            k = max(k, 3) if min(hh, ww) >= 3 else 1
            m = int(r.choice([1, 1, 2]))
            y = b.conv(y, "DEPTHWISE_CONV_2D", k=(k, k), stride=(s, s), padding=pad, mult=m,
                       act="RELU6")
            desc.append(f"dw{k}s{s}{pad[0]}m{m}")
        elif kind == "pad":
            pads = tuple((int(r.integers(0, 3)), int(r.integers(0, 3))) for _ in range(2))
            out = b.act("pad", (1, hh + sum(pads[0]), ww + sum(pads[1]), c), scale=t.s, zp=t.zp)
            table = [[0, 0], list(pads[0]), list(pads[1]), [0, 0]]
            b.op("PAD", [y, b.const_int32("pads", table)], out, pads=pads)
            y = out
            desc.append(f"pad{pads}")
        elif kind == "pool":
            kk = (min(int(r.integers(2, 4)), hh), min(int(r.integers(2, 4)), ww))
            pool = str(r.choice(["AVERAGE_POOL_2D", "MAX_POOL_2D"]))
            geo = conv_geometry(Op(0, pool, [], [], dict(stride=(s, s), padding=pad)), (hh, ww),
                                kk)
            out = b.act("pool", (1, *geo["out_hw"], c), scale=t.s, zp=t.zp)
            b.op(pool, [y], out, stride=(s, s), padding=pad, filter=kk, activation="NONE")
            y = out
            desc.append(f"{pool}{kk}s{s}{pad[0]}")
        else:
            e = b.conv(y, "CONV_2D", k=(1, 1), cout=c * int(r.integers(2, 5)), act="RELU6")
            d = b.conv(e, "DEPTHWISE_CONV_2D", k=(3, 3), act="RELU6")
            p = b.conv(d, "CONV_2D", k=(1, 1), cout=c)
            out = b.act("sum", t.shape)
            b.op("ADD", [y, p], out, activation="NONE")
            y = out
            desc.append("block")
    head = b.conv(y, "CONV_2D", k=(1, 1), cout=int(r.integers(2, 5)))
    mean = b.act("mean", (1, b.tensors[head].shape[3]))
    b.op("MEAN", [head, b.const_int32("axes", [1, 2])], mean, keep_dims=False)
    return Case(f"stage seed={seed} {h}x{w} {' '.join(desc)}", b.graph(x, mean, f"stage-{seed}"))
