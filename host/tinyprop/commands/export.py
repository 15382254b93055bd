"""tinyprop export: the fine-tuned .tflite of a training blob, with the parameters a training run
left in its checkpoint, or those a board flashed with the blob holds."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export", help="write the fine-tuned .tflite of a blob (from a checkpoint or a board)",
        description="Write the source model of BLOB with its trained parameters, taken from the "
        "checkpoint tinyprop train --checkpoint-every wrote (default BLOB.ckpt) or pulled from a "
        "board flashed with BLOB (--board PORT). Only the trained bytes of the .tflite change.")
    p.add_argument("blob", type=Path, metavar="BLOB.tpb", help="the blob that was trained")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="TUNED.tflite")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--checkpoint", type=Path,
                        help="checkpoint file (default: BLOB.ckpt, where train writes it)")
    source.add_argument("--board", metavar="PORT",
                        help="pull the parameters from the board on this serial port or URL")
    p.add_argument("--model", type=Path, metavar="SRC.tflite",
                   help="the blob's source .tflite if it moved since convert")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..compile.blob import blob_id
    from ..compile.blobfile import load_blob
    from ..engines import open_engine
    from ..training.export import export_params
    from ..training.run import checkpoint_path, load_checkpoint

    tb = load_blob(args.blob, args.model)
    if args.board is not None:
        with open_engine(args.board, tb) as engine:
            params = engine.params()
        origin = f"the parameters of the board on {args.board}"
    else:
        path = checkpoint_path(args.blob, args.checkpoint)
        step, params = load_checkpoint(path, blob_id(tb.blob), "--checkpoint")
        origin = f"{path} (step {step})"
    export_params(tb, params, args.output)
    print(f"wrote {args.output} with {origin}")
    return 0
