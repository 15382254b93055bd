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

from .blob import pack_blob
from .errors import TinypropError
from .graph import Graph, Op, Tensor
from .kernels import plan_scratch

FLAG_OUTPUTS, FLAG_BUILTIN, FLAG_OPT_ONLY = 1, 2, 4
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
              workdir: Path | None = None, timeout: float = 1800.0) -> Run:
    """Run `cases` on `board` (an emulated board) with the harness; `builtin` is the blob
    compiled into it for the cases whose blob is None."""
    from .boards import write_blob_header
    from .qemu import build_firmware, start_qemu

    variables = {"BLOB": str(write_blob_header(builtin))} if builtin is not None else None
    elf = build_firmware(board, "kerneltest", variables)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(workdir or tmp)
        write_cases(work / CASES_FILE, cases)
        with start_qemu(elf, workdir=work, timeout=timeout, board=board) as q, \
                q.connect(timeout=timeout) as port:
            run = read_records(port, cases)
            status = q.wait(30)
        if status != 0:
            raise TinypropError(f"kernel harness: exited with status {status}")
    return run
