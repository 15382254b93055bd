"""`tinyprop fetch`: the demo's assets into the cache, so later runs need no network: the MLPerf
Tiny VWW int8 model (333 KB, from the MLPerf Tiny repository) and vww-mini, rebuilt from its 397
COCO originals (65 MB downloaded, 2.4 MB built). Downloads resume after an interruption and every
file is checked (tinyprop.data.download). With $TINYPROP_ASSETS set nothing is downloaded: it
says where the files are.
"""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    from ..data.assets import MODEL_FILES

    p = sub.add_parser(
        "fetch", help="download the demo's model and photos into the cache",
        description="Download the MLPerf Tiny VWW model and vww-mini's 397 COCO originals into "
        "the cache (~/.cache/tinyprop or $TINYPROP_CACHE), check them and build the 96x96 "
        "photos; nothing is downloaded when $TINYPROP_ASSETS is set.")  # fmt: skip
    p.add_argument("--models", nargs="+", choices=list(MODEL_FILES), default=["int8"],
                   help="model files: int8 (the demo's, default); float and h5 for the float "
                   "baseline")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..data.assets import resolve_dataset, resolve_model
    from ..data.datasets import load_dataset

    for variant in args.models:
        path = resolve_model(variant=variant)
        print(f"model     {path} ({path.stat().st_size:,} B)")
    data = resolve_dataset()
    ds = load_dataset(data)
    print(f"vww-mini  {data} ({len(ds.samples)} photos: {len(ds.split('train'))} train, "
          f"{len(ds.split('holdout'))} holdout)")
    return 0
