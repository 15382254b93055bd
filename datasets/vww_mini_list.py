#!/usr/bin/env python3
"""Write the list `tinyprop fetch` rebuilds vww-mini from (host/tinyprop/data/vww_mini.csv) out
of a copy of vww-mini: labels.csv, holdout.txt, originals.csv and the 96x96 files. Facts only,
no photos: for each file its label, split, COCO split and id, the original's size and sha256,
and the sha256 of the 96x96 file.

    python datasets/vww_mini_list.py ../shared/datasets/vww-mini
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import sys
from pathlib import Path

from tinyprop.data import vww_mini


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("vww_mini", type=Path, help="folder holding labels.csv, originals.csv, ...")
    parser.add_argument("-o", "--out", type=Path, default=vww_mini.LIST, help="the list to write")
    args = parser.parse_args(argv)
    root: Path = args.vww_mini
    labels = {r["filename"]: r["label"] for r in csv.DictReader(open(root / "labels.csv"))}
    holdout = set((root / "holdout.txt").read_text().split())
    with open(args.out, "w", newline="") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(vww_mini.COLUMNS)
        for r in csv.DictReader(open(root / "originals.csv")):
            name, label = r["filename"], labels[r["filename"]]
            built = hashlib.sha256((root / label / name).read_bytes()).hexdigest()
            writer.writerow([name, label, "holdout" if name in holdout else "train",
                             r["coco_split"], r["coco_id"], r["bytes"], r["sha256"], built])
    print(f"wrote {args.out} ({len(labels)} photos)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
