"""The graph IR: tensors with int8 quantization, ops in execution order.

Small on purpose: it holds exactly what the reference engine, the scheme, the planner and the blob
packer need, and nothing of the flatbuffer it came from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .ops import OpSpec, spec

ACTIVATIONS = ("NONE", "RELU", "RELU6")


@dataclass
class Tensor:
    index: int
    name: str
    shape: tuple[int, ...]
    dtype: str  # "int8", "int32", "float32", ...
    scale: np.ndarray  # float32, one value (per tensor) or one a channel
    zero_point: np.ndarray  # int64, same length as scale
    quant_dim: int = 0
    data: np.ndarray | None = None  # constants only

    @property
    def size(self) -> int:
        return int(math.prod(self.shape))  # 1 for a scalar's ()

    @property
    def is_const(self) -> bool:
        return self.data is not None

    @property
    def zp(self) -> int:
        """Zero point of a per-tensor quantized activation."""
        return int(self.zero_point[0])

    @property
    def s(self) -> float:
        """Scale of a per-tensor quantized activation, as the float32 TFLite stores."""
        return float(self.scale[0])


@dataclass
class Op:
    index: int
    kind: str
    inputs: list[int]  # tensor indices; -1 for an absent optional input
    outputs: list[int]
    options: dict = field(default_factory=dict)

    @property
    def activation(self) -> str:
        return self.options.get("activation", "NONE")

    @property
    def spec(self) -> OpSpec:
        """What its kind is (ops.py)."""
        return spec(self.kind)


# one model: equal and hashed by identity, so what is derived from it can be cached per graph
@dataclass(eq=False)
class Graph:
    tensors: list[Tensor]
    ops: list[Op]
    inputs: list[int]
    outputs: list[int]
    name: str = "model"

    def tensor(self, i: int) -> Tensor:
        return self.tensors[i]

    @property
    def input(self) -> Tensor:
        return self.tensors[self.inputs[0]]

    @property
    def output(self) -> Tensor:
        return self.tensors[self.outputs[0]]

    def weighted_ops(self) -> list[Op]:
        return [op for op in self.ops if op.spec.weighted]

    def producer(self, tensor_index: int) -> Op | None:
        for op in self.ops:
            if tensor_index in op.outputs:
                return op
        return None

    def consumers(self, tensor_index: int) -> list[Op]:
        return [op for op in self.ops if tensor_index in op.inputs]

    def logits_op(self) -> Op:
        """The op whose output the loss is computed on: the producer of a final loss head's
        input (a SOFTMAX's), else the graph output's producer."""
        last = self.producer(self.outputs[0])
        if last is not None and last.spec.loss_head:
            prev = self.producer(last.inputs[0])
            if prev is not None:
                return prev
        assert last is not None
        return last
