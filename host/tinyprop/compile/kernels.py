"""Which forward kernel each op runs on a target, the scratch it asks for, and where that
scratch lives in both arena plans (the blob's SCRA section, docs/blob-format.md).

A target names the kernel set its firmware builds: `cortex-m4` (also `cortex-m7`,
`cortex-m33`): the Cortex-M DSP kernels of firmware/core/kernels/arm/ for CONV_2D and 3x3
DEPTHWISE_CONV_2D, the reference kernels for the rest; `ref`: the reference kernels only (any
CPU). A board's descriptor names its target (boards/<name>/profile.json: kernels). This module
mirrors the C side: `scratch_bytes` is each DSP kernel's `*_scratch_bytes`, `dsp_channels_ok`
its `tp_dsp_prepare` (tests check both against the C).

Scratch is planned after the activations, into the finished plans (first fit, never moving an
activation): an op's scratch lives only during its own step. When a limit is given (a budget
minus the reserve), scratch that would push the device's memory (the larger arena plus the
params region) past it is not planned, and that op runs the reference kernel: the same bits,
more instructions. The reference kernels need no scratch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import blob_layout
from ..errors import TinypropError
from ..frontend.graph import Graph, Op
from ..frontend.opparams import op_params
from ..program import weight_rows
from .memory import Layout, plan_inference
from .patch import input_need, tile_pad
from .planner import ALIGN, Buffer, first_fit

# target name -> the SCRA target id (the kernel set): 0 reference, 1 Cortex-M DSP
TARGETS = {"ref": 0, "cortex-m4": 1, "cortex-m7": 1, "cortex-m33": 1}
DEFAULT_TARGET = "cortex-m4"
TARGET_KERNELS = {0: "reference", 1: "Cortex-M DSP"}

SCRA_HEADER = blob_layout.SCRA_HEADER.struct
SCRA_OP = blob_layout.SCRA_OP.struct
NONE32 = 0xFFFFFFFF

# firmware/core/kernels/arm/: tp_conv_arm.c, tp_conv3x3_rgb_arm.c and tp_depthwise_arm.c
CONV_PIXEL_BLOCK = 32
CONV_RQ_BYTES = 24
RGB_WORDS = 14
RGB_PAIRS = 8  # pixel pairs whose windows tp_arm_conv3x3_rgb_s8 converts at once
DW_ROW = 64
DW_PLANES = 4


def _align4(n: int) -> int:
    return (n + 3) & ~3


def check_target(target: str) -> int:
    """The kernel-set id of a target name; a clear error for an unknown one."""
    if target not in TARGETS:
        raise TinypropError(f"--target {target}: unknown; use one of {', '.join(TARGETS)}")
    return TARGETS[target]


def _geometry(graph: Graph, op: Op) -> tuple[tuple[int, ...], tuple[int, ...], dict]:
    p = op_params(graph, op)
    return graph.tensors[op.inputs[0]].shape, graph.tensors[op.outputs[0]].shape, p.geometry


def conv_scratch_bytes(k: tuple[int, int], pad: tuple[int, int], cin: int, out_hw: tuple[int, int],
                       cout: int) -> int:
    """tp_arm_conv2d_s8_scratch_bytes: the requantization table, the block's int16 columns,
    a group of four channels' int16 weights, and im2col's two int8 columns for a window beyond
    1x1; for a 3x3 window over three channels (tp_arm_conv3x3_rgb_scratch_bytes), the table,
    every group of four channels' int16 weights (and two end words), RGB_PAIRS pixel pairs' int16
    windows and one int8 window."""
    if conv3x3_rgb(k, cin):
        return (CONV_RQ_BYTES * cout + 4 * (4 * RGB_WORDS + 2) * ((cout + 3) // 4)
                + 8 * RGB_WORDS * RGB_PAIRS + 28)
    k4 = _align4(k[0] * k[1] * cin)
    n_pix = out_hw[0] * out_hw[1]
    pixels = n_pix + (n_pix & 1) if n_pix < CONV_PIXEL_BLOCK else CONV_PIXEL_BLOCK
    pointwise = tuple(k) == (1, 1) and tuple(pad) == (0, 0)
    return CONV_RQ_BYTES * cout + 2 * pixels * k4 + 8 * k4 + 8 + (0 if pointwise else 2 * k4)


def conv3x3_rgb(k: tuple[int, int], cin: int) -> bool:
    """tp_arm_conv3x3_rgb_covers: the CONV_2D kernel of a 3x3 window over three channels."""
    return tuple(k) == (3, 3) and cin == 3


def depthwise_covered(k: tuple[int, int], stride: tuple[int, int]) -> bool:
    return tuple(k) == (3, 3) and stride[0] in (1, 2) and stride[1] in (1, 2)


def depthwise_scratch_bytes(k: tuple[int, int], stride: tuple[int, int], out_h: int) -> int:
    """tp_arm_depthwise_conv2d_s8_scratch_bytes: a band of DW_PLANES channel planes (int16
    rows of DW_ROW; a band of 16 output rows, 6 for a stride of 2 down); 0 where it runs the
    reference kernel."""
    if not depthwise_covered(k, stride):
        return 0
    rows = (min(out_h, 16 if stride[0] == 1 else 6) - 1) * stride[0] + 3
    return rows * DW_PLANES * DW_ROW * 2


def scratch_bytes(target: str, graph: Graph, op: Op, stage=None) -> int:
    """What `target`'s kernel for `op` asks for (0: none, or the reference kernel); for an op
    of a tiled stage (patch.PatchStage), the most any of its tiles asks for."""
    if check_target(target) == 0 or op.kind not in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        return 0
    shape_in, shape_out, geo = _geometry(graph, op)
    calls = [(geo["pad"], geo["out_hw"])]
    if stage is not None and op.index < stage.n_ops:
        p = op_params(graph, op)
        pos = stage.tensors.index(op.outputs[0])
        calls = []
        for tile in stage.windows:
            out = tile[pos]
            need = input_need(op, p, out, shape_in[1:3])
            calls.append((tile_pad(op, p, out, need), (out.h, out.w)))
    if op.kind == "CONV_2D":
        return max(conv_scratch_bytes(geo["k"], pad, shape_in[3], hw, shape_out[3])
                   for pad, hw in calls)
    return max(depthwise_scratch_bytes(geo["k"], geo["stride"], hw[0]) for _, hw in calls)


def dsp_channel_ok(bias: int, shift: int, taps: int, abs_weights: int, in_zp: int) -> bool:
    """tp_dsp_prepare: whether the DSP kernels' one-multiply requantization is exact for a
    channel (|acc << left| < 2^30 and a right shift of at most 22, from the bound any weights
    allow, else from the row's own; a row of zeros is a constant output)."""
    left, e = max(shift, 0), max(-shift, 0)
    dev = max(in_zp + 128, 127 - in_zp)

    def fits(bound: int) -> bool:
        return e <= 22 and bound < (1 << 30) >> left

    return (fits(abs(bias) + taps * 128 * dev) or abs_weights == 0
            or fits(abs(bias) + abs_weights * dev))


def dsp_channels_ok(graph: Graph, op: Op) -> bool:
    """Every output channel of a weighted op passes dsp_channel_ok (its blob weights)."""
    p = op_params(graph, op)
    w = graph.tensors[op.inputs[1]].data.astype(np.int64)
    rows = weight_rows(w, op.spec.channels_last)
    bias = graph.tensors[op.inputs[2]].data if len(op.inputs) > 2 and op.inputs[2] >= 0 else \
        np.zeros(len(rows), np.int64)
    sums = np.abs(rows).sum(axis=1)
    return all(dsp_channel_ok(int(bias[c]), int(p.shift[c]), rows.shape[1], int(sums[c]),
                              p.in_zp) for c in range(len(rows)))


@dataclass
class OpKernel:
    """One op's kernel on the target and its scratch in each plan ((offset, size); (NONE32, 0):
    none)."""

    op: int
    kind: str
    kernel: str  # what runs when the op has its scratch
    need: int  # scratch bytes the target's kernel asks for (0: none)
    infer: tuple[int, int] = (NONE32, 0)
    train: tuple[int, int] = (NONE32, 0)
    note: str = ""  # why an op that could run a DSP kernel runs the reference one

    def runs(self, plan: str) -> str:
        """The kernel that runs under `plan` ("infer", "train")."""
        size = (self.infer if plan == "infer" else self.train)[1]
        return self.kernel if self.need and size >= self.need else "reference"


@dataclass
class ScratchPlan:
    target: str
    ops: list[OpKernel]
    infer_arena: int  # the inference arena with its scratch
    train_arena: int  # the training arena with its scratch (0: no training program)
    base_infer_arena: int = 0  # the same without scratch: what scratch adds is the difference
    base_train_arena: int = 0
    limit: int | None = None
    notes: list[str] = field(default_factory=list)

    def pack(self) -> bytes:
        """The SCRA section."""
        out = bytearray(SCRA_HEADER.pack(len(self.ops), TARGETS[self.target], 0))
        for k in self.ops:
            out += SCRA_OP.pack(*k.infer, *k.train)
        return bytes(out)

    def rows(self) -> list[dict]:
        return [{"op": k.op, "kind": k.kind, "kernel_infer": k.runs("infer"),
                 "kernel_train": k.runs("train") if self.train_arena else None,
                 "scratch_infer": k.infer[1], "scratch_train": k.train[1], "note": k.note}
                for k in self.ops]


def _kernel_name(graph: Graph, op: Op) -> str:
    _, _, geo = _geometry(graph, op)
    k = "x".join(map(str, geo["k"]))
    if op.kind == "DEPTHWISE_CONV_2D":
        return f"dsp depthwise {k} s{geo['stride'][0]}"
    if conv3x3_rgb(geo["k"], graph.tensors[op.inputs[0]].shape[3]):
        return "dsp 3x3 rgb"
    return "dsp 1x1" if geo["k"] == (1, 1) and geo["pad"] == (0, 0) else f"dsp im2col {k}"


def plan_scratch(graph: Graph, target: str, program=None, params_bytes: int = 0,
                 limit: int | None = None, exact_only: bool = True,
                 infer: Layout | None = None) -> ScratchPlan:
    """Each op's kernel on `target` and its scratch in the inference plan (`infer`, default
    whole tensors) and, with a training `program` (train_plan.TrainProgram), the training
    plan; `limit` bounds the device's memory (the larger arena + `params_bytes`). An op whose
    DSP kernel would give it back to the reference kernel (dsp_channels_ok) gets no scratch,
    unless exact_only is False (tests)."""
    check_target(target)
    infer = infer if infer is not None else plan_inference(graph, "none")
    inf_bufs, inf_offsets, infer_arena = list(infer.buffers), list(infer.offsets), infer.arena
    trn_bufs = list(program.buffers) if program is not None else []
    trn_offsets = list(program.buffer_offsets) if program is not None else []
    train_arena = program.arena_bytes if program is not None else 0
    plan = ScratchPlan(target, [], infer_arena, train_arena, infer_arena, train_arena, limit)
    plans = {"infer": (inf_bufs, inf_offsets), "train": (trn_bufs, trn_offsets)}
    arenas = {"infer": infer_arena, "train": train_arena}

    def fit(bufs, offsets, size, step, arena, other) -> tuple[int, int] | None:
        b = Buffer("scratch", size, step, step)
        at = first_fit(bufs, offsets, b)
        grown = max(arena, at + (size + ALIGN - 1) // ALIGN * ALIGN)
        if limit is not None and max(grown, other) + params_bytes > limit:
            return None
        bufs.append(b)
        offsets.append(at)
        return at, grown

    for op in graph.ops:
        need = scratch_bytes(target, graph, op, infer.stage)
        entry = OpKernel(op.index, op.kind, _kernel_name(graph, op) if need else "reference",
                         need)
        plan.ops.append(entry)
        if not need:
            continue
        if exact_only and not dsp_channels_ok(graph, op):
            entry.need, entry.kernel = 0, "reference"
            entry.note = "accumulators too wide for the DSP requantization"
            continue
        # the inference plan, then the training step's forward (ops up to the logits)
        trains = program is not None and op.index <= program.logits
        for which in ["infer", "train"] if trains else ["infer"]:
            bufs, offsets = plans[which]
            other = "train" if which == "infer" else "infer"
            got = fit(bufs, offsets, need, op.index, arenas[which], arenas[other])
            if got is None:
                entry.note = "no room for its scratch under the budget" + (
                    " (training)" if which == "train" else "")
            else:
                setattr(entry, which, (got[0], need))
                arenas[which] = got[1]
    plan.infer_arena, plan.train_arena = arenas["infer"], arenas["train"]
    return plan


def read_scratch_plan(raw: bytes) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """The SCRA section's records: ((infer offset, size), (train offset, size)) per op."""
    n, _target, _ = SCRA_HEADER.unpack_from(raw)
    out = []
    for i in range(n):
        f = SCRA_OP.unpack_from(raw, SCRA_HEADER.size + i * SCRA_OP.size)
        out.append(((f[0], f[1]), (f[2], f[3])))
    return out
