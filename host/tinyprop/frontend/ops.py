"""The op registry: one entry per op kind, the one place the host says what a kind is.

Every module asks an op's `OpSpec` (`spec(op.kind)`) instead of naming kinds: the reader
which kinds it reads and which inputs are parameters, opparams how to prepare one, the
reference how to run one forward and backward, the planner what may alias, tile or run in place.
Adding an op is its entry here (`register`) and the functions the entry names.

A built-in entry names its functions ("module:function", resolved on first use, as entry
points are): they live in modules that import the graph IR, which imports this one, so naming
them breaks the cycle. An entry made elsewhere (a test's) may pass the functions themselves.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass

Hook = Callable | str | None


@dataclass(frozen=True)
class OpSpec:
    kind: str  # the TFLite builtin operator's name, as the graph IR's Op.kind
    code: int  # its blob code: its row's in firmware/core/tp_ops.h
    # opparams: fills the op's integer parameters, (graph, op, OpParams) -> None
    params: Hook = None
    # the reference kernel: (graph, op, OpParams, values by tensor index) -> its int8 output
    forward: Hook = None
    # the reference gradient of an activation input (not for weighted ops, whose gradient and
    # update the trainer computes): float32 maps, (graph, op, OpParams, input position, dY,
    # that input's gradient so far, the step's forward values by tensor index) -> its
    # gradient; integer maps, (graph, op, OpParams, input position, dY as a GradMap, the
    # forward values) -> (exact int64 values, their exponent). None: it passes nothing (a view
    # shares its input's gradient buffer)
    grad: Hook = None
    grad_int: Hook = None
    # its input gradient reads its forward input (a max pool's argmax): the training plan
    # keeps that input until the op's backward
    grad_reads_input: bool = False
    # constant int8 weights per output channel (input 1) and an optional int32 bias (input
    # 2): what training updates
    weighted: bool = False
    # the weights hold the output channels on their last dimension (depthwise), else the first
    channels_last: bool = False
    # the backward scratch its integer-map input gradient needs beyond the row shifts: bytes
    # per element of an input row (its kernel's int32 accumulator rows) and per output channel
    # (tp_ops.h's q_row, q_chan)
    grad_scratch: tuple[int, int] = (0, 0)
    act_inputs: int = 1  # its leading inputs that are activations (the others are constants)
    const_operand: bool = False  # input 1 is a constant operand (shape, axes, paddings)
    view: bool = False  # the output is the input's bytes as another shape: one buffer
    # how an output window of a tile reads its input (patch.py): "kernel" (a window of taps by
    # stride and padding), "shift" (the same window moved by the padding before it), "same"
    # (the same window, elementwise); None: it cannot run in a tiled stage
    window: str | None = None
    # with depth multiplier 1, output channel c reads only input channel c: it may overwrite
    # its input channel by channel (memory.py's in-place ops)
    channelwise: bool = False
    # a final op the training step does not run: the loss is computed on its input
    loss_head: bool = False

    def hook(self, name: str) -> Callable | None:
        """The function field `name` names (None: the op has none)."""
        h = getattr(self, name)
        return _resolve(h) if isinstance(h, str) else h


@functools.cache
def _resolve(name: str) -> Callable:
    module, _, attr = name.partition(":")
    return getattr(importlib.import_module(module), attr)


_REGISTRY: dict[str, OpSpec] = {}


def register(s: OpSpec) -> OpSpec:
    """Add an op kind (a kind or a code already taken is refused)."""
    taken = next((o for o in _REGISTRY.values() if o.code == s.code), None)
    if s.kind in _REGISTRY or taken is not None:
        raise ValueError(f"op {s.kind} (code {s.code}): kind or code already registered"
                         f"{f' by {taken.kind}' if taken else ''}")
    _REGISTRY[s.kind] = s
    return s


def unregister(kind: str) -> None:
    """Remove an op kind (a test's own op, after the test)."""
    del _REGISTRY[kind]


def spec(kind: str) -> OpSpec:
    return _REGISTRY[kind]


def kinds() -> tuple[str, ...]:
    """Every registered kind, in blob code order."""
    return tuple(sorted(_REGISTRY, key=lambda k: _REGISTRY[k].code))


_P = "tinyprop.frontend.opparams:"
_F = "tinyprop.reference.forward:"
_B = "tinyprop.reference.backward:"
BUILTIN = (
    OpSpec("CONV_2D", 1, _P + "conv_params", _F + "run_conv2d", weighted=True,
           grad_scratch=(4, 2), window="kernel"),
    OpSpec("DEPTHWISE_CONV_2D", 2, _P + "conv_params", _F + "run_depthwise_conv2d",
           weighted=True, channels_last=True, grad_scratch=(8, 0), window="kernel",
           channelwise=True),
    OpSpec("FULLY_CONNECTED", 3, _P + "fc_params", _F + "run_fully_connected", weighted=True,
           grad_scratch=(4, 2)),
    OpSpec("ADD", 4, _P + "add_params", _F + "run_add", _B + "add_grad", _B + "add_grad_int",
           act_inputs=2, window="same"),
    OpSpec("AVERAGE_POOL_2D", 5, _P + "pool_params", _F + "run_average_pool",
           _B + "pool_grad", _B + "pool_grad_int", window="kernel"),
    OpSpec("MEAN", 6, _P + "mean_params", _F + "run_mean", _B + "mean_grad",
           _B + "mean_grad_int", const_operand=True),
    OpSpec("PAD", 7, None, _F + "run_pad", _B + "pad_grad", _B + "pad_grad_int",
           const_operand=True, window="shift"),
    OpSpec("RESHAPE", 8, None, _F + "run_reshape", const_operand=True, view=True),
    OpSpec("SOFTMAX", 9, _P + "softmax_op_params", _F + "run_softmax", loss_head=True),
    OpSpec("MAX_POOL_2D", 10, _P + "pool_params", _F + "run_max_pool", _B + "max_pool_grad",
           _B + "max_pool_grad_int", grad_reads_input=True, window="kernel"),
)
for _op in BUILTIN:
    register(_op)
