"""The training program: what one training step computes on which op (the TRAN flags of
`TrainOp`), where its parameters sit in the params region, and, once compile/ has planned it,
where its buffers sit in the arena (`TrainProgram`).

compile/train_plan.py builds it (and packs it: the TRAN section); the NumPy reference
(reference/backward.py) runs it. Both import it from here, so neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from . import blob_layout
from .frontend.graph import Graph

if TYPE_CHECKING:  # annotations only: the plan's types are compile/'s
    from .compile.memory import Layout
    from .compile.planner import Buffer
    from .compile.scheme import SparseScheme

NONE32 = blob_layout.CONSTANTS["NONE32"][0]
F_BIAS, F_WEIGHT, F_MASK, F_GRAD_IN0, F_GRAD_IN1, F_ACTIVE = 1, 2, 4, 8, 16, 32
# set on the first op (in backward order) that writes a gradient buffer: it zeroes it first
F_ZERO_IN0, F_ZERO_IN1 = 64, 128
# TRAN's second flags byte. With integer maps, an op that trains only its bias and needs no
# input gradient (a "sink": op E, typically) reads nothing of its output's gradient but the
# per-channel sums; when one op writes that gradient, it adds its rows straight into those sums
# (masked by the sink's RELU mask) and no map of it is ever stored.
F2_REDUCED = 1  # the sink: its output's gradient buffer holds per-channel sums
F2_REDUCE_IN0, F2_REDUCE_IN1 = 2, 4  # the writer: input 0's (1's) gradient goes into such sums
TRAN_HEADER = blob_layout.TRAN_HEADER.struct
TRAN_OFFSET = blob_layout.TRAN_OFFSET.struct
TRAN_OP = blob_layout.TRAN_OP.struct
# --grad: the gradient maps' format, and its id in TRAN (tinyprop.reference.gradmap)
GRAD_FORMATS = {"float32": 0, "int16": 1, "int8": 2}
DEFAULT_GRAD = "int8"  # int8 maps lose nothing against float32 (docs/benchmarks.md)
# --loss: what the step minimises, and its id in TRAN. xent: softmax cross-entropy of the
# logits and the label; mse: mean squared error of the output against the input (an
# autoencoder learning to reconstruct what it is shown)
LOSSES = {"xent": 0, "mse": 1}
DEFAULT_LOSS = "xent"


@dataclass
class TrainOp:
    op: int
    flags: int
    mask_offset: int = NONE32
    scratch_offset: int = NONE32
    channels: list[int] = field(default_factory=list)
    scale_floor: float = 0.0
    bias_params: int = NONE32
    weight_params: int = NONE32
    row_len: int = 0
    n_out: int = 0
    # momentum: index of the op's first float32 velocity (its biases', then its held rows' in
    # row order); velocities follow the params layout, op by op in ascending order
    velocity: int = 0
    flags2: int = 0  # F2_*


@dataclass
class TrainProgram:
    graph: Graph
    scheme: SparseScheme
    first: int  # E
    logits: int  # L
    ops: dict[int, TrainOp]
    act_offset: dict[int, int]
    grad_offset: dict[int, int]
    buffers: list[Buffer]
    buffer_offsets: list[int]
    arena_bytes: int
    params_bytes: int
    trainable_offsets: dict[int, int]  # tensor index -> params offset (weights: held rows)
    alias: dict[int, int]
    # weight tensor index -> (output channels held in RAM, ascending; depthwise?)
    held_rows: dict[int, tuple[list[int], bool]] = field(default_factory=dict)
    # momentum: one float32 velocity per trained parameter, after the params in their region
    optimizer_bytes: int = 0
    layout: Layout | None = None  # the arena plan: tiled stage, in-place ops (memory.py)
    grad: str = DEFAULT_GRAD  # the gradient maps' format (GRAD_FORMATS)
    loss: str = DEFAULT_LOSS  # what the step minimises (LOSSES)

    @property
    def region_bytes(self) -> int:
        """The params region the device keeps across steps: parameters, then optimizer state."""
        return self.params_bytes + self.optimizer_bytes

    @property
    def memory_bytes(self) -> int:
        """What a budget must hold: the training arena's peak and the params region."""
        return self.arena_bytes + self.region_bytes

    def backward_order(self) -> list[int]:
        return [k for k in range(self.logits, self.first - 1, -1) if k in self.ops]

    def pack(self) -> bytes:
        """The TRAN section. Held weight rows are described in the OPS records (held_map)."""
        n_t = len(self.graph.tensors)
        out = bytearray(TRAN_HEADER.pack(self.first, self.logits, len(self.ops),
                                         GRAD_FORMATS[self.grad], n_t, LOSSES[self.loss], 0))
        for offsets in (self.act_offset, self.grad_offset):
            out += b"".join(TRAN_OFFSET.pack(offsets.get(i, NONE32)) for i in range(n_t))
        for k in sorted(self.ops):
            t = self.ops[k]
            out += TRAN_OP.pack(t.op, t.flags, t.flags2, t.mask_offset, t.scratch_offset,
                                len(t.channels), t.scale_floor, t.bias_params)
        return bytes(out)

    def held_map(self, k: int) -> np.ndarray | None:
        """Op k's u16 map from output channel to held row (0xFFFF: read from the blob), or
        None when op k holds no weights in RAM."""
        t = self.ops.get(k)
        if t is None or not t.flags & F_WEIGHT:
            return None
        m = np.full(t.n_out, 0xFFFF, np.uint16)
        m[t.channels] = np.arange(len(t.channels), dtype=np.uint16)
        return m

    # -- parameters region <-> tensors --
    def pack_params(self, values: dict[int, np.ndarray]) -> bytes:
        """Params region bytes from the full bias/weight arrays (tensor index -> array): biases
        whole, weights as their held rows only."""
        buf = bytearray(self.params_bytes)
        for ti, off in self.trainable_offsets.items():
            arr = values[ti]
            if ti in self.held_rows:
                channels, depthwise = self.held_rows[ti]
                arr = weight_rows(arr, depthwise)[channels]
            raw = arr.astype("<i4" if self.graph.tensors[ti].dtype == "int32"
                             else np.int8).tobytes()
            buf[off : off + len(raw)] = raw
        return bytes(buf)

    def unpack_params(self, raw: bytes) -> dict[int, np.ndarray]:
        """Every trainable tensor's full array from a params region (rows not held keep the
        model's values: they never change)."""
        out = {}
        for ti, off in self.trainable_offsets.items():
            t = self.graph.tensors[ti]
            if ti in self.held_rows:
                channels, depthwise = self.held_rows[ti]
                full = t.data.copy()
                rows = weight_rows(full, depthwise)
                held = np.frombuffer(raw, np.int8, len(channels) * rows.shape[1], off)
                rows[channels] = held.reshape(len(channels), -1)
                out[ti] = full
            else:
                out[ti] = np.frombuffer(raw, "<i4", t.size, off).reshape(t.shape).astype(
                    t.data.dtype)
        return out


def weight_rows(w: np.ndarray, depthwise: bool) -> np.ndarray:
    """A view of weights as one row per output channel: (O, KH*KW*I) for CONV_2D and
    FULLY_CONNECTED, (C, KH*KW) taps for DEPTHWISE_CONV_2D's (1, KH, KW, C)."""
    return w.reshape(-1, w.shape[3]).T if depthwise else w.reshape(w.shape[0], -1)
