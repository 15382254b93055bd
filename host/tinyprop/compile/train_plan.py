"""Building the training program (tinyprop.program): what one training step computes, keeps and
frees, and where each buffer lives in the one arena. The NumPy reference follows the same
schedule; the blob packer writes it (the TRAN section), the memory report reads it.

Schedule of a step over ops 0..L (L produces the logits; a trailing SOFTMAX is not run):
  step k       forward op k (and, for a trained op with a RELU/RELU6, its 1-bit output mask)
  step L+1     loss: softmax cross-entropy on the dequantized logits -> logits gradient
  step L+2+j   backward of op L-j, down to the earliest op the scheme updates (E); each op's
               bias and weights are updated right there, so no gradient outlives its layer.

Gradient maps are float32, or int16 / int8 with one power-of-two exponent per map
(tinyprop.reference.gradmap): a per-blob choice (`convert --grad`), recorded in TRAN.
"""

from __future__ import annotations

import numpy as np

from ..errors import TinypropError
from ..frontend.graph import Graph, Op
from ..program import (
    DEFAULT_GRAD,
    DEFAULT_LOSS,
    F2_REDUCE_IN0,
    F2_REDUCE_IN1,
    F2_REDUCED,
    F_ACTIVE,
    F_BIAS,
    F_GRAD_IN0,
    F_GRAD_IN1,
    F_MASK,
    F_WEIGHT,
    F_ZERO_IN0,
    F_ZERO_IN1,
    GRAD_FORMATS,
    LOSSES,
    NONE32,
    TrainOp,
    TrainProgram,
)
from .memory import (
    Buf,
    Layout,
    choose_layout,
    extend_for_stage,
    plane_bytes,
    stage_buffers,
    tiled_tensors,
    whole_alias,
)
from .patch import PatchStage, act_inputs
from .planner import Buffer, plan_memory
from .scheme import SparseScheme

# an integer map's buffer: its exponent (int32) and 4 bytes of padding, then the values
MAP_HEADER = 8
ELEM_BYTES = {"float32": 4, "int16": 2, "int8": 1}

# Dead channels (all-zero weights) get tiny scales; QAS divides by the scale, so floor it at
# this fraction of the layer's median channel scale.
SCALE_FLOOR_FRACTION = 0.01


def _align4(n: int) -> int:
    return (n + 3) // 4 * 4


def grad_buffer_bytes(fmt: str, elems: int) -> int:
    """Bytes of a gradient buffer of `elems` values in format `fmt` (an integer map's values
    padded to a multiple of 8)."""
    return 4 * elems if fmt == "float32" else MAP_HEADER + (ELEM_BYTES[fmt] * elems + 7) // 8 * 8


def sums_buffer_bytes(channels: int) -> int:
    """A sink's gradient buffer: the exponent (and padding), then one int64 sum a channel."""
    return MAP_HEADER + 8 * channels


def map_rows(shape: tuple[int, ...]) -> tuple[int, int]:
    """(rows, values a row) of a map written by a gradient kernel: an NHWC tensor's image rows,
    anything else one row."""
    n = int(np.prod(shape))
    return (shape[1], n // shape[1]) if len(shape) == 4 else (1, n)


def backward_scratch(graph: Graph, op: Op, flags: int, fmt: str, row_len: int) -> int:
    """Scratch bytes of op's backward step (firmware tp_backward_scratch_bytes): one float32
    row of weight gradient when it trains weights; with integer maps, also each input
    gradient's row shifts (a byte a row) and what its kernel asks for (OpSpec.grad_scratch:
    a weighted op's int32 accumulator rows, one, or two for a depthwise op, which folds each dY
    row once for a band of two dX rows; a 1x1 conv's per-channel shifts)."""
    need = 4 * row_len if flags & F_WEIGHT else 0
    if fmt == "float32":
        return need
    if flags & (F_GRAD_IN0 | F_GRAD_IN1):
        rows, row_elems = map_rows(graph.tensors[op.inputs[0]].shape)
        per_elem, per_chan = op.spec.grad_scratch
        out = graph.tensors[op.outputs[0]].shape
        grad = _align4(rows) + per_elem * row_elems + per_chan * (out[-1] if out else 1)
        need = max(need, grad)
    return (need + 7) // 8 * 8


def build_program(graph: Graph, scheme: SparseScheme, momentum: bool = False,
                  patch: str | PatchStage = "auto", input_rows: bool = False,
                  limit: int | None = None, grad: str = DEFAULT_GRAD,
                  loss: str = DEFAULT_LOSS) -> TrainProgram:
    """The program of `scheme` on `graph`; `momentum` plans a float32 velocity per trained
    parameter (the optimizer state, after the params in their region). `patch` (memory.py's
    choose_layout): "auto" runs the ops before the earliest trained one tile by tile when that
    is what fits `limit` bytes of arena with the fewest recomputed MACs (no stage without a
    limit), "min" for the smallest arena, "none" never, or a given stage (when it is still
    frozen under this scheme, then without in-place ops: auto's cheap costing); `input_rows`
    reads the input in row bands; `grad` is the gradient maps' format (GRAD_FORMATS); `loss`
    what the step minimises (LOSSES: mse keeps the input in the arena until the loss reads it)."""
    if grad not in GRAD_FORMATS:
        raise TinypropError(f"--grad {grad}: unknown; use one of {', '.join(GRAD_FORMATS)}")
    tens = graph.tensors
    L = graph.logits_op().index
    check_loss(graph, loss, input_rows)
    E = scheme.earliest()

    def bstep(k: int) -> int:
        return L + 2 + (L - k)

    alias: dict[int, int] = {}
    for op in graph.ops[: L + 1]:
        if op.spec.view:
            alias[op.outputs[0]] = alias.get(op.inputs[0], op.inputs[0])

    def root(t: int) -> int:
        return alias.get(t, t)

    # which tensors depend on trained parameters (their gradient is needed)
    depends: dict[int, bool] = {}
    for op in graph.ops[: L + 1]:
        depends[op.outputs[0]] = op.index in scheme.layers or any(
            depends.get(i, False) for i in act_inputs(graph, op))

    ops: dict[int, TrainOp] = {}
    params_off = n_velocity = 0
    trainable: dict[int, int] = {}
    held: dict[int, tuple[list[int], bool]] = {}
    for op in graph.ops[E : L + 1]:
        if not depends.get(op.outputs[0], False):
            continue
        flags = F_ACTIVE
        for pos, ti in enumerate(act_inputs(graph, op)):
            if depends.get(ti, False):
                flags |= F_GRAD_IN0 if pos == 0 else F_GRAD_IN1
        if op.activation in ("RELU", "RELU6"):
            flags |= F_MASK
        t = TrainOp(op.index, flags)
        lu = scheme.layers.get(op.index)
        if lu is not None:
            w = tens[op.inputs[1]]
            t.n_out = w.shape[-1] if op.spec.channels_last else w.shape[0]
            t.row_len = w.size // t.n_out
            t.velocity = n_velocity
            if lu.bias and len(op.inputs) > 2 and op.inputs[2] >= 0:
                t.flags |= F_BIAS
                t.bias_params = params_off
                trainable[op.inputs[2]] = params_off
                params_off += 4 * t.n_out
                n_velocity += t.n_out
            if lu.weights:
                t.flags |= F_WEIGHT
                t.channels = sorted(lu.channels)
                # RAM holds only the trained rows; the forward reads the others from the blob
                t.weight_params = params_off
                trainable[op.inputs[1]] = params_off
                held[op.inputs[1]] = (t.channels, op.spec.channels_last)
                params_off = _align4(params_off + len(t.channels) * t.row_len)
                n_velocity += len(t.channels) * t.row_len
            if t.flags & (F_BIAS | F_WEIGHT):
                s = w.scale.astype(np.float32)
                t.scale_floor = float(np.float32(SCALE_FLOOR_FRACTION) * np.median(s))
        ops[op.index] = t

    created = {root(graph.ops[L].outputs[0])}
    writers: dict[int, list[tuple[int, int]]] = {}  # gradient buffer -> (op, input position)
    for k in sorted(ops, reverse=True):
        for pos, (need, zero) in enumerate(((F_GRAD_IN0, F_ZERO_IN0), (F_GRAD_IN1, F_ZERO_IN1))):
            if ops[k].flags & need:
                r = root(act_inputs(graph, graph.ops[k])[pos])
                writers.setdefault(r, []).append((k, pos))
                if r not in created:
                    ops[k].flags |= zero
                    created.add(r)
    sums: dict[int, int] = {}  # gradient buffers holding a sink's channel sums -> channels
    if grad != "float32":
        for k, t in ops.items():
            out = graph.ops[k].outputs[0]
            w = writers.get(out, [])
            if (t.flags & (F_BIAS | F_WEIGHT | F_GRAD_IN0 | F_GRAD_IN1) == F_BIAS and len(w) == 1
                    and act_inputs(graph, graph.ops[w[0][0]])[w[0][1]] == out):
                t.flags2 |= F2_REDUCED
                ops[w[0][0]].flags2 |= F2_REDUCE_IN0 if w[0][1] == 0 else F2_REDUCE_IN1
                sums[out] = tens[out].shape[-1]

    def build(stage: PatchStage | None, inplace: frozenset[int]) -> Layout:
        return train_layout(graph, ops, alias, L, stage, inplace, grad, sums, loss == "mse")

    if isinstance(patch, PatchStage):  # auto's trials: a stage chosen before (if still frozen)
        layout = build(patch if patch.n_ops <= E else None, frozenset())
    else:
        layout = choose_layout(graph, build, E, patch, input_rows, limit)
    where = {b.name: off for b, off in zip(layout.buffers, layout.offsets, strict=True)}
    act_offset = {t.index: off for t in tens
                  if (off := layout.tensor_offset(t.index)) is not None}
    grad_offset = {t.index: where[Buf("g", root(t.index))] for t in tens
                   if Buf("g", root(t.index)) in where}
    for k, t in ops.items():
        t.mask_offset = where.get(Buf("m", k), NONE32)
        t.scratch_offset = where.get(Buf("s", k), NONE32)
    return TrainProgram(graph, scheme, E, L, ops, act_offset, grad_offset, layout.buffers,
                        layout.offsets, layout.arena, params_off, trainable, alias, held,
                        4 * n_velocity if momentum else 0, layout, grad, loss)


def check_loss(graph: Graph, loss: str, input_rows: bool) -> None:
    """Refuse a loss the model cannot have: mse compares the output with the input, so both
    hold as many values and the whole input stays in the arena."""
    if loss not in LOSSES:
        raise TinypropError(f"--loss {loss}: unknown; use one of {', '.join(LOSSES)}")
    if loss != "mse":
        return
    x, y = graph.input, graph.tensors[graph.logits_op().outputs[0]]
    if x.size != y.size:
        raise TinypropError(f"--loss mse: the model maps {x.size} inputs to {y.size} outputs; an "
                            "autoencoder reconstructs its input, so give a model whose output "
                            "has the input's size (or drop --loss mse for a classifier)")
    if input_rows:
        raise TinypropError("--loss mse with --input-rows: the loss reads the whole input after "
                            "the forward pass; drop --input-rows")


def train_layout(graph: Graph, ops: dict[int, TrainOp], alias: dict[int, int], L: int,
                 stage: PatchStage | None, inplace: frozenset[int], grad: str = DEFAULT_GRAD,
                 sums: dict[int, int] | None = None, keep_input: bool = False) -> Layout:
    """The training step's arena: activations (an op's input kept until its backward when its
    weight or input gradient reads it), masks, gradients in format `grad` (`sums`: the buffers
    holding a sink's channel sums) and the backward scratch, with lifetimes in schedule steps;
    a tiled stage's buffers and in-place ops' channel buffers as in the inference plan
    (memory.py); `keep_input`: the input until the loss (mse's target)."""
    tens = graph.tensors
    sums = sums or {}

    def grad_bytes(r: int) -> int:
        if r in sums:
            return sums_buffer_bytes(sums[r])
        return grad_buffer_bytes(grad, tens[r].size)

    def bstep(k: int) -> int:
        return L + 2 + (L - k)

    act = whole_alias(graph, graph.ops[: L + 1], inplace)  # activations (in place included)

    def root(t: int) -> int:  # gradients: RESHAPE shares, an in-place op does not
        return alias.get(t, t)

    life: dict[Buf, list[int]] = {}
    sizes: dict[Buf, int] = {}
    skip = tiled_tensors(stage)

    def use(name: Buf, size: int, step: int) -> None:
        sizes[name] = max(sizes.get(name, 0), size)
        lo_hi = life.setdefault(name, [step, step])
        lo_hi[0] = min(lo_hi[0], step)
        lo_hi[1] = max(lo_hi[1], step)

    def use_act(ti: int, step: int) -> None:
        if ti not in skip:
            use(Buf("a", act.get(ti, ti)), tens[ti].size, step)

    use_act(graph.inputs[0], 0)
    for op in graph.ops[: L + 1]:
        for ti in act_inputs(graph, op) + [op.outputs[0]]:
            use_act(ti, op.index)
    use_act(graph.ops[L].outputs[0], L + 1)
    for k, t in ops.items():
        op = graph.ops[k]
        if t.flags & F_WEIGHT or (op.spec.grad_reads_input and t.flags & F_GRAD_IN0):
            use_act(op.inputs[0], bstep(k))
        if t.flags & F_MASK:
            n = tens[op.outputs[0]].size
            use(Buf("m", k), (n + 7) // 8, k)
            use(Buf("m", k), (n + 7) // 8, bstep(k))
        scratch = backward_scratch(graph, op, t.flags, grad, t.row_len)
        if scratch:
            use(Buf("s", k), scratch, bstep(k))
        # gradient of the output: written by the loss or by consumers, read here
        out = root(op.outputs[0])
        use(Buf("g", out), grad_bytes(out), bstep(k))
        for pos, ti in enumerate(act_inputs(graph, op)):
            if t.flags & (F_GRAD_IN0 if pos == 0 else F_GRAD_IN1):
                use(Buf("g", root(ti)), grad_bytes(root(ti)), bstep(k))
    logits = root(graph.ops[L].outputs[0])
    use(Buf("g", logits), grad_bytes(logits), L + 1)
    if keep_input:
        use_act(graph.inputs[0], L + 1)
    spans = {n.index: v for n, v in life.items() if n.kind == "a"}
    extend_for_stage(spans, stage, act)
    in_name = Buf("a", act.get(graph.inputs[0], graph.inputs[0]))
    # in the order of the names as text ("a10" before "a2"): the planner breaks ties by the
    # buffers' order, and the blobs' bytes follow
    buffers = [Buffer(n, sizes[n], *life[n], 0 if n == in_name else None)
               for n in sorted(life, key=str)]
    buffers += [Buffer(Buf("c", k), plane_bytes(graph, k), k, k) for k in sorted(inplace)]
    if stage is not None:
        buffers += stage_buffers(stage)
    offsets, total = plan_memory(buffers)
    return Layout(buffers, offsets, total, act, stage, frozenset(inplace))
