"""COCO -> VWW builder against a hand-made instances JSON with known answers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from tinyprop.data.datasets import build_vww_from_coco, holdout_bucket, load_dataset, vww_label
from tinyprop.errors import TinypropError

REPO_ROOT = Path(__file__).resolve().parents[1]
PERSON, DOG = 1, 18

# (file name, width, height, [(category, mask area, iscrowd)], expected class). Image area 20000,
# so the 0.5 % threshold is an area of exactly 100.
CASES = [
    ("exactly_half_percent.jpg", 200, 100, [(PERSON, 100.0, 0)], "person"),
    ("just_below.jpg", 200, 100, [(PERSON, 99.99, 0)], "non_person"),
    ("crowd_only.jpg", 100, 200, [(PERSON, 2500.0, 1)], "person"),
    ("no_annotations.jpg", 160, 125, [], "non_person"),
    ("dog_only.png", 200, 100, [(DOG, 15000.0, 0)], "non_person"),
    ("small_and_big.jpg", 200, 100, [(PERSON, 10.0, 0), (DOG, 50.0, 0), (PERSON, 400.0, 0)],
     "person"),
    # A huge bbox but a tiny mask: the official rule reads the mask `area`, not the bbox.
    ("big_box_small_mask.jpg", 200, 100, [(PERSON, 50.0, 0)], "non_person"),
]


@pytest.fixture
def coco(tmp_path):
    images_dir = tmp_path / "train2017"
    images_dir.mkdir()
    images, annotations = [], []
    for image_id, (name, w, h, anns, _) in enumerate(CASES, start=1):
        rgb = np.random.default_rng(image_id).integers(0, 256, (h, w, 3), dtype=np.uint8)
        Image.fromarray(rgb).save(images_dir / name)
        images.append({"id": image_id, "file_name": name, "width": w, "height": h})
        for cat, area, crowd in anns:
            annotations.append({
                "id": len(annotations) + 1, "image_id": image_id, "category_id": cat,
                "area": area, "iscrowd": crowd, "bbox": [0.0, 0.0, w * 0.9, h * 0.9],
            })
    instances = tmp_path / "instances_train2017.json"
    instances.write_text(json.dumps({
        "images": images,
        "annotations": annotations,
        "categories": [{"id": PERSON, "name": "person"}, {"id": DOG, "name": "dog"}],
    }))
    return instances, images_dir


def test_known_labels_and_layout(coco, tmp_path):
    instances, images_dir = coco
    out = tmp_path / "vww"
    counts = build_vww_from_coco(instances, images_dir, out, size=32)
    expected = {Path(name).stem + ".jpg": cls for name, *_, cls in CASES}
    got = {p.name: p.parent.name for p in out.glob("*/*.jpg")}
    assert got == expected
    assert counts == {"non_person": 4, "person": 3}
    for p in out.glob("*/*.jpg"):
        with Image.open(p) as img:
            assert img.size == (32, 32) and img.mode == "RGB"
    ds = load_dataset(out)  # the output is a valid dataset
    assert len(ds.split("train")) == 7 and not (out / "holdout.txt").exists()


def test_holdout_uses_the_vww_mini_rule(coco, tmp_path, vww_data_dir):
    instances, images_dir = coco
    out = tmp_path / "vww"
    build_vww_from_coco(instances, images_dir, out, size=32, holdout_percent=50)
    listed = (out / "holdout.txt").read_text().split()
    assert listed == sorted(n for n in (p.name for p in out.glob("*/*.jpg"))
                            if holdout_bucket(n) < 50)
    # Same rule as vww-mini's shipped holdout.txt (30 %).
    mini = load_dataset(vww_data_dir)
    assert {s.name for s in mini.split("holdout")} == {
        s.name for s in mini.samples if holdout_bucket(s.name) < 30
    }


def test_vww_label_threshold_is_inclusive():
    image = {"width": 10, "height": 10}
    assert vww_label([{"category_id": 1, "area": 0.5}], image, {1}) == 1
    assert vww_label([{"category_id": 1, "area": 0.49}], image, {1}) == 0


def test_missing_image_and_bad_json(coco, tmp_path):
    instances, images_dir = coco
    (images_dir / "crowd_only.jpg").unlink()
    with pytest.raises(TinypropError, match="crowd_only.jpg: image listed"):
        build_vww_from_coco(instances, images_dir, tmp_path / "out")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(TinypropError, match="bad.json: not a readable COCO"):
        build_vww_from_coco(bad, images_dir, tmp_path / "out")


def test_script_runs(coco, tmp_path):
    instances, images_dir = coco
    out = tmp_path / "vww"
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "datasets" / "build_vww_from_coco.py"),
         str(instances), str(images_dir), str(out), "--size", "24"],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "person 3, non_person 4" in result.stdout
    missing = subprocess.run(
        [sys.executable, str(REPO_ROOT / "datasets" / "build_vww_from_coco.py"),
         str(tmp_path / "nope.json"), str(images_dir), str(out)],
        capture_output=True, text=True, check=False,
    )
    assert missing.returncode == 2 and "nope.json" in missing.stderr
    assert "Traceback" not in missing.stderr
