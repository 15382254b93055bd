"""NumPy reference training step: forward int8, loss, sparse backward in float32, and in-place
quantized updates with QAS and stochastic rounding. The C core (firmware/core/tp_train.c) follows
this file operation for operation; docs/training.md states the contract.

Bit-exactness across NumPy and C rests on three rules:
- every float is float32, every operation is one IEEE-rounded +, -, * or / (no FMA, no libm:
  exp and log come from tinyprop.reference.fmath);
- every sum runs sequentially in the documented order, starting from 0.0 or from the value
  already in the gradient buffer (seqsum below, np.add.accumulate is sequential);
- random numbers for stochastic rounding are a hash of (seed, step, parameter offset), so
  they do not depend on loop order.

Integer gradient maps (a blob converted with --grad int16 or int8): every gradient tensor is
integers times one power-of-two exponent (tinyprop.reference.gradmap); sums are exact int64, so
their order does not matter, and the weight and bias gradients become float32 only for the
update, which is the same as with float32 maps.

Momentum (a blob converted with --momentum holds one float32 velocity per trained parameter
after the params): v = m * v + g on the real-valued gradient g, two float32 roundings, then the
update scales v exactly as plain SGD scales g (QAS, stochastic rounding). QAS converts a
real-valued step into integer units, so the real-valued parameters follow classical momentum
SGD: theta_real -= lr * v.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..frontend.graph import Graph, Op
from ..frontend.opparams import OpParams, all_op_params
from ..program import (
    F2_REDUCE_IN0,
    F2_REDUCE_IN1,
    F2_REDUCED,
    F_BIAS,
    F_GRAD_IN0,
    F_GRAD_IN1,
    F_MASK,
    F_WEIGHT,
    F_ZERO_IN0,
    F_ZERO_IN1,
    TrainProgram,
    weight_rows,
)
from ..status import check_hparams
from .fmath import exp_neg, floor_f32, log_pos
from .forward import _padded, patches, pool_argmax, pool_windows, run_op
from .gradmap import GradMap, fold, loss_map, produce, rdiv, to_f32

f32 = np.float32
M32 = 0xFFFFFFFF
# average pooling and MEAN divide each dY by its window's size in units of 2^-POOL_FRAC
POOL_FRAC = 16


@dataclass
class ChannelSums:
    """A sink's output gradient (train_plan.F2_REDUCED): per-channel sums of the exact masked
    values its one writer produced, times 2^e."""

    s: np.ndarray
    e: int


@dataclass
class StepResult:
    loss: float
    prediction: int
    label: int
    skipped: bool
    logits: np.ndarray


def fmix32(h: np.ndarray) -> np.ndarray:
    """murmur3 finalizer on uint32 arrays."""
    h = np.asarray(h, np.uint64) & M32
    h = h ^ (h >> 16)
    h = (h * 0x85EBCA6B) & M32
    h = h ^ (h >> 13)
    h = (h * 0xC2B2AE35) & M32
    return (h ^ (h >> 16)).astype(np.uint32)


def uniform(seed: int, step: int, index: np.ndarray) -> np.ndarray:
    """Uniform [0, 1) float32 for each parameter byte offset in `index`."""
    key = fmix32(np.uint64((seed + step * 0x85EBCA77) & M32)).astype(np.uint64)
    h = fmix32((np.asarray(index, np.uint64) * 0x9E3779B1 + key) & M32)
    return ((h >> np.uint32(8)).astype(f32) * f32(1.0 / (1 << 24))).astype(f32)


ROUNDINGS = ("stochastic", "nearest")


def stochastic_round(delta: np.ndarray, r: np.ndarray, limit: float) -> np.ndarray:
    """floor(delta) + (r < frac): unbiased rounding so sub-LSB updates survive on average.
    NaN becomes 0; |delta| is clamped to `limit` first."""
    d = np.asarray(delta, f32)
    d = np.where(np.isnan(d), f32(0), d)
    d = np.minimum(np.maximum(d, f32(-limit)), f32(limit))
    fl = floor_f32(d)
    frac = d - fl
    return fl.astype(np.int64) + (r < frac)


def seqsum(a: np.ndarray, axis: int, start: np.ndarray | None = None) -> np.ndarray:
    """Sequential float32 sum along `axis` from `start` (0.0 if None), as a C loop does it."""
    a = np.moveaxis(np.asarray(a, f32), axis, 0)
    first = np.zeros(a.shape[1:], f32) if start is None else np.asarray(start, f32)
    return np.add.accumulate(np.concatenate([first[None], a], axis=0), axis=0, dtype=f32)[-1]


def loss_and_grad(z: np.ndarray, label: int) -> tuple[np.float32, np.ndarray]:
    """Softmax cross-entropy on float32 logits; gradient p - onehot."""
    m = z[0]
    for v in z[1:]:
        m = max(m, v)
    e = exp_neg(z - m)
    s = seqsum(e, 0)
    p = (e / s).astype(f32)
    loss = (log_pos(s) - (z[label] - m)).astype(f32)
    g = p.copy()
    g[label] = g[label] - f32(1)
    return loss, g


def mse_and_grad(y: np.ndarray, t: np.ndarray) -> tuple[np.float32, np.ndarray]:
    """Mean squared error of float32 outputs y against targets t; gradient 2 (y - t) / n. Each
    value in float32 and the sum in order, as tp_loss.c computes them."""
    d = (y - t).astype(f32)
    n = f32(d.size)
    loss = (seqsum(d * d, 0) / n).astype(f32)
    return loss, (d * (f32(2) / n)).astype(f32)


class ReferenceTrainer:
    """The training state (trainable parameters) and one training step, in NumPy."""

    def __init__(self, program: TrainProgram, lr: float = 0.01, seed: int = 0,
                 qas: bool = True, momentum: float = 0.0, rounding: str = "stochastic"):
        if rounding not in ROUNDINGS:
            raise ValueError(f"rounding {rounding!r}: use one of {', '.join(ROUNDINGS)}")
        # "nearest" exists for the ablation that measures what stochastic rounding keeps
        # (tinyprop bench); the firmware rounds stochastically only.
        self.rounding = rounding
        # counts of the updates' rounding when a dict (bench): n, sub_lsb, and for the sub-LSB
        # ones the sum of |delta| and of the integer steps applied in delta's direction
        self.tally: dict | None = None
        self.prog = program
        self.graph: Graph = program.graph
        self.params = all_op_params(self.graph)
        self.set_hparams(lr, seed, qas, momentum)
        # None: plain SGD, the blob has no optimizer state
        self.velocity = (np.zeros(program.optimizer_bytes // 4, f32)
                         if program.optimizer_bytes else None)
        self.step = 0
        self.probe: dict | None = None  # auto.calibration_grad_norms: record, do not update
        self._producer = {op.outputs[0]: op.index for op in self.graph.ops}
        self.values = {}  # tensor index -> current trainable array
        for k, t in program.ops.items():
            op = self.graph.ops[k]
            if t.flags & F_BIAS:
                self.values[op.inputs[2]] = self.graph.tensors[op.inputs[2]].data.copy()
            if t.flags & F_WEIGHT:
                self.values[op.inputs[1]] = self.graph.tensors[op.inputs[1]].data.copy()

    def set_hparams(self, lr: float, seed: int, qas: bool = True, momentum: float = 0.0) -> None:
        """The hyper-parameters of the next steps, checked as tp_set_hparams checks them."""
        check_hparams(lr, momentum, self.prog.optimizer_bytes > 0)
        self.lr = f32(lr)
        self.seed = seed & M32
        self.qas = qas
        self.momentum = f32(momentum)

    # -- state --
    def params_bytes(self) -> bytes:
        """The params region as the device holds it: parameters, then any velocities."""
        v = b"" if self.velocity is None else self.velocity.astype("<f4").tobytes()
        return self.prog.pack_params(self.values) + v

    def load_params(self, raw: bytes) -> None:
        self.values.update(self.prog.unpack_params(raw))
        if self.velocity is not None:
            self.velocity = np.frombuffer(raw, "<f4", len(self.velocity),
                                          self.prog.params_bytes).astype(f32)

    def _const(self, ti: int) -> np.ndarray:
        return self.values.get(ti, self.graph.tensors[ti].data)

    # -- forward --
    def forward(self, x: np.ndarray, upto: int | None = None) -> dict[int, np.ndarray]:
        g = self.graph
        upto = len(g.ops) - 1 if upto is None else upto
        vals = {g.inputs[0]: np.asarray(x, np.int8).reshape(g.input.shape)}
        for ti in self.values:
            vals[ti] = self.values[ti]
        for op, p in zip(g.ops[: upto + 1], self.params[: upto + 1], strict=True):
            vals[op.outputs[0]] = run_op(g, op, p, vals)  # vals holds the trained copies
        return vals

    def infer(self, x: np.ndarray) -> np.ndarray:
        return self.forward(x)[self.graph.outputs[0]]

    # -- training step --
    def train_step(self, x: np.ndarray, label: int) -> StepResult:
        g, prog = self.graph, self.prog
        L = prog.logits
        vals = self.forward(x, L)
        zt = g.tensors[g.ops[L].outputs[0]]
        zq = vals[zt.index].reshape(-1)
        z = ((zq.astype(np.int32) - zt.zp).astype(f32) * f32(zt.s)).astype(f32)
        pred = int(np.argmax(zq))
        if prog.loss == "mse":  # the target: the input, dequantized
            xt = g.input
            t = ((np.asarray(x).reshape(-1).astype(np.int32) - xt.zp).astype(f32)
                 * f32(xt.s)).astype(f32)
            loss, dz = mse_and_grad(z, t)
        else:
            loss, dz = loss_and_grad(z, label)
        if not np.isfinite(loss):
            self.step += 1
            return StepResult(float(loss), pred, label, True, zq)
        def root(t: int) -> int:
            return prog.alias.get(t, t)

        if prog.grad == "float32":
            grads = {root(zt.index): dz.reshape(zt.shape)}
            backward_op = self._backward_op
        else:
            grads = {root(zt.index): loss_map(dz, prog.grad)}
            grads[root(zt.index)].q = grads[root(zt.index)].q.reshape(zt.shape)
            backward_op = self._backward_op_int
        for k in prog.backward_order():
            backward_op(k, vals, grads, root)
        self.step += 1
        return StepResult(float(loss), pred, label, False, zq)

    def _grad_buf(self, grads, root, ti) -> np.ndarray:
        r = root(ti)
        if r not in grads:
            grads[r] = np.zeros(self.graph.tensors[r].shape, f32)
        return grads[r]

    def _real(self, ti: int, vals) -> np.ndarray:
        t = self.graph.tensors[ti]
        return ((vals[ti].astype(np.int32) - t.zp).astype(f32) * f32(t.s)).astype(f32)

    def _backward_op(self, k: int, vals, grads, root) -> None:
        g, t = self.graph, self.prog.ops[k]
        op, p = g.ops[k], self.params[k]
        dy = grads[root(op.outputs[0])]
        if t.flags & F_MASK:
            dy = np.where(self._keep(k, vals), dy, f32(0)).astype(f32)
            grads[root(op.outputs[0])] = dy
        if op.spec.weighted:
            w = self._const(op.inputs[1])
            s_w = self._scales(op)
            if t.flags & F_GRAD_IN0:
                dx = self._grad_buf(grads, root, op.inputs[0])
                grads[root(op.inputs[0])] = self._input_grad(op, p, w, s_w, dy, dx)
            if t.flags & (F_BIAS | F_WEIGHT):
                self._update(k, op, p, t, w, s_w, dy, vals)
            return
        grad = op.spec.hook("grad")  # None: a view shares its input's gradient buffer
        for pos, flag in ((0, F_GRAD_IN0), (1, F_GRAD_IN1)):
            if grad is not None and t.flags & flag:
                buf = self._grad_buf(grads, root, op.inputs[pos])
                grads[root(op.inputs[pos])] = grad(g, op, p, pos, dy, buf, vals)

    def _backward_op_int(self, k, vals, grads, root) -> None:
        """_backward_op with integer maps: dX is exact int64 values, written as a map."""
        g, t, fmt = self.graph, self.prog.ops[k], self.prog.grad
        op, p = g.ops[k], self.params[k]
        dy = grads[root(op.outputs[0])]
        if t.flags2 & F2_REDUCED:  # the writer applied the mask and summed: only the bias trains
            self._update(k, op, p, t, None, self._scales(op), dy, vals)
            return
        dy = GradMap(dy.q.reshape(g.tensors[op.outputs[0]].shape), dy.e)  # a RESHAPE's view
        if t.flags & F_MASK:
            dy = GradMap(np.where(self._keep(k, vals), dy.q, 0), dy.e)
            grads[root(op.outputs[0])] = dy

        def write(pos: int, v: np.ndarray, e_v: int) -> None:
            """The map of input pos, its rows as this op sees the tensor (or, for a sink's
            output, the sums of its masked channels)."""
            r = root(op.inputs[pos])
            if t.flags2 & (F2_REDUCE_IN0 if pos == 0 else F2_REDUCE_IN1):
                keep = self._keep(self._producer[op.inputs[pos]], vals)
                v = np.where(keep, v.reshape(keep.shape), 0)
                grads[r] = ChannelSums(v.reshape(-1, v.shape[-1]).sum(axis=0), e_v)
                return
            first = t.flags & (F_ZERO_IN0 if pos == 0 else F_ZERO_IN1)
            old = None if first else GradMap(grads[r].q.reshape(v.shape), grads[r].e)
            grads[r] = produce(v.reshape(g.tensors[op.inputs[pos]].shape), e_v, fmt, old)

        if op.spec.weighted:
            w = self._const(op.inputs[1])
            s_w = self._scales(op)
            if t.flags & F_GRAD_IN0:
                dyf = fold(dy, s_w, fold_terms(op, g.tensors[op.inputs[1]].shape))
                write(0, self._input_grad_int(op, p, w, dyf.q), dyf.e)
            if t.flags & (F_BIAS | F_WEIGHT):
                self._update(k, op, p, t, w, s_w, dy, vals)
            return
        grad = op.spec.hook("grad_int")  # None: a view shares its input's gradient buffer
        for pos, flag in ((0, F_GRAD_IN0), (1, F_GRAD_IN1)):
            if grad is not None and t.flags & flag:
                write(pos, *grad(g, op, p, pos, dy, vals))

    def _keep(self, k: int, vals) -> np.ndarray:
        """Where op k's output passes a gradient: inside its RELU's clamp (all of it without a
        mask)."""
        op, p = self.graph.ops[k], self.params[k]
        y = vals[op.outputs[0]]
        if not self.prog.ops[k].flags & F_MASK:
            return np.ones(y.shape, bool)
        keep = y > p.act_min
        if op.activation == "RELU6":
            keep &= y < p.act_max
        return keep

    def _scales(self, op) -> np.ndarray:
        wt = self.graph.tensors[op.inputs[1]]
        n_out = wt.shape[-1] if op.spec.channels_last else wt.shape[0]
        return np.broadcast_to(wt.scale.astype(f32), (n_out,))

    def _input_grad_int(self, op, p, w, dyf) -> np.ndarray:
        """W^T dY' as exact int64 values, in the shape of the op's input."""
        shape = self.graph.tensors[op.inputs[0]].shape
        w = w.astype(np.int64)
        if op.kind == "FULLY_CONNECTED":
            return (dyf.reshape(-1) @ w).reshape(shape)
        geo = p.geometry
        (kh, kw), (sh, sw), (oh, ow), (ph, pw) = geo["k"], geo["stride"], geo["out_hw"], geo["pad"]
        h, wd, c = shape[1:]
        acc = np.zeros((max((oh - 1) * sh + kh, h + ph), max((ow - 1) * sw + kw, wd + pw), c),
                       np.int64)
        d = dyf[0]
        for i in range(kh):
            for j in range(kw):
                sl = (slice(i, i + (oh - 1) * sh + 1, sh), slice(j, j + (ow - 1) * sw + 1, sw))
                if op.kind == "CONV_2D":
                    acc[sl] += d @ w[:, i, j, :]
                else:
                    mult = op.options["depth_multiplier"]
                    acc[sl] += (d * w[0, i, j]).reshape(oh, ow, c, mult).sum(axis=-1)
        return acc[ph : ph + h, pw : pw + wd][None]

    def _input_grad(self, op, p, w, s_w, dy, dx) -> np.ndarray:
        """dX += W^T dY in the order: taps (kh, kw) raster, then output channels ascending."""
        if op.kind == "FULLY_CONNECTED":
            wr = (w.astype(f32) * s_w[:, None]).astype(f32)  # (O, I)
            prod = dy.reshape(-1)[:, None] * wr
            return seqsum(prod, 0, dx.reshape(-1)).reshape(dx.shape)
        geo = p.geometry
        (kh, kw), (sh, sw), (oh, ow), (ph, pw) = geo["k"], geo["stride"], geo["out_hw"], geo["pad"]
        h, wd, c = dx.shape[1:]
        hp = max((oh - 1) * sh + kh, h + ph)
        wp = max((ow - 1) * sw + kw, wd + pw)
        acc = np.zeros((hp, wp, c), f32)
        acc[ph : ph + h, pw : pw + wd] = dx[0]
        if op.kind == "CONV_2D":
            wr = (w.astype(f32) * s_w[:, None, None, None]).astype(f32)  # (O, KH, KW, I)
        else:
            wr = (w[0].astype(f32) * s_w[None, None, :]).astype(f32)  # (KH, KW, C*M)
            mult = op.options["depth_multiplier"]
        d = dy[0]
        for i in range(kh):
            for j in range(kw):
                sl = (slice(i, i + (oh - 1) * sh + 1, sh), slice(j, j + (ow - 1) * sw + 1, sw))
                cur = acc[sl]
                if op.kind == "CONV_2D":
                    prod = d[:, :, :, None] * wr[None, None, :, i, j, :]  # (OH, OW, O, I)
                    acc[sl] = seqsum(prod, 2, cur)
                else:
                    prod = (d * wr[i, j]).reshape(oh, ow, c, mult)
                    acc[sl] = seqsum(prod, 3, cur)
        return acc[ph : ph + h, pw : pw + wd][None].astype(f32)

    def _weight_grad_rows(self, op, p, t, dy, vals) -> np.ndarray:
        """dW rows of the selected channels, (n_sel, row_len), each a sequential sum over
        output positions in raster order."""
        xr = self._real(op.inputs[0], vals)
        if op.kind == "FULLY_CONNECTED":
            prod = dy.reshape(-1)[t.channels][:, None] * xr.reshape(1, -1)
            return seqsum(prod[None], 0)
        cols = patches(_padded(xr, p.geometry, 0.0).astype(f32), p.geometry)  # OH,OW,KH,KW,C
        oh, ow = p.geometry["out_hw"]
        d = dy[0].reshape(oh * ow, -1)
        if op.kind == "CONV_2D":
            cols = cols.reshape(oh * ow, -1)
            prod = d[:, t.channels, None] * cols[:, None, :]  # (P, n_sel, K)
            return seqsum(prod, 0)
        mult = op.options["depth_multiplier"]
        cols = np.repeat(cols, mult, axis=-1).reshape(oh * ow, -1, cols.shape[-1] * mult)
        prod = d[:, None, t.channels] * cols[:, :, t.channels]  # (P, KH*KW, n_sel)
        return seqsum(prod, 0).T  # (n_sel, KH*KW): one row a channel, its taps

    def _weight_grad_rows_int(self, op, p, t, dy: GradMap, vals) -> np.ndarray:
        """_weight_grad_rows with an integer dY: exact int64 sums of dY x (x - zp), then
        float32 (to_f32, with s_x x 2^e)."""
        xt = self.graph.tensors[op.inputs[0]]
        xc = vals[op.inputs[0]].astype(np.int64) - xt.zp
        d = dy.q.reshape(-1, t.n_out)
        if op.kind == "FULLY_CONNECTED":
            s = d[0, t.channels][:, None] * xc.reshape(1, -1)
        else:
            cols = patches(_padded(xc, p.geometry, 0), p.geometry)  # OH,OW,KH,KW,C
            cols = cols.reshape(d.shape[0], -1, cols.shape[-1])
            if op.kind == "CONV_2D":
                s = d[:, t.channels].T @ cols.reshape(d.shape[0], -1)
            else:
                cols = np.repeat(cols, op.options["depth_multiplier"], axis=-1)
                s = np.einsum("po,pko->ok", d[:, t.channels], cols[:, :, t.channels])
        return to_f32(s, dy.e, f32(xt.s))

    def _bias_grad(self, t, dy) -> np.ndarray:
        if isinstance(dy, ChannelSums):
            return to_f32(dy.s, dy.e)
        if isinstance(dy, GradMap):
            return to_f32(dy.q.reshape(-1, t.n_out).sum(axis=0), dy.e)
        return seqsum(dy.reshape(-1, t.n_out), 0)

    def _weight_grad(self, op, p, t, dy, vals) -> np.ndarray:
        if isinstance(dy, GradMap):
            return self._weight_grad_rows_int(op, p, t, dy, vals)
        return self._weight_grad_rows(op, p, t, dy, vals)

    def _record(self, k, op, p, t, dy, vals) -> None:
        entry = self.probe[k]
        if t.flags & F_BIAS:
            db = self._bias_grad(t, dy).astype(np.float64)
            entry[0] += float(np.sum(db * db))
        if t.flags & F_WEIGHT:
            rows = self._weight_grad(op, p, t, dy, vals).astype(np.float64)
            sq = np.zeros(t.n_out)
            sq[np.array(t.channels)] = np.sum(rows * rows, axis=1)
            entry[1] = sq if entry[1] is None else entry[1] + sq

    def _momentum(self, first: int, grad: np.ndarray) -> np.ndarray:
        """v = m * v + g for the velocities from index `first` on (grad's shape); returns v, or
        g itself without optimizer state."""
        if self.velocity is None:
            return grad
        n = grad.size
        v = (self.momentum * self.velocity[first : first + n].reshape(grad.shape)).astype(f32)
        v = (v + grad).astype(f32)
        self.velocity[first : first + n] = v.reshape(-1)
        return v

    def _round(self, delta: np.ndarray, idx: np.ndarray, limit: float) -> np.ndarray:
        """Integer update steps: stochastic (r uniform, keyed by step and parameter offset) or,
        for the ablation, nearest (r = 0.5: floor + (frac > 0.5))."""
        if self.rounding == "stochastic":
            r = uniform(self.seed, self.step, idx)
        else:
            r = np.full(np.shape(idx), f32(0.5), f32)
        d = stochastic_round(delta, r, limit)
        if self.tally is not None:
            dd = np.asarray(delta, np.float64)
            sub = np.abs(dd) < 0.5
            self.tally["n"] = self.tally.get("n", 0) + dd.size
            self.tally["sub_lsb"] = self.tally.get("sub_lsb", 0) + int(sub.sum())
            self.tally["sub_abs"] = self.tally.get("sub_abs", 0.0) + float(np.abs(dd[sub]).sum())
            applied = float((d[sub] * np.sign(dd[sub])).sum())
            self.tally["sub_applied"] = self.tally.get("sub_applied", 0.0) + applied
        return d

    def _update(self, k, op, p, t, w, s_w, dy, vals) -> None:
        if self.probe is not None:
            return self._record(k, op, p, t, dy, vals)
        g = self.graph
        floor = f32(t.scale_floor)
        s_eff = np.maximum(s_w, floor).astype(f32)
        if t.flags & F_BIAS:
            db = self._bias_grad(t, dy)
            s_x = f32(g.tensors[op.inputs[0]].s)
            step = (self.lr * self._momentum(t.velocity, db)).astype(f32)
            if self.qas:
                delta = -(step / (s_eff * s_x))
            else:
                delta = -(step * (s_w * s_x))
            idx = t.bias_params + 4 * np.arange(t.n_out)
            d = self._round(delta, idx, 1e9)
            b = self.values[op.inputs[2]].astype(np.int64) + d
            self.values[op.inputs[2]] = np.clip(b, -(1 << 31), (1 << 31) - 1).astype(np.int32)
        if t.flags & F_WEIGHT:
            rows = self._weight_grad(op, p, t, dy, vals)
            sel = np.array(t.channels)
            first = t.velocity + (t.n_out if t.flags & F_BIAS else 0)
            step = (self.lr * self._momentum(first, rows)).astype(f32)
            if self.qas:
                delta = -(step / s_eff[sel][:, None])
            else:
                delta = -(step * s_w[sel][:, None])
            # held rows are packed in channel order: row j of the selection at j * row_len
            idx = (t.weight_params + np.arange(len(sel))[:, None] * t.row_len
                   + np.arange(t.row_len)[None, :])
            d = self._round(delta, idx, 256.0)
            wv = self.values[op.inputs[1]].copy()
            rows = weight_rows(wv, op.spec.channels_last)
            rows[sel] = np.clip(rows[sel].astype(np.int64) + d, -127, 127)
            self.values[op.inputs[1]] = wv


def fold_terms(op, w_shape) -> int:
    """How many products W^T dY' sums for one input element at most (gradmap.fold_bits)."""
    if op.kind == "FULLY_CONNECTED":
        return w_shape[0]
    if op.kind == "CONV_2D":
        return w_shape[0] * w_shape[1] * w_shape[2]
    return w_shape[1] * w_shape[2] * op.options["depth_multiplier"]


# The kinds' gradient entries (ops.py): an activation input's gradient from dY.

def add_grad(graph: Graph, op: Op, p: OpParams, pos: int, dy: np.ndarray,
             buf: np.ndarray, values: dict) -> np.ndarray:
    return (buf + dy).astype(f32)


def add_grad_int(graph: Graph, op: Op, p: OpParams, pos: int, dy: GradMap,
                 values: dict) -> tuple[np.ndarray, int]:
    return dy.q, dy.e


def pool_grad(graph: Graph, op: Op, p: OpParams, pos: int, dy: np.ndarray,
              buf: np.ndarray, values: dict) -> np.ndarray:
    """Each window's dY divided by its size, added window by window in raster order."""
    buf = buf.copy()
    for oy, ox, ys, xs in pool_windows(p.geometry, *buf.shape[1:3]):
        n = f32((ys.stop - ys.start) * (xs.stop - xs.start))
        buf[0, ys, xs] = buf[0, ys, xs] + dy[0, oy, ox] / n
    return buf


def pool_grad_int(graph: Graph, op: Op, p: OpParams, pos: int, dy: GradMap,
                  values: dict) -> tuple[np.ndarray, int]:
    shape = graph.tensors[op.inputs[0]].shape
    v = np.zeros(shape, np.int64)
    for oy, ox, ys, xs in pool_windows(p.geometry, *shape[1:3]):
        n = (ys.stop - ys.start) * (xs.stop - xs.start)
        v[0, ys, xs] += rdiv(dy.q[0, oy, ox] << POOL_FRAC, n)
    return v, dy.e - POOL_FRAC


def max_pool_grad(graph: Graph, op: Op, p: OpParams, pos: int, dy: np.ndarray,
                  buf: np.ndarray, values: dict) -> np.ndarray:
    """Each window's dY added to its largest input (forward.pool_argmax), window by window in
    raster order: overlapping windows accumulate."""
    buf = buf.copy()
    ch = np.arange(buf.shape[3])
    for oy, ox, rows, cols in pool_argmax(values[op.inputs[0]], p.geometry):
        buf[0, rows, cols, ch] = buf[0, rows, cols, ch] + dy[0, oy, ox]
    return buf


def max_pool_grad_int(graph: Graph, op: Op, p: OpParams, pos: int, dy: GradMap,
                      values: dict) -> tuple[np.ndarray, int]:
    x = values[op.inputs[0]]
    v = np.zeros(x.shape, np.int64)
    ch = np.arange(x.shape[3])
    for oy, ox, rows, cols in pool_argmax(x, p.geometry):
        v[0, rows, cols, ch] += dy.q[0, oy, ox]
    return v, dy.e


def mean_grad(graph: Graph, op: Op, p: OpParams, pos: int, dy: np.ndarray,
              buf: np.ndarray, values: dict) -> np.ndarray:
    n = f32(buf.shape[1] * buf.shape[2])
    return (buf + (dy.reshape(1, 1, 1, -1) / n)).astype(f32)


def mean_grad_int(graph: Graph, op: Op, p: OpParams, pos: int, dy: GradMap,
                  values: dict) -> tuple[np.ndarray, int]:
    shape = graph.tensors[op.inputs[0]].shape
    v = rdiv(dy.q.reshape(1, 1, 1, -1) << POOL_FRAC, shape[1] * shape[2])
    return np.broadcast_to(v, shape), dy.e - POOL_FRAC


def pad_grad(graph: Graph, op: Op, p: OpParams, pos: int, dy: np.ndarray,
             buf: np.ndarray, values: dict) -> np.ndarray:
    (ph, _), (pw, _) = op.options["pads"]
    h, w = buf.shape[1:3]
    return (buf + dy[:, ph : ph + h, pw : pw + w]).astype(f32)


def pad_grad_int(graph: Graph, op: Op, p: OpParams, pos: int, dy: GradMap,
                 values: dict) -> tuple[np.ndarray, int]:
    (ph, _), (pw, _) = op.options["pads"]
    h, w = graph.tensors[op.inputs[0]].shape[1:3]
    return dy.q[:, ph : ph + h, pw : pw + w], dy.e


def step_gradients(program: TrainProgram, x: np.ndarray,
                   label: int) -> dict[int, tuple[np.ndarray | None, np.ndarray | None]]:
    """The float32 gradients one reference training step computes, without updating: for each
    trained op, (bias gradient (n_out,) or None, weight gradient rows of the selected channels
    in the update's layout or None). Empty when the loss is not finite. Tests compare these
    with autodiff."""
    grads: dict[int, tuple[np.ndarray | None, np.ndarray | None]] = {}

    class Recorder(ReferenceTrainer):
        def _update(self, k, op, p, t, w, s_w, dy, vals) -> None:
            db = self._bias_grad(t, dy) if t.flags & F_BIAS else None
            dw = self._weight_grad(op, p, t, dy, vals) if t.flags & F_WEIGHT else None
            grads[k] = (db, dw)

    Recorder(program).train_step(x, label)
    return grads
