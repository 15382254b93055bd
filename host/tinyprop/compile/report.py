"""What a training program holds in memory, op by op: the figures `tinyprop convert --report`
prints (and writes as JSON), the per-layer table, and what the schedule's step numbers mean."""

from __future__ import annotations

from .memory import plan_inference
from .train_plan import F_BIAS, F_WEIGHT, TrainProgram


def figures(prog: TrainProgram, blob: bytes) -> dict:
    """The memory figures of a program and its blob (`convert --report-json` writes them)."""
    graph = prog.graph
    consts = sum(t.data.nbytes for t in graph.tensors if t.is_const)
    return {"scheme": prog.scheme.describe(), "arena_peak": prog.arena_bytes,
            "trainable_bytes": prog.params_bytes, "optimizer_bytes": prog.optimizer_bytes,
            "total": prog.memory_bytes, "inference_arena": plan_inference(graph)[1],
            "flash_bytes": len(blob), "constant_bytes": consts,
            "breakdown": breakdown(prog), "schedule": schedule(prog),
            "layers": report_rows(prog)}


def report_lines(fig: dict) -> list[str]:
    """The per-layer table of `figures`: what each op updates and holds, and its arena buffers;
    then the legend of the step numbers and the totals."""
    lines = [f"{'op':>3} {'kind':<17} {'update':<16} {'held B':>8} | {'buffer':<6} {'kind':<10} "
             f"{'bytes':>7} {'steps':>7} {'offset':>7}"]
    for r in fig["layers"]:
        what = [("bias" if r["bias"] else ""),
                (f"w {r['channels']}/{r['out_channels']}" if r["channels"] else "")]
        update = "+".join(w for w in what if w) or ("(grad)" if r["backward"] else "-")
        lead = f"{r['op']:>3} {r['kind']:<17} {update:<16} {r['trainable_bytes']:>8,}"
        for i, b in enumerate(r["buffers"] or [None]):
            cells = "" if b is None else (
                f"{b['name']:<6} {b['kind']:<10} {b['bytes']:>7,} "
                f"{str(b['first']) + '..' + str(b['last']):>7} {b['offset']:>7,}")
            lines.append(f"{lead if i == 0 else ' ' * len(lead)} | {cells}")
    lines.append(fig["schedule"]["legend"])
    parts = ", ".join(f"{k} {v:,}" for k, v in fig["breakdown"].items() if v)
    n = fig["optimizer_bytes"]
    optimizer = f" optimizer (momentum velocities) {n:,} B;" if n else ""
    lines.append(f"totals: arena_peak {fig['arena_peak']:,} B (at its peak step: {parts}); "
                 f"trainable {fig['trainable_bytes']:,} B;{optimizer} arena + trainable"
                 f"{' + optimizer' if n else ''} {fig['total']:,} B")
    return lines


def breakdown(prog: TrainProgram) -> dict:
    """Arena bytes by kind at the arena's peak step: activations, saved tensors, masks,
    gradients, scratch (what is live then; arena_peak adds alignment and fragmentation)."""
    peak_step, peak = 0, -1
    steps = {b.first for b in prog.buffers} | {b.last for b in prog.buffers}
    for st in steps:
        live = sum(b.size for b in prog.buffers if b.first <= st <= b.last)
        if live > peak:
            peak_step, peak = st, live
    names = {"activation": "activations", "saved": "saved_tensors", "mask": "masks",
             "gradient": "gradients", "scratch": "scratch"}
    parts = dict.fromkeys(names.values(), 0)
    for b in prog.buffers:
        if b.first <= peak_step <= b.last:
            parts[names[_buffer_kind(prog, b)]] += b.size
    return parts


def _buffer_owner(prog: TrainProgram, name: str) -> int:
    """The op whose row lists a buffer: the producer of an activation or gradient's tensor
    (op 0 for the model input), the op of a mask or scratch row."""
    if name[0] in "ms":
        return int(name[1:])
    producer = prog.graph.producer(int(name[1:]))
    return producer.index if producer is not None else 0


def _buffer_kind(prog: TrainProgram, b) -> str:
    if b.name[0] == "a":
        return "saved" if b.last > prog.logits + 1 else "activation"
    return {"m": "mask", "g": "gradient", "s": "scratch"}[b.name[0]]


def report_rows(prog: TrainProgram) -> list[dict]:
    """One row per op up to the logits: what it updates, the parameter bytes it holds in RAM,
    and its buffers in the training arena (kind, bytes, lifetime in schedule steps, offset)."""
    bufs: dict[int, list[dict]] = {}
    for b, off in zip(prog.buffers, prog.buffer_offsets, strict=True):
        bufs.setdefault(_buffer_owner(prog, b.name), []).append({
            "name": b.name, "kind": _buffer_kind(prog, b), "bytes": b.size, "first": b.first,
            "last": b.last, "offset": off})
    rows = []
    for op in prog.graph.ops[: prog.logits + 1]:
        t = prog.ops.get(op.index)
        lu = prog.scheme.layers.get(op.index)
        weights = bool(t and t.flags & F_WEIGHT)
        held = (4 * t.n_out if t and t.flags & F_BIAS else 0) + (
            len(t.channels) * t.row_len if weights else 0)
        rows.append({
            "op": op.index, "kind": op.kind,
            "bias": bool(lu and lu.bias),
            "channels": len(t.channels) if weights else 0,
            "out_channels": t.n_out if t and t.n_out else None,
            "backward": t is not None,
            "trainable_bytes": held,
            "buffers": sorted(bufs.get(op.index, []), key=lambda r: (r["first"], r["name"])),
        })
    return rows


def schedule(prog: TrainProgram) -> dict:
    """What the step numbers of a lifetime mean."""
    last = prog.logits + 2 + prog.logits - prog.first
    return {"forward": [0, prog.logits], "loss": prog.logits + 1,
            "backward": [prog.logits + 2, last],
            "legend": f"steps 0..{prog.logits}: forward op k at step k; {prog.logits + 1}: loss; "
                      f"{prog.logits + 2}..{last}: backward of op {prog.logits} down to "
                      f"{prog.first}, op k at step {2 * prog.logits + 2} - k"}
