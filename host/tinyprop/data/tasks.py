"""New-class tasks made from vww-mini's photos: each photo labelled by the COCO supercategory of
its largest non-person object (COCO's official annotations; vww-mini's `categories.csv`), for
teaching a model classes it never knew.

`coco3` (the new-task demo's): animal, furniture and vehicle, the photos whose dominant object
covers at least 10 % of the 96x96 crop: 166 photos, 122 train and 44 holdout (vww-mini's own
split), listed in `coco3.csv` beside this module (so the task also works on a vww-mini downloaded
from COCO, which has no categories.csv):

    root = build_task("coco3", resolve_dataset(None), Path("out/coco3"))   # class folders

The task folder is a dataset as `datasets.load_dataset` reads it: a folder a class (links to the
photos, or copies where links cannot be made) and holdout.txt.
"""

from __future__ import annotations

import csv
import os
import shutil
from pathlib import Path

from ..errors import TinypropError
from .datasets import CLASSES, HOLDOUT_FILE

TASKS = {"coco3": Path(__file__).with_name("coco3.csv")}
MIN_VISIBLE = 0.10  # the dominant object's visible fraction of the crop that coco3.csv kept


def task_rows(task: str) -> list[dict[str, str]]:
    """The task's photos: filename, class, split (train or holdout), dominant_category."""
    if task not in TASKS:
        raise TinypropError(f"task {task!r} is unknown; use one of {', '.join(sorted(TASKS))}")
    with TASKS[task].open(newline="") as f:
        return list(csv.DictReader(f))


def build_task(task: str, vww_mini: Path, out: Path) -> Path:
    """Lay out `task` under `out` from the photos of the vww-mini folder `vww_mini` (its
    person/ and non_person/ folders); returns `out`. Idempotent: a finished folder is kept."""
    rows = task_rows(task)
    done = out / HOLDOUT_FILE
    if done.is_file():
        return out
    where = {p.name: p for c in CLASSES for p in (vww_mini / c).glob("*.jpg")}
    missing = [r["filename"] for r in rows if r["filename"] not in where]
    if missing:
        raise TinypropError(f"{vww_mini}: {len(missing)} photo(s) of task {task} missing (first: "
                            f"{missing[0]}); pass a complete vww-mini folder")
    for r in rows:
        dest = out / r["class"] / r["filename"]
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.exists():
            _link_or_copy(where[r["filename"]], dest)
    holdout = sorted(r["filename"] for r in rows if r["split"] == "holdout")
    tmp = done.with_suffix(".tmp")
    tmp.write_text("".join(n + "\n" for n in holdout))
    tmp.replace(done)  # written last: its presence marks a complete folder
    return out


def _link_or_copy(src: Path, dest: Path) -> None:
    try:
        os.symlink(src.resolve(), dest)
    except OSError:  # a file system without links
        shutil.copyfile(src, dest)
