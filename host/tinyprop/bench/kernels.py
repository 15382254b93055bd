"""The kernels' harness (firmware/apps/kerneltest/kerneltest.c) on an emulated board: many small
blobs run with the reference kernels and with the build's in one QEMU process, outputs and costs
of both sent back. Op-level tests, whole generated models and VWW (its blob compiled in, or
layer by layer as one-op blobs) go through it, and `tinyprop bench --only kernels` measures
with it.
"""

from __future__ import annotations

import struct
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..compile.blob import pack_blob
from ..compile.kernels import plan_scratch
from ..compile.patch import op_macs
from ..errors import TinypropError
from ..frontend.graph import Graph, Op, Tensor

FLAG_OUTPUTS, FLAG_BUILTIN, FLAG_OPT_ONLY, FLAG_TRAIN, FLAG_REF = 1, 2, 4, 8, 16
# the harness's training steps (kerneltest.c TRAIN_LR, TRAIN_SEED): constant learning rate
TRAIN_LR, TRAIN_SEED = 0.005, 0
# tp_part (tinyprop.h) columns of a step profile, per op
PARTS = ("forward", "backward", "grad", "update")
CASES_FILE = "kernel_cases.bin"
RECORD = struct.Struct("<4sIIIIIIII")


@dataclass
class Case:
    """One blob (None: the one compiled into the harness) and its int8 inputs."""

    blob: bytes | None
    inputs: np.ndarray  # (n, input bytes) int8
    flags: int = FLAG_OUTPUTS
    name: str = ""


@dataclass
class Result:
    case: int
    input: int
    status: int
    cost_ref: int  # board counter units (instructions on qemu-m4); 0: not run
    cost_opt: int
    out_ref: np.ndarray | None = None
    out_opt: np.ndarray | None = None
    crc_ref: int = 0
    crc_opt: int = 0


@dataclass
class Run:
    results: list[Result] = field(default_factory=list)

    def of(self, case: int) -> list[Result]:
        return [r for r in self.results if r.case == case]


def subgraph(graph: Graph, first: int, last: int, name: str = "") -> Graph:
    """Ops first..last of a graph (one activation input: op `first`'s) as a model of its own,
    its tensors renumbered; op `last`'s output is the output."""
    ops = graph.ops[first : last + 1]
    index: dict[int, int] = {}
    tensors: list[Tensor] = []

    def keep(i: int) -> int:
        if i < 0:
            return i
        if i not in index:
            t = graph.tensors[i]
            index[i] = len(tensors)
            tensors.append(Tensor(len(tensors), t.name, t.shape, t.dtype, t.scale, t.zero_point,
                                  t.quant_dim, t.data))
        return index[i]

    x = keep(ops[0].inputs[0])
    new_ops = [Op(k, op.kind, [keep(i) for i in op.inputs], [keep(o) for o in op.outputs],
                  dict(op.options)) for k, op in enumerate(ops)]
    return Graph(tensors, new_ops, [x], [index[ops[-1].outputs[0]]],
                 name or f"{graph.name}[{first}:{last}]")


def target_blob(graph: Graph, target: str = "cortex-m4") -> bytes:
    """An inference blob of `graph` with `target`'s scratch plan."""
    return pack_blob(graph, zlib.crc32(graph.name.encode()), scratch=plan_scratch(graph, target))


def train_inputs(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Training samples as a FLAG_TRAIN case's inputs: a u32 label, then the int8 sample."""
    xs = np.asarray(xs, np.int8).reshape(len(xs), -1)
    labels = np.asarray(ys, "<u4").reshape(-1, 1).view(np.int8)
    return np.concatenate([labels, xs], axis=1)


@dataclass
class StepProfile:
    """One profiled training step on the board (kerneltest's FLAG_TRAIN record)."""

    cost: int  # the step, hook calls included
    params_crc: int
    loss: np.float32
    hook_calls: int
    hook_cost: float  # per call
    loss_cost: int
    ops: np.ndarray  # (n_ops, 4): PARTS per op

    @classmethod
    def of(cls, r: Result) -> StepProfile:
        t = np.frombuffer(r.out_opt.tobytes(), "<u4")
        return cls(r.cost_opt, r.crc_opt, np.uint32(t[0]).view(np.float32), int(t[1]),
                   int(t[2]) / 64, int(t[3]), t[4:].reshape(-1, 4).astype(np.int64))


def write_cases(path: Path, cases: list[Case]) -> None:
    out = bytearray(b"TPKC" + struct.pack("<II", 1, len(cases)))
    for c in cases:
        blob = b"" if c.blob is None else c.blob
        x = np.ascontiguousarray(c.inputs, np.int8).reshape(len(c.inputs), -1)
        flags = c.flags | (FLAG_BUILTIN if c.blob is None else 0)
        out += struct.pack("<IIII", flags, len(blob), len(x), x.shape[1])
        out += blob + bytes(-len(blob) % 8) + x.tobytes()
    path.write_bytes(bytes(out))


def read_records(port, cases: list[Case]) -> Run:
    """The harness's records from `port` (anything with read(n)) up to its end record."""
    run = Run()
    while True:
        tag = _read_exact(port, 4, "record")
        if tag == b"TPKE":
            _read_exact(port, 4, "end")
            return run
        if tag == b"TPKX":
            raise TinypropError(f"kernel harness: cannot read {CASES_FILE}")
        head = _read_exact(port, RECORD.size - 4, "record")
        _, case, inp, status, cost_ref, cost_opt, n, crc_ref, crc_opt = RECORD.unpack(tag + head)
        r = Result(case, inp, status, cost_ref, cost_opt, crc_ref=crc_ref, crc_opt=crc_opt)
        if status == 0 and cases[case].flags & FLAG_OUTPUTS:
            r.out_ref = np.frombuffer(_read_exact(port, n, "output"), np.int8).copy()
            r.out_opt = np.frombuffer(_read_exact(port, n, "output"), np.int8).copy()
        run.results.append(r)


def _read_exact(port, n: int, what: str) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = port.read(n - len(data))
        if not chunk:
            raise TinypropError(f"kernel harness: the board stopped answering ({what})")
        data += chunk
    return bytes(data)


def run_cases(cases: list[Case], board: str = "qemu-m4", builtin: bytes | None = None,
              workdir: Path | None = None, timeout: float = 1800.0,
              variant: dict[str, str] | None = None, qemu_args: tuple[str, ...] = ()) -> Run:
    """Run `cases` on `board` (an emulated board) with the harness; `builtin` is the blob
    compiled into it for the cases whose blob is None; `variant`: make variables of a build
    variant (firmware/apps/app.mk's VARIANT, OPT, KERNELS_CC); `qemu_args`: more emulator
    arguments (tinyprop.bench.cycles's execution trace)."""
    from ..device.firmware import build_firmware, write_blob_header
    from ..device.runners import start_qemu

    variables = dict(variant or {})
    if builtin is not None:
        variables["BLOB"] = str(write_blob_header(builtin))
    elf = build_firmware(board, "kerneltest", variables)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(workdir or tmp)
        write_cases(work / CASES_FILE, cases)
        with start_qemu(elf, workdir=work, timeout=timeout, board=board,
                        extra_args=qemu_args) as q, \
                q.connect(timeout=timeout) as port:
            run = read_records(port, cases)
            status = q.wait(30)
        if status != 0:
            raise TinypropError(f"kernel harness: exited with status {status}")
    return run


# CMSIS-NN on the same emulator and flags (the measurement; DESIGN.md): instructions per
# layer type of one VWW inference, and the multiply-accumulates they are for.
CMSIS_NN = {"first conv": 3.05e6, "pointwise": 14.57e6, "depthwise": 6.46e6,
            "pool + FC + softmax": 0.02e6, "total": 24_095_160}
# The same inference through tinyprop.bench.cycles' Cortex-M4 model (default timing, P=2):
# ARM-software/CMSIS-NN 99f736a6 built outside the repo (gcc 12.2 -O2, hard float), each layer
# between counter reads under the trace, outputs equal to the reference's; 24,092,609
# instructions, 737,213 taken branches (the cycles at another P: + (P - 2) x these).
CMSIS_NN_CYCLES = {"first conv": 4_096_911, "pointwise": 17_682_721, "depthwise": 7_691_458,
                   "pool + FC + softmax": 31_080, "total": 29_502_170}
CMSIS_NN_TAKEN_BRANCHES = 737_213
LAYER_TYPES = ("first conv", "pointwise", "depthwise", "pool + FC + softmax")


def _layer_type(graph: Graph, op: Op) -> str:
    if op.kind == "CONV_2D":
        return "first conv" if op.index == 0 else "pointwise"
    return "depthwise" if op.kind == "DEPTHWISE_CONV_2D" else "pool + FC + softmax"


def _reshape_of(t: Tensor, name: str) -> Graph:
    """A one-RESHAPE model over an activation like t: the interpreter's cost of an op with
    that output (the planner aliases RESHAPE, so no kernel runs), the argmax over it
    included, which a one-op model takes on its output."""
    x = Tensor(0, "x", t.shape, "int8", t.scale, t.zero_point)
    y = Tensor(1, "y", t.shape, "int8", t.scale, t.zero_point)
    shape = Tensor(2, "shape", (len(t.shape),), "int32", np.zeros(1, np.float32),
                   np.zeros(1, np.int64), 0, np.asarray(t.shape, np.int32))
    return Graph([x, y, shape], [Op(0, "RESHAPE", [0, 2], [1], {})], [0], [1], name)


def vww_cases(graph: Graph, x: np.ndarray, target: str = "cortex-m4",
              flags: int = 0) -> tuple[list[Case], list[tuple[int, int]], bytes]:
    """The harness cases that measure one inference of `graph` (VWW) on input x: the whole
    model (its blob, the third item, compiled in), then per group of ops (each weighted op,
    and the tail from the pooling on as one: the second item) a model of its own and a
    one-RESHAPE model of the same output (what the interpreter and the argmax cost there)."""
    from ..reference.forward import Forward

    acts = Forward(graph).run(x, keep=True)
    tail = next(op.index for op in graph.ops if op.kind not in ("CONV_2D", "DEPTHWISE_CONV_2D"))
    groups = [(op.index, op.index) for op in graph.ops[:tail]] + [(tail, len(graph.ops) - 1)]
    cases = [Case(None, np.asarray(x, np.int8).reshape(1, -1), flags, "whole model")]
    for first, last in groups:
        sub = subgraph(graph, first, last)
        xin = np.asarray(acts[graph.ops[first].inputs[0]], np.int8).reshape(1, -1)
        cases.append(Case(target_blob(sub, target), xin, flags, f"ops {first}..{last}"))
        cases.append(Case(target_blob(_reshape_of(sub.output, "overhead"), target),
                          np.zeros((1, sub.output.size), np.int8), flags, "overhead"))
    whole = pack_blob(graph, zlib.crc32(graph.name.encode()), scratch=plan_scratch(graph, target))
    return cases, groups, whole


def vww_costs(graph: Graph, x: np.ndarray, target: str = "cortex-m4",
              board: str = "qemu-m4") -> dict:
    """Instructions of one inference of `graph` (VWW) on `board`, reference and `target`'s
    kernels in one harness run (vww_cases): the whole model, and each group of ops less the
    one-RESHAPE model of its output, summed per layer type."""
    cases, groups, whole = vww_cases(graph, x, target)
    run = run_cases(cases, board, builtin=whole)
    res = {r.case: r for r in run.results}
    if any(r.status or r.crc_ref != r.crc_opt for r in run.results):
        raise TinypropError("kernel harness: a case failed or the kernels disagree: "
                            f"{[(cases[r.case].name, r.status) for r in run.results]}")
    out: dict = {"board": board, "target": target, "counter": "instructions",
                 "whole": {"ref": res[0].cost_ref, "opt": res[0].cost_opt,
                           "macs": sum(op_macs(graph, op) for op in graph.ops)},
                 "ops": [], "types": {}}
    for i, (first, last) in enumerate(groups):
        op_r, over = res[1 + 2 * i], res[2 + 2 * i]
        op = graph.ops[first]
        row = {"ops": [first, last], "kind": op.kind, "type": _layer_type(graph, op),
               "macs": sum(op_macs(graph, o) for o in graph.ops[first : last + 1]),
               "ref": op_r.cost_ref - over.cost_ref, "opt": op_r.cost_opt - over.cost_opt}
        out["ops"].append(row)
        t = out["types"].setdefault(row["type"], {"ref": 0, "opt": 0, "macs": 0})
        for k in ("ref", "opt", "macs"):
            t[k] += row[k]
    for name, t in list(out["types"].items()) + [("whole", out["whole"])]:
        t["ref_per_mac"] = round(t["ref"] / t["macs"], 2) if t["macs"] else None
        t["opt_per_mac"] = round(t["opt"] / t["macs"], 2) if t["macs"] else None
        t["ratio"] = round(t["ref"] / t["opt"], 2) if t["opt"] else None
        if name in CMSIS_NN:
            t["cmsis_nn"] = CMSIS_NN[name]
    out["whole"]["cmsis_nn"] = CMSIS_NN["total"]
    return out


def step_costs(graph: Graph, blob: bytes, xs: np.ndarray, ys: np.ndarray,
               board: str = "qemu-m4") -> dict:
    """Instructions of training steps of `blob` (compiled into the harness) on `board` with
    the build's kernels, one step a sample: the last step's split into forward, loss, backward
    (input gradients) and grad (weight and bias gradients) per layer type, and update; the
    profile hook's own cost is taken out of each part (the step's `hook` figure)."""
    run = run_cases([Case(None, train_inputs(xs, ys), FLAG_TRAIN | FLAG_OUTPUTS | FLAG_BUILTIN)],
                    board, builtin=blob)
    bad = [r.status for r in run.results if r.status != 0]
    if bad:
        raise TinypropError(f"kernel harness: training step failed with status {bad[0]}")
    profiles = [StepProfile.of(r) for r in run.results]
    p = profiles[-1]
    hook = p.hook_cost
    parts = {"forward": 0.0, "loss": p.loss_cost - hook, "update": 0.0}
    per_type: dict[str, dict[str, float]] = {}
    calls = np.zeros(4)
    for k, row in enumerate(p.ops):
        if not row.any():
            continue
        kind = _layer_type(graph, graph.ops[k]) if k < len(graph.ops) else "other"
        t = per_type.setdefault(kind, {"backward": 0.0, "grad": 0.0})
        parts["forward"] += float(row[0])
        parts["update"] += float(row[3])
        t["backward"] += float(row[1])
        t["grad"] += float(row[2])
        calls += row > 0
    # every hook call's cost lands in the part it begins; spread it as counted
    step = {"instructions": p.cost - p.hook_calls * hook,
            "measured_with_hooks": p.cost, "hook_calls": p.hook_calls, "hook_cost": hook,
            "steps": len(profiles), "costs": [q.cost for q in profiles]}
    total_parts = parts["forward"] + parts["update"] + sum(
        t["backward"] + t["grad"] for t in per_type.values())
    scale = (step["instructions"] - parts["loss"]) / total_parts if total_parts else 1.0
    parts = {k: round(v * (scale if k != "loss" else 1.0)) for k, v in parts.items()}
    step["parts"] = {"forward": parts["forward"], "loss": parts["loss"],
                     "backward": {k: round(t["backward"] * scale) for k, t in per_type.items()},
                     "weight_bias_grad": {k: round(t["grad"] * scale)
                                          for k, t in per_type.items()},
                     "update": parts["update"]}
    return step
