"""`tinyprop infer MODEL --input X.npy -o Y.npy`: int8 outputs of a model for an int8 batch.

Any engine runs it (`--board`, alias `--engine`): `reference` (the NumPy reference, from a
.tflite), `host` (the C core built for this machine), a board tinyprop builds and starts (its
name under boards/ or its folder) or the serial port / URL of a board flashed with the blob; the
C core and the boards take a .tflite packed on the fly or a .tpb blob. All are bit-exact with
TFLite's reference kernels, so their outputs are identical.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from ..errors import TinypropError


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from ..engines import BOARD_HELP

    parser = subparsers.add_parser(
        "infer",
        help="run a model on an int8 batch (.npy) and save its int8 outputs",
        description="Run MODEL on X.npy, an int8 NHWC batch (N x H x W x C, or one sample "
        "H x W x C) quantized as the model input expects, and write the int8 output batch.",
    )
    parser.add_argument("model", type=Path, metavar="MODEL.tflite|MODEL.tpb")
    parser.add_argument("--input", type=Path, required=True, metavar="X.npy")
    parser.add_argument("-o", "--output", type=Path, required=True, metavar="Y.npy")
    parser.add_argument("--board", "--engine", dest="board", default=None,
                        help=f"{BOARD_HELP}; default: reference for a .tflite, host for a .tpb "
                        "(--engine: the same option under its older name)")
    parser.set_defaults(func=run)


def load_batch(path: Path, input_shape: tuple[int, ...]) -> np.ndarray:
    """X.npy as an int8 batch N x H x W x C; one sample H x W x C becomes a batch of one."""
    sample = tuple(input_shape[1:])
    expected = f"int8 N x {' x '.join(map(str, sample))} (or one sample without N)"
    try:
        xs = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise TinypropError(f"{path}: no such file; pass a .npy holding {expected}") from None
    except (OSError, ValueError) as exc:
        raise TinypropError(f"{path}: not a .npy array ({exc}); save {expected} with "
                            "numpy.save") from None
    if xs.shape == sample:
        xs = xs[None]
    if xs.dtype != np.int8 or xs.shape[1:] != sample or len(xs) == 0:
        raise TinypropError(f"{path}: {xs.dtype} array of shape {xs.shape}; expected {expected}")
    return xs


def run(args: argparse.Namespace) -> int:
    from ..engines import BlobModel, open_engine

    path: Path = args.model
    if path.suffix not in (".tflite", ".tpb"):
        raise TinypropError(f"{path}: unknown model type; pass a .tflite or a .tpb blob")
    board = args.board or ("host" if path.suffix == ".tpb" else "reference")
    model = BlobModel.load(path)
    with open_engine(board, model) as engine:
        xs = load_batch(args.input, model.input_shape)
        start = time.perf_counter()
        ys = np.stack([engine.infer(x) for x in xs])
        per_sample = (time.perf_counter() - start) / len(xs)
    if ys.ndim >= 3 and ys.shape[1] == 1:
        ys = ys[:, 0]  # the model's own batch axis of 1
    try:
        np.save(args.output, ys)
    except OSError as exc:
        raise TinypropError(f"{args.output}: cannot write ({exc.strerror}); pass a writable "
                            "path for the outputs") from None
    print(f"{args.output}: {len(ys)} outputs, int8 {' x '.join(map(str, ys.shape))} "
          f"(engine {board}, {per_sample * 1e3:.1f} ms a sample)")
    return 0
