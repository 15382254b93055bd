"""A blob's trainable parameters as named arrays, and how a fleet aggregates them.

What travels between a board and the fleet's server is only what the board trains: the int32
biases the blob marks TRAINABLE and the held int8 weight rows (`held_map`), each one array
named by its op (`op26.bias`, `op26.weights`: n_sel rows of row_len), read from and written
into the params region exactly where the C core keeps them (docs/blob-format.md). Frozen weights
never travel, and neither does a board's optimizer state (momentum's velocities:
`ParamsLayout.join` keeps a region's own, or zeros).

    layout = ParamsLayout.from_blob(tb.blob)
    arrays = layout.split(engine.params())                 # name -> int8/int32 array
    engine.load_params(layout.join(arrays), step)          # with zero velocities
    merged = aggregate(layout, [Update("haze", a, steps=40), ...], "fedavg", seed, round)

Aggregation is in the real domain: a weight is `q x s_w[channel]`, a bias `q x s_w[channel] x
s_x`, with the blob's fixed per-channel scales. Every board's row has the same scale (it is in
the blob, never trained), so the real-valued mean requantized with that scale is exactly the
mean of the integers: `aggregate` computes it in int64 (exact, where float64 would round
int32 biases and lose the property below), then rounds the one remaining fraction
stochastically: up with probability equal to the fraction, r from the C core's hash of (seed,
round, the parameter's byte offset in the params region), so a run is reproducible from its
seed. Not round-half-even: most boards' updates are sub-LSB moves a minority of boards make (one
of three boards moves a weight by one: mean +1/3), which round-to-nearest would erase every
round, as it would on the board (docs/training.md, stochastic rounding); the expected result of
stochastic rounding is the exact mean. A mean with no fraction is not rounded at all, so one
board's update, or identical updates, come back unchanged bit for bit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..compile.blob import NONE16, NONE32, T_CONST, T_TRAINABLE, read_blob
from ..device.device import read_params_record
from ..errors import TinypropError
from ..frontend.ops import kinds, spec
from ..program import weight_rows
from ..reference.backward import uniform

AGGREGATIONS = ("fedavg", "fedmedian", "trimmed")
# trimmed mean: the fraction of boards cut from each tail (Flower's FedTrimmedAvg's beta); at
# least one when three or more boards report (else 3 boards, the fleet, trim nothing)
TRIM_BETA = 0.2
# int64 sums stay exact while sum(steps) x |q| < 2^63: int32 values times fewer than 2^31 steps
MAX_TOTAL_STEPS = 2**31 - 1
_RANGE = {np.dtype(np.int8): (-128, 127), np.dtype(np.int32): (-(2**31), 2**31 - 1)}
_UNIT = 1 << 24  # the hash's uniform r is an integer count of 2^-24 (reference.backward)


class UpdateRejected(TinypropError):
    """A board's update the server refuses. `.reason` names the check (REJECT_REASONS)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


# every reason an update is refused, and what the board (or its operator) should do
REJECT_REASONS = {
    "blob_id": "it was trained on another blob; flash the fleet's blob",
    "names": "it does not name the blob's trainable arrays; send ParamsLayout.split's arrays",
    "shape": "an array has the wrong shape or length; send the blob's held rows and biases",
    "not_finite": "an array holds NaN or infinity; send the params region's integers",
    "not_integer": "an array holds fractional values; send the params region's integers",
    "out_of_range": "a value does not fit the parameter's int8 or int32; send the params "
                    "region's values",
    "steps": "its step count is not a positive integer below 2^31; report the local steps",
}


@dataclass(frozen=True)
class TrainableArray:
    """One array a board sends: an op's int32 biases (`channels`: every output channel) or its
    held int8 weight rows (one row a channel of `channels`), at byte `offset` of the params
    region. `scale`: the real value of one unit, one a channel of `channels` (the blob's weight
    scales, the bias's own)."""

    name: str
    op: int
    tensor: int  # the blob's (and the source .tflite's) tensor index
    offset: int
    shape: tuple[int, ...]
    dtype: np.dtype
    channels: np.ndarray
    scale: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.dtype.itemsize

    def byte_offsets(self) -> np.ndarray:
        """Each element's byte offset in the params region (the rounding hash's key)."""
        n = int(np.prod(self.shape))
        return (self.offset + np.arange(n, dtype=np.int64) * self.dtype.itemsize).reshape(
            self.shape)

    def real(self, q: np.ndarray) -> np.ndarray:
        """The real values of quantized `q` (float64): each channel's units times its scale."""
        s = self.scale.astype(np.float64)
        return q.astype(np.float64) * (s if q.ndim == 1 else s[:, None])


@dataclass(frozen=True)
class ParamsLayout:
    """Where each trainable array sits in a blob's params region (from the blob alone: TENS's
    TRAINABLE biases, OPS's held rows). `params_bytes` of parameters, then `optimizer_bytes`."""

    blob_id: int
    arrays: tuple[TrainableArray, ...]
    params_bytes: int
    optimizer_bytes: int
    model_bytes: int  # every weighted op's weights and biases: what sending the model costs
    initial: bytes  # the parameters as the blob holds them (the params region before training)

    @classmethod
    def from_blob(cls, blob: bytes, name: str = "blob") -> ParamsLayout:
        info = read_blob(blob, name)
        if "TRAN" not in info.sections:
            raise TinypropError(f"{name}: has no training program, nothing of it can learn in "
                                "a fleet; convert it with a --scheme")
        weighted = {spec(k).code: spec(k) for k in kinds() if spec(k).weighted}
        params_bytes = info.params_bytes - info.optimizer_bytes
        initial = bytearray(params_bytes)
        arrays, model_bytes = [], 0
        for k, op in enumerate(info.ops):
            if op.kind not in weighted:
                continue
            w_t, b_t = op.inputs[1], op.inputs[2]
            wt = info.tensors[w_t]
            depthwise = weighted[op.kind].channels_last
            w = info.data(wt.offset, wt.size, np.int8).reshape(wt.shape)
            rows = weight_rows(w, depthwise)
            w_scale = _channel_scales(info, wt, rows.shape[0])
            model_bytes += wt.size
            bt = info.tensors[b_t] if b_t != NONE16 else None
            if bt is not None:
                model_bytes += bt.size
            if bt is not None and bt.flags & T_TRAINABLE:
                n = bt.shape[0]
                bias = info.data(bt.offset, n, "<i4")
                arrays.append(TrainableArray(f"op{k}.bias", k, b_t, bt.params_offset, (n,),
                                             np.dtype(np.int32), np.arange(n),
                                             _channel_scales(info, bt, n)))
                initial[bt.params_offset : bt.params_offset + bias.nbytes] = bias.tobytes()
            if op.held_map != NONE32:
                hmap = info.data(op.held_map, rows.shape[0], "<u2")
                channels = np.flatnonzero(hmap != 0xFFFF)
                held = np.ascontiguousarray(rows[channels])
                arrays.append(TrainableArray(f"op{k}.weights", k, w_t, op.held_params,
                                             held.shape, np.dtype(np.int8), channels,
                                             w_scale[channels]))
                initial[op.held_params : op.held_params + held.nbytes] = held.tobytes()
        arrays.sort(key=lambda a: a.offset)
        return cls(info.blob_id, tuple(arrays), params_bytes, info.optimizer_bytes, model_bytes,
                   bytes(initial))

    @property
    def region_bytes(self) -> int:
        """The whole params region as a board pulls it: parameters, then optimizer state."""
        return self.params_bytes + self.optimizer_bytes

    def split(self, region: bytes) -> dict[str, np.ndarray]:
        """Each trainable array (a copy) from a params region (Engine.params, pull_params)."""
        if len(region) != self.region_bytes:
            raise UpdateRejected("shape", f"a params region of {len(region):,} bytes for blob "
                                 f"{self.blob_id:08x}, whose region is {self.region_bytes:,}: "
                                 f"{REJECT_REASONS['shape']}")
        return {a.name: np.frombuffer(region, a.dtype.newbyteorder("<"), int(np.prod(a.shape)),
                                      a.offset).reshape(a.shape).astype(a.dtype)
                for a in self.arrays}

    def split_record(self, record: bytes, board: str = "a board") -> tuple[dict, int]:
        """(arrays, step) of a params record (PUSH_PARAMS's, a board's store), refused with
        reason blob_id when it belongs to another blob."""
        blob, step, region = read_params_record(record, f"{board}'s params record")
        if blob != self.blob_id:
            raise UpdateRejected("blob_id", f"{board}: params record of blob {blob:08x}, the "
                                 f"fleet's is {self.blob_id:08x}; {REJECT_REASONS['blob_id']}")
        return self.split(region), step

    def join(self, arrays: Mapping[str, np.ndarray], region: bytes | None = None) -> bytes:
        """A params region with `arrays` in place: every other byte (optimizer state) from
        `region` (a board's own), or zero optimizer state without one."""
        out = bytearray(region if region is not None else self.initial +
                        bytes(self.optimizer_bytes))
        if len(out) != self.region_bytes:
            raise UpdateRejected("shape", f"a params region of {len(out):,} bytes for blob "
                                 f"{self.blob_id:08x}, whose region is {self.region_bytes:,}: "
                                 f"{REJECT_REASONS['shape']}")
        for a in self.arrays:
            raw = np.ascontiguousarray(arrays[a.name], a.dtype.newbyteorder("<")).tobytes()
            out[a.offset : a.offset + len(raw)] = raw
        return bytes(out)

    def initial_arrays(self) -> dict[str, np.ndarray]:
        """The trainable arrays as the blob holds them (the fleet's round-0 global model)."""
        return self.split(self.initial + bytes(self.optimizer_bytes))

    def check(self, arrays: Mapping[str, np.ndarray], blob_id: int, steps: int,
              board: str = "a board") -> dict[str, np.ndarray]:
        """A board's update as the layout's exact dtypes, or UpdateRejected naming the first
        check it fails (REJECT_REASONS) and the board."""

        def refuse(reason: str, what: str) -> UpdateRejected:
            return UpdateRejected(reason, f"{board}: update refused ({reason}): {what}; "
                                  f"{REJECT_REASONS[reason]}")

        if blob_id != self.blob_id:
            raise refuse("blob_id", f"blob {blob_id & 0xFFFFFFFF:08x}, the fleet's is "
                         f"{self.blob_id:08x}")
        if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or \
                not 0 < steps <= MAX_TOTAL_STEPS:
            raise refuse("steps", f"steps {steps!r}")
        want = {a.name for a in self.arrays}
        if set(arrays) != want:
            extra, missing = sorted(set(arrays) - want), sorted(want - set(arrays))
            raise refuse("names", f"missing {missing}, unexpected {extra}")
        out = {}
        for a in self.arrays:
            v = np.asarray(arrays[a.name])
            if v.shape != a.shape:
                raise refuse("shape", f"{a.name} is {v.shape}, the blob's is {a.shape}")
            if v.dtype.kind not in "iuf":
                raise refuse("not_integer", f"{a.name} is of dtype {v.dtype}")
            if v.dtype.kind == "f":
                if not np.isfinite(v).all():
                    raise refuse("not_finite", f"{a.name} has {np.count_nonzero(~np.isfinite(v))}"
                                 " non-finite values")
                if (v != np.round(v)).any():
                    raise refuse("not_integer", f"{a.name} has fractional values")
            lo, hi = _RANGE[a.dtype]
            if v.size and (v.min() < lo or v.max() > hi):
                raise refuse("out_of_range", f"{a.name} spans [{v.min()}, {v.max()}], "
                             f"{a.dtype} holds [{lo}, {hi}]")
            out[a.name] = v.astype(a.dtype)
        return out


@dataclass(frozen=True)
class Update:
    """What one board sent back after a round: its name, its arrays (ParamsLayout.check'ed)
    and the local training steps it took (FedAvg's weight)."""

    board: str
    arrays: Mapping[str, np.ndarray]
    steps: int


def aggregate(layout: ParamsLayout, updates: Sequence[Update], method: str = "fedavg",
              seed: int = 0, round_: int = 0, beta: float = TRIM_BETA) -> dict[str, np.ndarray]:
    """The global arrays from the boards' updates: `fedavg` (mean weighted by steps),
    `fedmedian` (the element-wise median) or `trimmed` (the mean after cutting trimmed_count
    boards from each tail, element-wise), all in the real domain with the blob's scales (the
    module's docstring), a fraction rounded stochastically from (seed, round_)."""
    if method not in AGGREGATIONS:
        raise TinypropError(f"aggregation {method!r} is unknown; use one of "
                            f"{', '.join(AGGREGATIONS)}")
    if not updates:
        raise TinypropError("no update to aggregate: every board of the round failed")
    steps = np.array([u.steps for u in updates], np.int64)
    if int(steps.sum()) > MAX_TOTAL_STEPS:
        raise TinypropError(f"{int(steps.sum()):,} steps in one round overflow the exact sums; "
                            "train fewer local epochs")
    out = {}
    for a in layout.arrays:
        q = np.stack([np.asarray(u.arrays[a.name], np.int64) for u in updates])
        num, den = _mean_fraction(q, steps, method, beta)
        out[a.name] = _round_stochastic(num, den, seed, round_, a.byte_offsets()).astype(a.dtype)
    return out


def trimmed_count(n: int, beta: float = TRIM_BETA) -> int:
    """Boards the trimmed mean cuts from each tail of `n`: floor(beta n), at least one from 3."""
    return min(max(int(beta * n), 1 if n >= 3 else 0), (n - 1) // 2)


def _mean_fraction(q: np.ndarray, steps: np.ndarray, method: str,
                   beta: float) -> tuple[np.ndarray, np.ndarray | int]:
    """The aggregate of integer stacks `q` (boards first) as an exact fraction num / den."""
    n = q.shape[0]
    if method == "fedavg":
        w = steps.reshape((n,) + (1,) * (q.ndim - 1))
        return (q * w).sum(axis=0), int(steps.sum())
    s = np.sort(q, axis=0)
    if method == "fedmedian":
        if n % 2:
            return s[n // 2], 1
        return s[n // 2 - 1] + s[n // 2], 2
    k = trimmed_count(n, beta)
    return s[k : n - k].sum(axis=0), n - 2 * k


def _round_stochastic(num: np.ndarray, den: int, seed: int, round_: int,
                      offsets: np.ndarray) -> np.ndarray:
    """num / den rounded: floor, plus one where r < the fraction (exact integer comparison of
    r x 2^24 x den with the remainder x 2^24); no remainder, no change."""
    whole, rem = np.divmod(num, den)  # floor division: 0 <= rem < den
    r = (uniform(seed, round_, offsets.ravel()).astype(np.float64) * _UNIT).astype(np.int64)
    return whole + (r.reshape(num.shape) * den < rem * _UNIT)


def _channel_scales(info, t, n: int) -> np.ndarray:
    """A const tensor's n per-channel scales (float32), or its one scale n times."""
    if t.n_scales and t.scales_offset != NONE32 and t.flags & T_CONST:
        return info.data(t.scales_offset, n, "<f4").astype(np.float32)
    return np.full(n, t.scale, np.float32)
