"""`tinyprop bench --only camera`: the learn app's figures (firmware/apps/learn).

- Accuracy: the demo's blob learning from a camera that sees vww-mini's training scenes (their
  COCO originals, under the bench's shift, in a seeded order, `epochs` times) as a sensor sends
  them, each mode (colour and grayscale); holdout accuracy of the exported .tflite with the
  TFLite interpreter on the holdout scenes as the same camera sends them, before and after. The
  run is the learn app's replayed on the host's C core, which tests/test_learn.py holds equal to
  qemu-m4's bit for bit (qemu-m4 would take an hour a mode).
- Cost and RAM on qemu-m4: a short run of the learn app itself, each mode: instructions to
  capture a frame and to fit it to the model's input, a step, an inference; the RAM it holds
  (static, with the frame buffer; arena; trainable; the stack's peak) and how many replay
  slots the rest of the 256 KB holds.
"""

from __future__ import annotations

import csv
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..data.datasets import CLASSES, read_rgb
from ..data.shifts import apply_shift
from ..engines import BlobModel
from ..learn.camera import Frames, camera_mode, sensor_frame
from ..learn.run import LearnConfig, LearnSession, model_input, replay_on_host

MODES = ("96-rgb565", "qcif-rgb565", "qcif-gray", "96-gray")
COST_FRAMES = 4  # frames of the qemu-m4 run (two labelled): its counters are exact


def camera_scenes(data: Path, shift: str) -> tuple[list, list]:
    """(train, holdout): (name, label, the scene's RGB under `shift`) of vww-mini's photos from
    their COCO originals (labels.csv lists one class, then the other)."""
    hold = set((data / "holdout.txt").read_text().split())
    train, test = [], []
    for row in csv.DictReader(open(data / "labels.csv")):
        rgb = read_rgb(data / "originals" / row["filename"].removeprefix("coco_"))
        scene = (row["filename"], CLASSES.index(row["label"]),
                 apply_shift(shift, rgb, row["filename"]) if shift != "none" else rgb)
        (test if row["filename"] in hold else train).append(scene)
    return train, test


def seeded_order(scenes: list, seed: int) -> list:
    """The order a camera meets the scenes in: seeded, both classes mixed."""
    return [scenes[i] for i in np.random.default_rng(seed).permutation(len(scenes))]


def _frames(scenes: list, mode) -> Frames:
    return Frames(mode, tuple(sensor_frame(rgb, mode) for _, _, rgb in scenes),
                  tuple(name for name, _, _ in scenes))


def learned_accuracy(tb, frames: Frames, labels: list[int], xs: np.ndarray, ys: np.ndarray,
                     lr: float, epochs: int, seed: int, out: Path) -> float:
    """Holdout accuracy (xs, ys) of the model the learn app makes from `frames` met in the
    seed's order, `epochs` times."""
    from ..training.evaluate import evaluate_tflite
    from ..training.export import export_params

    order = np.random.default_rng(seed).permutation(len(frames.raw)).tolist() * epochs
    stream = Frames(frames.mode, tuple(frames.raw[i] for i in order),
                    tuple(frames.names[i] for i in order))
    params, _ = replay_on_host(BlobModel(tb.name, tb.blob), stream, [labels[i] for i in order],
                               LearnConfig(lr=lr, seed=seed))
    tuned = export_params(tb, params, out / f"learn_{frames.mode.name}_{seed}.tflite")
    return evaluate_tflite(tuned, xs, ys)["accuracy"]


def camera_cost(tb, scenes: list, mode_name: str, board: str) -> dict:
    """The learn app's counters and RAM on `board` over a few frames of `mode_name`."""
    mode = camera_mode(mode_name)
    frames = _frames(scenes[:COST_FRAMES], mode)
    labels = [y if i % 2 else 0xFF for i, (_, y, _) in enumerate(scenes[:COST_FRAMES])]
    with tempfile.TemporaryDirectory() as tmp, \
            LearnSession(board, tb.blob, frames, labels, LearnConfig(), Path(tmp)) as run:
        events = list(run.events())
    start, summary = events[0], events[-1]
    stack = max(e["memory"]["stack_peak"] for e in events if "memory" in e)
    plan, unit = start["memory_plan"], summary["counter_unit"]
    used = plan["static"] + plan["arena"] + plan["params"] + stack
    input_bytes = int(np.prod(model_input(frames, 0, tb.blob).shape))
    return {"frame_bytes": plan["frame_buffer"], "capture": summary[f"{unit}_per_capture"],
            "prep": summary[f"{unit}_per_prep"], "step": summary[f"{unit}_per_step"],
            "inference": summary[f"{unit}_per_inference"], "unit": unit,
            "ram": {"static": plan["static"], "arena": plan["arena"],
                    "trainable": plan["params"], "stack_peak": stack, "total": used,
                    "sram": start["sram"]},
            "replay_slots_that_fit": max(0, (start["sram"] - used) // input_bytes)}


def camera(tb, data: Path, shift: str, lr: float, epochs: int, seeds: tuple[int, ...],
           board: str, out: Path, say: Callable[[str], None]) -> dict:
    """The section: per mode, accuracy (mean over seeds, each its own frame order) and cost."""
    from ..training.evaluate import evaluate_tflite

    figs: dict = {"shift": shift, "lr": lr, "epochs": epochs, "seeds": list(seeds),
                  "board": board, "modes": {}}
    scenes = camera_scenes(data, shift)
    labels, ys = [y for _, y, _ in scenes[0]], np.array([y for _, y, _ in scenes[1]])
    for mode in MODES:
        frames, held = _frames(scenes[0], camera_mode(mode)), _frames(scenes[1], camera_mode(mode))
        xs = np.stack([model_input(held, i, tb.blob) for i in range(len(held.raw))])
        after = [learned_accuracy(tb, frames, labels, xs, ys, lr, epochs, seed, out)
                 for seed in seeds]
        fig = {"before": evaluate_tflite(tb.source, xs, ys)["accuracy"],
               "after": float(np.mean(after)), "after_range": [min(after), max(after)],
               "steps": len(labels) * epochs}
        fig["cost"] = camera_cost(tb, seeded_order(scenes[0], seeds[0]), mode, board)
        figs["modes"][mode] = fig
        c = fig["cost"]
        say(f"{mode}: holdout {fig['before']:.1%} -> {fig['after']:.1%} "
            f"({min(after):.1%}-{max(after):.1%}); frame fit {c['prep']:,} {c['unit']}, "
            f"RAM {c['ram']['total']:,} B of {c['ram']['sram']:,}, replay slots that fit "
            f"{c['replay_slots_that_fit']}")
    return figs
