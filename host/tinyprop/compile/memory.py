"""The inference memory plan: where each activation lives in the one arena when the model only
infers (the training plan is tinyprop.compile.train_plan's)."""

from __future__ import annotations

from ..frontend.graph import Graph
from .planner import Buffer, plan_memory


def plan_inference(graph: Graph) -> tuple[dict[int, int], int]:
    """Arena offsets of every activation for inference (RESHAPE aliases its input)."""
    alias, roots, bufs = inference_buffers(graph)
    offsets, total = plan_memory(bufs)
    placed = dict(zip(roots, offsets, strict=True))
    return {t.index: placed[alias.get(t.index, t.index)] for t in graph.tensors
            if alias.get(t.index, t.index) in placed}, total


def inference_buffers(graph: Graph) -> tuple[dict[int, int], list[int], list[Buffer]]:
    """The inference plan's buffers, one an activation (RESHAPE outputs alias their input):
    (alias, the root tensor of each buffer, the buffers with their op-step lifetimes)."""
    alias: dict[int, int] = {}
    for op in graph.ops:
        if op.kind == "RESHAPE":
            alias[op.outputs[0]] = alias.get(op.inputs[0], op.inputs[0])
    n = len(graph.ops)
    life: dict[int, list[int]] = {}
    for t in graph.tensors:
        if not t.is_const and t.dtype == "int8":
            root = alias.get(t.index, t.index)
            life.setdefault(root, [n + 1, -1])
    for step, op in enumerate(graph.ops):
        for ti in op.inputs + op.outputs:
            if ti >= 0 and not graph.tensors[ti].is_const:
                root = alias.get(ti, ti)
                if root in life:
                    life[root][0] = min(life[root][0], step)
                    life[root][1] = max(life[root][1], step)
    life[alias.get(graph.inputs[0], graph.inputs[0])][0] = 0
    life[alias.get(graph.outputs[0], graph.outputs[0])][1] = n
    roots = sorted(life)
    in_root = alias.get(graph.inputs[0], graph.inputs[0])
    bufs = [Buffer(f"t{r}", graph.tensors[r].size, *life[r], 0 if r == in_root else None)
            for r in roots]
    return alias, roots, bufs
