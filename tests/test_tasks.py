"""The new-class task made from vww-mini's photos (tinyprop.data.tasks): its list is the one
vww-mini's categories.csv (COCO's annotations) gives, and it lays out as a dataset."""

from __future__ import annotations

import csv

import pytest
from tinyprop.data.datasets import load_dataset
from tinyprop.data.tasks import MIN_VISIBLE, build_task, task_rows
from tinyprop.errors import TinypropError


def test_coco3_is_what_categories_csv_selects(vww_data_dir):
    with (vww_data_dir / "categories.csv").open(newline="") as f:
        cats = {r["filename"]: r for r in csv.DictReader(f)}
    rows = task_rows("coco3")
    classes = {r["class"] for r in rows}
    assert classes == {"animal", "furniture", "vehicle"}
    want = {n for n, r in cats.items() if r["dominant_supercategory"] in classes
            and float(r["dominant_visible_area"] or 0) >= MIN_VISIBLE}
    assert {r["filename"] for r in rows} == want
    for r in rows:
        c = cats[r["filename"]]
        assert (r["class"], r["split"]) == (c["dominant_supercategory"], c["split_vww"])


def test_coco3_lays_out_as_a_dataset(vww_data_dir, tmp_path):
    root = build_task("coco3", vww_data_dir, tmp_path / "coco3")
    ds = load_dataset(root)
    assert ds.classes == ("animal", "furniture", "vehicle")
    counts = {(c, sp): sum(1 for s in ds.samples if s.label == i and s.split == sp)
              for i, c in enumerate(ds.classes) for sp in ("train", "holdout")}
    assert counts == {("animal", "train"): 37, ("animal", "holdout"): 11,
                      ("furniture", "train"): 49, ("furniture", "holdout"): 23,
                      ("vehicle", "train"): 36, ("vehicle", "holdout"): 10}
    assert build_task("coco3", vww_data_dir, root) == root  # a finished folder is kept
    sample = ds.samples[0]
    assert sample.path.read_bytes() == (vww_data_dir / "non_person" / sample.name).read_bytes() \
        or sample.path.read_bytes() == (vww_data_dir / "person" / sample.name).read_bytes()


def test_task_errors(tmp_path):
    with pytest.raises(TinypropError, match="task 'coco9' is unknown; use one of coco3"):
        task_rows("coco9")
    (tmp_path / "vww" / "person").mkdir(parents=True)
    with pytest.raises(TinypropError, match="photo.s. of task coco3 missing"):
        build_task("coco3", tmp_path / "vww", tmp_path / "out")
