#!/usr/bin/env python3
"""Build a Visual Wake Words dataset folder from COCO: see datasets/README.md.

    python datasets/build_vww_from_coco.py annotations/instances_val2017.json val2017/ out/ \
        --size 96 --holdout-percent 30
"""

from __future__ import annotations

import argparse
import sys

from tinyprop.data.datasets import VWW_AREA_THRESHOLD, build_vww_from_coco
from tinyprop.errors import TinypropError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("instances_json", help="COCO annotations/instances_<split>.json")
    parser.add_argument("images_dir", help="the folder of that split's images")
    parser.add_argument("out_dir", help="where person/ and non_person/ are written")
    parser.add_argument("--size", type=int, default=96, help="output side in pixels (96)")
    parser.add_argument("--threshold", type=float, default=VWW_AREA_THRESHOLD,
                        help="person mask area / image area for 'person' (0.005)")
    parser.add_argument("--category", default="person", help="foreground COCO category")
    parser.add_argument("--holdout-percent", type=int, default=0,
                        help="list this share of images in holdout.txt (sha256 of the name)")
    args = parser.parse_args(argv)
    try:
        counts = build_vww_from_coco(
            args.instances_json, args.images_dir, args.out_dir, args.size, args.threshold,
            args.category, args.holdout_percent,
        )
    except TinypropError as exc:
        print(f"build_vww_from_coco: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"{args.out_dir}: person {counts['person']}, non_person {counts['non_person']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
