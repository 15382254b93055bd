"""Sparse-update schemes: which biases and which weight channels a training step changes.

A scheme names weighted ops by their index in the TFLite graph. The classifier (the op that
produces the logits) is always trained, bias and weights. Weight updates may cover a fraction of
an op's output channels (CONV_2D, FULLY_CONNECTED, DEPTHWISE_CONV_2D), chosen by importance;
RAM then holds only those channels' rows (a depthwise channel's row is its KH*KW taps).

JSON scheme file (``--scheme my.json``; docs/training.md)::

    {"bias_last": 6,                       # biases of the last 6 weighted ops
     "weights": [{"op": 26, "fraction": 0.5},   # half of op 26's output channels (and its bias)
                 {"op": 24, "bias": false}]}    # all of op 24's channels, not its bias

A fraction keeps the channels with the largest real-valued weight norm.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import TinypropError
from ..frontend import ops
from ..frontend.graph import Graph
from ..program import weight_rows


@dataclass
class LayerUpdate:
    op: int
    bias: bool = False
    channels: list[int] | None = None  # output channels whose weights change; None: no weights

    @property
    def weights(self) -> bool:
        return bool(self.channels)


@dataclass
class SparseScheme:
    name: str
    layers: dict[int, LayerUpdate] = field(default_factory=dict)

    def earliest(self) -> int:
        return min(self.layers)

    def describe(self) -> str:
        parts = []
        for op, lu in sorted(self.layers.items()):
            w = "" if not lu.weights else f"+w{len(lu.channels)}"
            parts.append(f"{op}{'b' if lu.bias else ''}{w}")
        return f"{self.name} [{' '.join(parts)}]"

    def to_json(self) -> dict:
        return {"name": self.name, "layers": [
            {"op": lu.op, "bias": lu.bias, "channels": lu.channels}
            for _, lu in sorted(self.layers.items())]}


def scheme_from_dict(d: dict) -> SparseScheme:
    """Inverse of SparseScheme.to_json (channels explicit: the blob's META section)."""
    return SparseScheme(d["name"], {int(x["op"]): LayerUpdate(int(x["op"]), bool(x["bias"]),
                                                              x["channels"])
                                    for x in d["layers"]})


def out_channels(graph: Graph, op_index: int) -> int:
    op = graph.ops[op_index]
    w = graph.tensors[op.inputs[1]]
    return w.shape[-1] if op.spec.channels_last else w.shape[0]


def channel_importance(graph: Graph, op_index: int, grad_norms: np.ndarray | None = None):
    """Importance of each output channel: the calibration gradient norm if given, else the
    real-valued weight norm (|w_q| * s_w)."""
    if grad_norms is not None:
        return np.asarray(grad_norms, np.float64)
    op = graph.ops[op_index]
    w = graph.tensors[op.inputs[1]]
    rows = weight_rows(w.data.astype(np.float64), op.spec.channels_last)
    norms = np.sqrt((rows ** 2).sum(1))
    return norms * np.broadcast_to(w.scale.astype(np.float64), norms.shape)


def pick_channels(graph: Graph, op_index: int, fraction: float,
                  grad_norms: np.ndarray | None = None) -> list[int]:
    n = out_channels(graph, op_index)
    k = max(1, min(n, math.ceil(fraction * n)))
    if k == n:
        return list(range(n))
    imp = channel_importance(graph, op_index, grad_norms)
    return sorted(int(i) for i in np.argsort(-imp, kind="stable")[:k])


def _classifier_kind(kind: str) -> bool:
    """Whether an op of `kind` may produce the logits: a weighted op each of whose output
    channels reads the whole input (not a depthwise one)."""
    s = ops.spec(kind)
    return s.weighted and not s.channels_last


def with_classifier(graph: Graph, scheme: SparseScheme) -> SparseScheme:
    cls = graph.logits_op().index
    if not _classifier_kind(graph.ops[cls].kind):
        heads = " or ".join(k for k in ops.kinds() if _classifier_kind(k))
        raise TinypropError(f"the logits come from op #{cls} {graph.ops[cls].kind}; tinyprop "
                            f"trains models whose logits come from {heads}")
    scheme.layers[cls] = LayerUpdate(cls, True, list(range(out_channels(graph, cls))))
    return scheme


def bias_only(graph: Graph, last: int | None = None) -> SparseScheme:
    weighted = [op.index for op in graph.weighted_ops()]
    chosen = weighted if last is None else weighted[-last:]
    s = SparseScheme("bias-only" if last is None else f"bias-last:{last}",
                     {i: LayerUpdate(i, bias=True) for i in chosen})
    return with_classifier(graph, s)


def last_k(graph: Graph, k: int) -> SparseScheme:
    weighted = [op.index for op in graph.weighted_ops()]
    s = SparseScheme(f"last:{k}", {i: LayerUpdate(i, True, list(range(out_channels(graph, i))))
                                   for i in weighted[-k:]})
    return with_classifier(graph, s)


def from_json(graph: Graph, path: Path) -> SparseScheme:
    try:
        spec = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise TinypropError(
            f"{path}: cannot read scheme JSON ({exc}); see docs/training.md") from exc
    weighted = [op.index for op in graph.weighted_ops()]
    s = SparseScheme(Path(path).stem)
    for i in weighted[len(weighted) - int(spec.get("bias_last", 0)):] if spec.get(
            "bias_last") else []:
        s.layers[i] = LayerUpdate(i, bias=True)
    for item in spec.get("weights", []):
        op = int(item["op"])
        if op not in weighted:
            raise TinypropError(f"{path}: op {op} has no weights; weighted ops are {weighted}")
        lu = s.layers.setdefault(op, LayerUpdate(op, bias=bool(item.get("bias", True))))
        lu.channels = pick_channels(graph, op, float(item.get("fraction", 1.0)))
    return with_classifier(graph, s)


def parse_scheme(graph: Graph, spec: str) -> SparseScheme:
    """`bias-only`, `last:K`, or a JSON file path. (`auto` is chosen by tinyprop.compile.auto.)"""
    if spec == "bias-only":
        return bias_only(graph)
    if spec.startswith("bias-last:"):
        return bias_only(graph, int(spec.split(":", 1)[1]))
    if spec.startswith("last:"):
        try:
            k = int(spec.split(":", 1)[1])
        except ValueError:
            k = 0
        if k < 1:
            raise TinypropError(f"--scheme {spec}: K must be a positive integer, e.g. last:2")
        return last_k(graph, k)
    if spec.endswith(".json"):
        return from_json(graph, Path(spec))
    raise TinypropError(f"--scheme {spec}: unknown; use bias-only, last:K, auto or a .json file")
