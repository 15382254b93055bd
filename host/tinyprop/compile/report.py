"""What a training program holds in memory, op by op: the figures `tinyprop convert --report`
prints (and writes as JSON), the per-layer table, and what the schedule's step numbers mean."""

from __future__ import annotations

import json

from ..frontend.ops import spec
from ..program import F_BIAS, F_WEIGHT, TrainProgram
from .blob import inference_for, read_blob
from .kernels import TARGET_KERNELS, TARGETS, plan_scratch
from .memory import Buf, Layout


def figures(prog: TrainProgram, blob: bytes) -> dict:
    """The memory figures of a program and its blob (`convert --report-json` writes them): the
    arenas with the kernels' scratch (what the device allocates) and without it (the plan of
    the activations and gradients), and each op's kernel on the blob's target."""
    graph = prog.graph
    info = read_blob(blob)
    meta = json.loads(info.sections.get("META") or b"{}")
    target = meta.get("target", "ref")
    infer = inference_for(graph, prog)
    scratch = plan_scratch(graph, target, prog, prog.region_bytes, meta.get("scratch_limit"),
                           infer=infer)
    consts = sum(t.data.nbytes for t in graph.tensors if t.is_const)
    arena = info.train_arena_bytes
    return {"scheme": prog.scheme.describe(), "arena_peak": arena,
            "trainable_bytes": prog.params_bytes, "optimizer_bytes": prog.optimizer_bytes,
            "total": arena + prog.region_bytes, "inference_arena": info.arena_bytes,
            "scratch": {"target": target, "kernels": TARGET_KERNELS[TARGETS[target]],
                        "inference_arena_without": infer.arena,
                        "training_arena_without": prog.arena_bytes,
                        "limit": meta.get("scratch_limit"), "ops": scratch.rows()},
            "flash_bytes": len(blob), "constant_bytes": consts,
            "layout": layout_figures(prog.layout, infer),
            "breakdown": breakdown(prog), "schedule": schedule(prog),
            "layers": report_rows(prog)}


def layout_figures(train: Layout, infer: Layout) -> dict:
    """The lifetime tricks of a blob's plans: its tiled stage (split, grid, buffers, the
    multiply-accumulates recomputed) and the ops run in place under each plan."""
    st = train.stage
    out: dict = {"stage": None, "inplace_infer": sorted(infer.inplace_ops()),
                 "inplace_train": sorted(train.inplace_ops())}
    if st is not None:
        out["stage"] = {"ops": st.n_ops, "grid": list(st.grid), "macs": st.macs,
                        "extra_macs": st.extra_macs, "input_rows": st.input_rows,
                        "band_bytes": st.band_bytes, "tile_buffer_bytes": sum(st.buffer_bytes),
                        "output": st.output, "describe": st.describe()}
    return out


def layout_lines(fig: dict) -> list[str]:
    """The tiled stage and the in-place ops (`figures`), for --report."""
    lay = fig["layout"]
    lines = []
    if lay["stage"]:
        st = lay["stage"]
        lines.append(f"tiled stage: {st['describe']}; tile buffers {st['tile_buffer_bytes']:,} B"
                     + (f", input band {st['band_bytes']:,} B" if st["input_rows"] else ""))
    else:
        lines.append("tiled stage: none (every op runs on whole tensors)")
    for plan in ("infer", "train"):
        if lay[f"inplace_{plan}"]:
            ops = ", ".join(str(k) for k in lay[f"inplace_{plan}"])
            lines.append(f"in place ({'inference' if plan == 'infer' else 'training'}): "
                         f"depthwise op{'s' if len(lay[f'inplace_{plan}']) > 1 else ''} {ops}")
    return lines


def kernel_lines(fig: dict) -> list[str]:
    """Each weighted op's kernel and the scratch it adds in both plans (`figures`), and what
    the arenas grew by."""
    sc = fig["scratch"]
    lines = [f"kernels for {sc['target']} ({sc['kernels']}); scratch planned into the arenas"
             + (f" within {sc['limit']:,} B of arena + params" if sc["limit"] else ""),
             f"{'op':>3} {'kind':<17} {'inference kernel':<22} {'scratch':>7} | "
             f"{'training kernel':<22} {'scratch':>7}"]
    for r in sc["ops"]:
        if not spec(r["kind"]).weighted:
            continue
        line = (f"{r['op']:>3} {r['kind']:<17} {r['kernel_infer']:<22} "
                f"{r['scratch_infer']:>7,} | {r['kernel_train'] or '-':<22} "
                f"{r['scratch_train']:>7,}")
        lines.append(line + (f"  ({r['note']})" if r["note"] else ""))
    arenas = (("inference", sc["inference_arena_without"], fig["inference_arena"]),
              ("training", sc["training_arena_without"], fig["arena_peak"]))
    lines.append("scratch: " + ", ".join(f"{n} arena {b:,} -> {a:,} B (+{a - b:,})"
                                         for n, b, a in arenas)
                 + "; an op without its scratch runs the reference kernel (the same bits, more "
                 "instructions)")
    return lines


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
             "gradient": "gradients", "scratch": "scratch", "tile": "tiles",
             "channel": "in_place_channels"}
    parts = dict.fromkeys(names.values(), 0)
    for b in prog.buffers:
        if b.first <= peak_step <= b.last:
            parts[names[_buffer_kind(prog, b)]] += b.size
    return parts


def _buffer_owner(prog: TrainProgram, name: Buf) -> int:
    """The op whose row lists a buffer: the producer of an activation, gradient or tile
    buffer's tensor (op 0 for the model input and its band), the op of a mask, scratch row or
    in-place channel buffer."""
    if name.kind in "msc":
        return name.index
    producer = prog.graph.producer(name.index)
    return producer.index if producer is not None else 0


def _buffer_kind(prog: TrainProgram, b) -> str:
    if b.name.kind == "a":
        return "saved" if b.last > prog.logits + 1 else "activation"
    return {"m": "mask", "g": "gradient", "s": "scratch", "p": "tile", "b": "tile",
            "c": "channel"}[b.name.kind]


def report_rows(prog: TrainProgram) -> list[dict]:
    """One row per op up to the logits: what it updates, the parameter bytes it holds in RAM,
    and its buffers in the training arena (kind, bytes, lifetime in schedule steps, offset)."""
    bufs: dict[int, list[dict]] = {}
    for b, off in zip(prog.buffers, prog.buffer_offsets, strict=True):
        bufs.setdefault(_buffer_owner(prog, b.name), []).append({
            "name": str(b.name), "kind": _buffer_kind(prog, b), "bytes": b.size, "first": b.first,
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
