"""Training blob v2: writer and reader. The format is specified in docs/blob-format.md, its
records' layout in tinyprop/blob_layout.py (which generates the C loader's offsets); the C loader
(firmware/core/blob/) checks every field this writer produces.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field

import numpy as np

from .. import blob_layout
from ..errors import TinypropError
from ..frontend.graph import Graph
from ..frontend.opparams import OpParams, all_op_params, op_params
from ..program import F_GRAD_IN0, F_WEIGHT
from .memory import Layout, plan_inference, tiled_tensors

MAGIC = b"TPRB"
VERSION = blob_layout.CONSTANTS["BLOB_VERSION"][0]
HEADER = blob_layout.HEADER.struct
SECTION = blob_layout.SECTION.struct
TENSOR = blob_layout.TENSOR.struct
OP = blob_layout.OP.struct
CRC = blob_layout.CRC.struct
NONE16 = blob_layout.CONSTANTS["NONE16"][0]
NONE32 = blob_layout.CONSTANTS["NONE32"][0]

DTYPES = {"int8": 1, "int32": 2, "float32": 3}
DTYPE_SIZE = {1: 1, 2: 4, 3: 4}
ACT_CODES = {"NONE": 0, "RELU": 1, "RELU6": 2}

T_CONST, T_ARENA, T_TRAINABLE, T_TILED = 1, 2, 4, 8
INPL_HEADER = blob_layout.INPL_HEADER.struct
INPL_OP = blob_layout.INPL_OP.struct  # op, plans (1 inference, 2 training), 0, channel buffers
PWIG_HEADER = blob_layout.PWIG_HEADER.struct  # n, 0, 0
PWIG_OP = blob_layout.PWIG_OP.struct  # op, n_live, offset (from the section's start)
LABL_HEADER = blob_layout.LABL_HEADER.struct


@dataclass
class BlobTensor:
    dtype: int
    shape: tuple[int, ...]
    flags: int
    scale: float
    zero_point: int
    offset: int
    size: int
    scales_offset: int
    params_offset: int
    n_scales: int


@dataclass
class BlobOp:
    kind: int
    activation: int
    mode: int
    depth_multiplier: int
    inputs: tuple[int, int, int]
    output: int
    in_zp: int
    in2_zp: int
    out_zp: int
    act_min: int
    act_max: int
    stride: tuple[int, int]
    pad: tuple[int, int]
    k: tuple[int, int]
    pad_after: tuple[int, int]
    mult_offset: int
    n_mult: int
    left_shift: int
    diff_min: int
    float_scale: float
    held_map: int
    held_params: int


@dataclass
class Blob:
    """A parsed blob (the reader's view; also what tests compare)."""

    model_id: int
    arena_bytes: int
    train_arena_bytes: int
    params_bytes: int
    input: int
    output: int
    logits: int
    n_classes: int
    tensors: list[BlobTensor]
    ops: list[BlobOp]
    sections: dict[str, bytes] = field(default_factory=dict)
    raw: bytes = b""
    optimizer_bytes: int = 0  # momentum state at the end of the params region (params_bytes)
    labels: tuple[str, ...] | None = None  # the class names (LABL), None without them

    def data(self, offset: int, n: int, dtype) -> np.ndarray:
        d = self.sections["DATA"]
        return np.frombuffer(d, dtype=dtype, count=n, offset=offset)

    @property
    def blob_id(self) -> int:
        return blob_id(self.raw)


def blob_id(blob: bytes) -> int:
    """A blob's id: the CRC32 in its trailer (over everything before it). A device reports it in
    READY, parameter records and checkpoints carry it, firmware builds are cached by it."""
    return CRC.unpack_from(blob, len(blob) - CRC.size)[0]


class _Data:
    """The DATA section: constants appended at 8-byte alignment."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def add(self, arr: np.ndarray) -> int:
        while len(self.buf) % 8:
            self.buf.append(0)
        off = len(self.buf)
        self.buf += np.ascontiguousarray(arr).tobytes()
        return off


def _op_record(graph: Graph, op, p: OpParams, data: _Data, train) -> bytes:
    ins = [i if i >= 0 else NONE16 for i in op.inputs] + [NONE16] * 3
    geo = p.geometry
    stride = geo.get("stride", (1, 1))
    pad = geo.get("pad", (0, 0))
    k = geo.get("k", (1, 1))
    pad_after = (0, 0)
    if op.kind == "PAD":
        (ph0, ph1), (pw0, pw1) = op.options["pads"]
        pad, pad_after = (ph0, pw0), (ph1, pw1)
    mult = np.concatenate([p.mult, p.mult2]).astype(np.int32)
    shift = np.concatenate([p.shift, p.shift2]).astype(np.int32)
    mult_off = data.add(np.concatenate([mult, shift])) if mult.size else NONE32
    held = train.held_map(op.index) if train is not None else None
    held_map, held_params = ((data.add(held), train.ops[op.index].weight_params)
                             if held is not None else (NONE32, NONE32))
    for v in (*stride, *pad, *k, *pad_after):
        if not 0 <= v <= 255:
            raise TinypropError(f"operator #{op.index} {op.kind}: kernel/stride/padding {v} > 255")
    return OP.pack(
        op.spec.code, ACT_CODES[op.activation], p.mode,
        op.options.get("depth_multiplier", 1), ins[0], ins[1], ins[2], op.outputs[0],
        p.in_zp, p.in2_zp, p.out_zp, p.act_min, p.act_max,
        stride[0], stride[1], pad[0], pad[1], k[0], k[1], pad_after[0], pad_after[1],
        mult_off, mult.size, p.left_shift, p.diff_min, p.float_scale, held_map, held_params,
    )


def inference_for(graph: Graph, train=None) -> Layout:
    """The inference layout a blob gets by default: when the training plan needed a stage or
    in-place ops, the same stage (both plans tile the same windows) with the in-place ops that
    lower the inference arena; else whole tensors."""
    layout = train.layout if train is not None else None
    if layout is None or (layout.stage is None and not layout.inplace):
        return plan_inference(graph, "none")
    return plan_inference(graph, stage=layout.stage, keep_stage=True)


def inplace_section(infer: Layout, train_layout: Layout | None) -> bytes:
    """The INPL section: every op run in place under either plan, with its channel buffers."""
    plans = [infer.inplace_ops(), train_layout.inplace_ops() if train_layout else {}]
    ops = sorted(set(plans[0]) | set(plans[1]))
    out = bytearray(INPL_HEADER.pack(len(ops), 0, 0))
    for k in ops:
        bits = (1 if k in plans[0] else 0) | (2 if k in plans[1] else 0)
        out += INPL_OP.pack(k, bits, 0, plans[0].get(k, NONE32), plans[1].get(k, NONE32))
    return bytes(out)


def pairs_ops(graph: Graph, train) -> list[int]:
    """The ops whose 1x1 input gradient the Cortex-M DSP kernel computes (integer maps; a 1x1
    window, stride 1, no padding, input channels a multiple of 4: tp_dsp_grad_pointwise) from
    weights that do not train, and have a nonzero row: the PWIG section's."""
    if train is None or train.grad == "float32":
        return []
    out = []
    for k, t in sorted(train.ops.items()):
        op = graph.ops[k]
        if op.kind != "CONV_2D" or not t.flags & F_GRAD_IN0 or t.flags & F_WEIGHT:
            continue
        geo = op_params(graph, op).geometry
        w = graph.tensors[op.inputs[1]]
        cin = graph.tensors[op.inputs[0]].shape[-1]
        if (tuple(geo["k"]) == (1, 1) and tuple(geo["stride"]) == (1, 1)
                and tuple(geo["pad"]) == (0, 0) and cin % 4 == 0 and np.any(w.data != 0)):
            out.append(k)
    return out


# The largest blob PWIG may make: the Arduino Nano 33 BLE keeps about 800 KB of its 1 MB flash for
# the blob, qemu-m4 links the part's 1 MB with its firmware. PWIG copies weights the blob holds
# already, so past this the ops that spare the most multiply-accumulates a byte keep theirs.
PWIG_FLASH_LIMIT = 768 * 1024


def pairs_bytes(graph: Graph, k: int) -> int:
    """Bytes op k's record and rows take in the PWIG section."""
    return len(pairs_section(graph, [k])) - PWIG_HEADER.size


def pairs_within(graph: Graph, ops: list[int], room: int) -> list[int]:
    """The ops of `ops` whose PWIG rows fit `room` bytes (with the section's header), those that
    spare the most multiply-accumulates a byte (their output positions) first; in op order."""
    chosen, used = [], PWIG_HEADER.size
    by_gain = sorted(ops, key=lambda k: -int(np.prod(graph.tensors[graph.ops[k].outputs[0]]
                                                     .shape[1:-1])))
    for k in by_gain:
        n = pairs_bytes(graph, k)
        if used + n <= room:
            chosen.append(k)
            used += n
    return sorted(chosen)


def pairs_section(graph: Graph, ops: list[int]) -> bytes:
    """The PWIG section: per op its output channels with a nonzero weight row (u16 each,
    padded to 4 bytes), then per pair of them (an odd last one with a row of zeros) a row of
    words, word k the bytes (W[o, 2k], W[o, 2k + 1], W[o', 2k], W[o', 2k + 1]): what the DSP
    kernel's multiply-accumulates read for inputs 2k, 2k + 1, one load a pair."""
    base = PWIG_HEADER.size + PWIG_OP.size * len(ops)
    records, body = bytearray(), bytearray()
    for k in ops:
        w = graph.tensors[graph.ops[k].inputs[1]].data
        rows = np.asarray(w, np.int8).reshape(w.shape[0], -1)
        live = np.flatnonzero(np.any(rows != 0, axis=1))
        records += PWIG_OP.pack(k, len(live), base + len(body))
        body += np.pad(live, (0, len(live) % 2)).astype("<u2").tobytes()
        pr = np.pad(rows[live], ((0, len(live) % 2), (0, 0)))
        a, b = pr[0::2], pr[1::2]
        body += np.stack([a[:, 0::2], a[:, 1::2], b[:, 0::2], b[:, 1::2]], axis=2).tobytes()
    return PWIG_HEADER.pack(len(ops), 0, 0) + bytes(records) + bytes(body)


def labels_section(labels: tuple[str, ...], n_classes: int) -> bytes:
    """The LABL section: its header, then each class name UTF-8 and NUL-terminated."""
    if len(labels) != n_classes:
        raise TinypropError(f"{len(labels)} class names for a model with {n_classes} outputs; "
                            "give one name a class (MODEL.labels.txt, one a line)")
    bad = [n for n in labels if not n or "\0" in n]
    if bad:
        raise TinypropError(f"class name {bad[0]!r}: empty or with a NUL; give printable names")
    return LABL_HEADER.pack(len(labels), 0) + b"".join(n.encode() + b"\0" for n in labels)


def read_labels_section(section: bytes, n_classes: int, name: str) -> tuple[str, ...]:
    """The class names of a LABL section (the C loader's checks, for the host side)."""
    head = blob_layout.LABL_HEADER.unpack(section) if len(section) >= LABL_HEADER.size else None
    names = section[LABL_HEADER.size:].split(b"\0")
    if (head is None or (head["n_labels"], head["reserved"]) != (n_classes, 0)
            or not section.endswith(b"\0")
            or len(names) - 1 != n_classes or not all(names[:-1])):
        raise TinypropError(f"{name}: its class names (LABL) are corrupted; re-run tinyprop "
                            "convert")
    return tuple(n.decode(errors="replace") for n in names[:-1])


def pack_blob(graph: Graph, model_id: int, train=None, meta: dict | None = None,
              scratch=None, infer: Layout | None = None,
              labels: tuple[str, ...] | None = None) -> bytes:
    """Serialize a graph (and optionally its training program, a
    tinyprop.compile.train_plan.TrainProgram, and its kernels' scratch plan, a
    tinyprop.compile.kernels.ScratchPlan: the SCRA section and the arenas with it) to blob
    v2. `infer`: the inference layout (memory.py; default `inference_for`); with a training
    program it must tile the program's stage. `labels`: the class names, one a logit (the
    LABL section; None: none, and the blob is as it was without them)."""
    params = all_op_params(graph)
    infer = infer if infer is not None else inference_for(graph, train)
    train_layout = train.layout if train is not None else None
    stage = infer.stage
    if train_layout is not None and train_layout.stage is not stage:
        raise TinypropError("pack_blob: the inference layout must tile the training "
                            "program's stage (inference_for)")
    arena_bytes = infer.arena
    tiled = tiled_tensors(stage)
    data = _Data()
    # TRAINABLE marks the biases held whole; held weight rows are described per op (held_map)
    trainable = {ti: off for ti, off in train.trainable_offsets.items()
                 if ti not in train.held_rows} if train is not None else {}
    tensors = bytearray()
    for t in graph.tensors:
        if t.dtype not in DTYPES:
            # shape operands of RESHAPE/MEAN/PAD: folded into the op records, not needed here
            tensors += TENSOR.pack(0, 0, 0, 0, 0, 0, 0, 0, 0.0, 0, 0, 0, NONE32, NONE32, 0, 0)
            continue
        dims = list(t.shape) + [0] * (4 - len(t.shape))
        if len(t.shape) > 4 or any(d > 0xFFFF for d in t.shape):
            raise TinypropError(f"tensor '{t.name}' shape {t.shape} too large for blob v2")
        flags, offset, scales_off, n_scales = 0, 0, NONE32, 0
        if t.is_const:
            flags |= T_CONST
            offset = data.add(t.data)
            if t.scale.size > 1:
                scales_off = data.add(t.scale.astype(np.float32))
                n_scales = t.scale.size
        elif t.index in tiled:
            flags, offset = T_TILED, NONE32  # only tile by tile (TILE)
        elif infer.tensor_offset(t.index) is not None:
            flags |= T_ARENA
            offset = infer.tensor_offset(t.index)
        params_off = trainable.get(t.index, NONE32)
        if params_off != NONE32:
            flags |= T_TRAINABLE
        scale = float(t.scale[0]) if t.scale.size else 0.0
        zp = int(t.zero_point[0]) if t.zero_point.size else 0
        tensors += TENSOR.pack(DTYPES[t.dtype], len(t.shape), flags, 0, *dims, scale, zp, offset,
                               t.size * DTYPE_SIZE[DTYPES[t.dtype]], scales_off, params_off,
                               n_scales, 0)
    ops = b"".join(_op_record(graph, op, p, data, train)
                    for op, p in zip(graph.ops, params, strict=True))
    sections = [(b"TENS", bytes(tensors)), (b"OPS ", ops), (b"DATA", bytes(data.buf)),
                (b"NAME", graph.name.encode()[:63])]
    train_arena = params_bytes = optimizer_bytes = 0
    if meta is not None:  # host-side facts (source model, scheme); the firmware skips it
        sections.append((b"META", json.dumps(meta, sort_keys=True).encode()))
    if train is not None:
        sections.append((b"TRAN", train.pack()))
        train_arena, params_bytes = train.arena_bytes, train.region_bytes
        optimizer_bytes = train.optimizer_bytes
    if stage is not None:
        offsets = {"infer": infer.tile_offsets(), "train": train_layout.tile_offsets()
                   if train_layout else [NONE32] * len(stage.tensors)}
        bands = {"infer": infer.band_offset(),
                 "train": train_layout.band_offset() if train_layout else NONE32}
        sections.append((b"TILE", stage.pack(offsets, bands)))
    if infer.inplace_ops() or (train_layout is not None and train_layout.inplace_ops()):
        sections.append((b"INPL", inplace_section(infer, train_layout)))
    if scratch is not None and scratch.target != "ref":  # the reference kernels need none
        if train is None and scratch.train_arena:
            raise TinypropError("pack_blob: the scratch plan was made with a training program; "
                                "pass that program as train=, or plan without it")
        sections.append((b"SCRA", scratch.pack()))
        arena_bytes, train_arena = scratch.infer_arena, scratch.train_arena
        pw_ops = pairs_ops(graph, train)
        if pw_ops:  # the DSP kernels' 1x1 input gradient (flash, not RAM), within the limit
            rest = HEADER.size + CRC.size + sum(SECTION.size + len(c) + 8 for _, c in sections)
            rest += 0 if labels is None else 64 + sum(len(n.encode()) + 1 for n in labels)
            pw_ops = pairs_within(graph, pw_ops, PWIG_FLASH_LIMIT - rest)
        if pw_ops:
            sections.append((b"PWIG", pairs_section(graph, pw_ops)))
    logits = graph.logits_op().outputs[0]
    n_classes = graph.tensors[logits].size
    if labels is not None:
        sections.append((b"LABL", labels_section(tuple(labels), n_classes)))
    body_off = HEADER.size + SECTION.size * len(sections)
    table, payload = bytearray(), bytearray()
    for sid, content in sections:
        while (body_off + len(payload)) % blob_layout.CONSTANTS["SECTION_ALIGN"][0]:
            payload.append(0)
        table += SECTION.pack(sid, body_off + len(payload), len(content))
        payload += content
    total = body_off + len(payload) + CRC.size
    header = HEADER.pack(MAGIC, VERSION, HEADER.size, total, model_id & 0xFFFFFFFF,
                         len(sections), 0, arena_bytes, train_arena, params_bytes,
                         graph.inputs[0], graph.outputs[0], logits, n_classes, optimizer_bytes,
                         0)
    blob = header + bytes(table) + bytes(payload)
    return blob + CRC.pack(zlib.crc32(blob))


def read_blob(raw: bytes, name: str = "blob") -> Blob:
    """Parse and check a v2 blob (the same checks as the C loader, for the host side)."""
    if len(raw) < HEADER.size + CRC.size:
        raise TinypropError(f"{name}: truncated ({len(raw)} bytes); re-run tinyprop convert")
    h = blob_layout.HEADER.unpack(raw)
    if h["magic"] != MAGIC:
        raise TinypropError(f"{name}: not a tinyprop blob (bad magic); run tinyprop convert")
    if h["version"] != VERSION:
        raise TinypropError(f"{name}: blob version {h['version']}, this tinyprop reads "
                            f"{VERSION}; re-run tinyprop convert")
    total = h["total_size"]
    if total != len(raw):
        raise TinypropError(f"{name}: header says {total} bytes but file has {len(raw)}; "
                            "truncated or corrupted, re-run tinyprop convert")
    if zlib.crc32(raw[:-CRC.size]) != blob_id(raw):
        raise TinypropError(f"{name}: CRC mismatch (corrupted); re-run tinyprop convert")
    sections = {}
    for i in range(h["n_sections"]):
        s = blob_layout.SECTION.unpack(raw, h["header_size"] + i * SECTION.size)
        if s["offset"] + s["size"] > total - CRC.size:
            raise TinypropError(f"{name}: section {s['id']!r} out of bounds")
        sections[s["id"].decode().strip()] = raw[s["offset"] : s["offset"] + s["size"]]
    tens = sections["TENS"]
    tensors = []
    for i in range(len(tens) // TENSOR.size):
        f = blob_layout.TENSOR.unpack(tens, i * TENSOR.size)
        tensors.append(BlobTensor(f["dtype"], f["dims"][: f["rank"]], f["flags"], f["scale"],
                                  f["zero_point"], f["offset"], f["size"], f["scales_offset"],
                                  f["params_offset"], f["n_scales"]))
    ops_raw = sections["OPS"]
    fields = [f.name for f in blob_layout.OP.fields if f.name in BlobOp.__dataclass_fields__]
    ops = []
    for i in range(len(ops_raw) // OP.size):
        f = blob_layout.OP.unpack(ops_raw, i * OP.size)
        ops.append(BlobOp(**{k: f[k] for k in fields}))
    labels = (read_labels_section(sections["LABL"], h["n_classes"], name)
              if "LABL" in sections else None)
    return Blob(h["model_id"], h["arena_infer"], h["arena_train"], h["params_bytes"], h["input"],
                h["output"], h["logits"], h["n_classes"], tensors, ops, sections, bytes(raw),
                h["optimizer_bytes"], labels)


def c_header(blob: bytes, symbol: str = "tp_model_blob") -> str:
    """The blob as a C array, to compile into firmware that keeps it in flash."""
    lines = [
        "/* Generated by tinyprop convert: a tinyprop training blob (docs/blob-format.md). */",
        "#include <stdint.h>",
        f"#define TP_MODEL_BLOB_LEN {len(blob)}u",
        f"#define TP_MODEL_BLOB_ID 0x{blob_id(blob):08x}u",
        f"const uint32_t {symbol}_len = {len(blob)}u;",
        f"__attribute__((aligned(8))) const uint8_t {symbol}[{len(blob)}] = {{",
    ]
    for i in range(0, len(blob), 24):
        lines.append("  " + ",".join(str(b) for b in blob[i : i + 24]) + ",")
    lines.append("};")
    return "\n".join(lines) + "\n"


def blob_header(blob: bytes) -> str:
    """The header firmware builds include (TP_MODEL_HEADER, `tinyprop convert --header`): the
    blob (c_header) and what sizes the firmware's buffers: the arena, the params region and
    the input tensor, so a device, a learn app or a sketch sizes them exactly."""
    b = read_blob(blob)
    return (
        c_header(blob)
        + f"#define TP_MODEL_ARENA_BYTES {max(b.arena_bytes, b.train_arena_bytes)}u\n"
        + f"#define TP_MODEL_PARAMS_BYTES {b.params_bytes}u\n"
        + f"#define TP_MODEL_INPUT_BYTES {b.tensors[b.input].size}u\n"
    )
