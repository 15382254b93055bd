"""What the learn app's tests share (test_learn.py, test_learn_qemu.py; their fixtures
learn_blob and learn_frames are in conftest.py): vww-mini photos as a camera sees them and a
session run to its end."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from PIL import Image
from tinyprop.data.datasets import read_rgb
from tinyprop.data.shifts import apply_shift
from tinyprop.learn.run import LearnSession

CLASSES = ("non_person", "person")
N_FRAMES = 16


def haze_photos(vww_data_dir: Path, out: Path, n: int) -> list[tuple[str, int]]:
    """n training photos of vww-mini (their COCO originals) under haze in a seeded order (as a
    camera meets both classes; labels.csv lists one class, then the other), as PNG files in
    `out`; their (file name, label)."""
    out.mkdir(parents=True, exist_ok=True)
    hold = set((vww_data_dir / "holdout.txt").read_text().split())
    rows = [r for r in csv.DictReader(open(vww_data_dir / "labels.csv"))
            if r["filename"] not in hold]
    rows = [rows[i] for i in np.random.default_rng(0).permutation(len(rows))[:n]]
    named = []
    for i, r in enumerate(rows):
        rgb = read_rgb(vww_data_dir / "originals" / r["filename"].removeprefix("coco_"))
        name = f"f{i:03d}.png"
        Image.fromarray(apply_shift("haze", rgb, r["filename"])).save(out / name)
        named.append((name, CLASSES.index(r["label"])))
    return named


def run_session(board, tb, frames, labels, cfg, workdir, kill_after: int | None = None):
    """The session's events (kill_after: QEMU killed once that step's METRIC arrived)."""
    events = []
    with LearnSession(board, tb.blob, frames, labels, cfg, workdir, CLASSES) as run:
        for e in run.events():
            events.append(e)
            if kill_after is not None and e["type"] == "step" and e["step"] == kill_after:
                run.run.proc.kill()
        stored = run.stored_params()
    return events, stored


