"""`tinyprop infer MODEL --input X.npy -o Y.npy`: int8 outputs of a model for an int8 batch.

Engines: `reference` (the NumPy reference, from a .tflite), `host` (the C core built for this
machine) and a board (`qemu-m4`, or the serial port / URL of a board flashed with the blob), the
last two from a .tflite packed on the fly or a .tpb blob. All are bit-exact with TFLite's
reference kernels, so their outputs are identical.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..errors import TinypropError

# engine: (model path, a stack that closes what it opens) -> (input shape, one int8 sample -> its
# int8 output)
Engine = Callable[[Path, contextlib.ExitStack],
                  tuple[tuple[int, ...], Callable[[np.ndarray], np.ndarray]]]


def _graph(model: Path, engine: str):
    from ..frontend.tflite_reader import read_tflite

    if model.suffix != ".tflite":
        raise TinypropError(f"{model}: the {engine} engine needs the .tflite model; pass it, or "
                            "use --engine host for a .tpb blob")
    return read_tflite(model)


def _blob(model: Path) -> bytes:
    if model.suffix == ".tpb":
        if not model.is_file():
            raise TinypropError(f"{model}: no such file; pass a .tpb from tinyprop convert")
        return model.read_bytes()
    from ..compile.blob import pack_blob

    return pack_blob(_graph(model, "host"), zlib.crc32(model.read_bytes()))


def reference_engine(model: Path, stack: contextlib.ExitStack):
    from ..reference.forward import Forward

    forward = Forward(_graph(model, "reference"))
    return forward.graph.input.shape, forward.run


def host_engine(model: Path, stack: contextlib.ExitStack):
    from ..engines.native import NativeSession

    session = NativeSession(_blob(model), str(model))
    return session.input_shape, session.infer


def board_engine(spec: str) -> Engine:
    """A board: `qemu-m4` (built and started with the blob) or a port / URL (flashed with it)."""

    def engine(model: Path, stack: contextlib.ExitStack):
        from ..compile.blob import read_blob
        from ..device.boards import open_board

        blob = _blob(model)
        info = read_blob(blob, str(model))
        workdir = stack.enter_context(tempfile.TemporaryDirectory())
        device = stack.enter_context(open_board(spec, blob, workdir))
        output_shape = info.tensors[info.output].shape
        return info.tensors[info.input].shape, lambda x: device.evaluate(x).reshape(output_shape)

    return engine


ENGINES: dict[str, Engine] = {"reference": reference_engine, "host": host_engine}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "infer",
        help="run a model on an int8 batch (.npy) and save its int8 outputs",
        description="Run MODEL on X.npy, an int8 NHWC batch (N x H x W x C, or one sample "
        "H x W x C) quantized as the model input expects, and write the int8 output batch.",
    )
    parser.add_argument("model", type=Path, metavar="MODEL.tflite|MODEL.tpb")
    parser.add_argument("--input", type=Path, required=True, metavar="X.npy")
    parser.add_argument("-o", "--output", type=Path, required=True, metavar="Y.npy")
    parser.add_argument("--engine", default=None,
                        help="reference (NumPy), host (the C core on this machine), qemu-m4 "
                        "(emulated Cortex-M4), or the serial port / URL of a flashed board; "
                        "default: reference for a .tflite, host for a .tpb")
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
    model: Path = args.model
    if model.suffix not in (".tflite", ".tpb"):
        raise TinypropError(f"{model}: unknown model type; pass a .tflite or a .tpb blob")
    engine = args.engine or ("host" if model.suffix == ".tpb" else "reference")
    with contextlib.ExitStack() as stack:
        input_shape, infer_one = ENGINES.get(engine, board_engine(engine))(model, stack)
        xs = load_batch(args.input, input_shape)
        start = time.perf_counter()
        ys = np.stack([infer_one(x) for x in xs])
        per_sample = (time.perf_counter() - start) / len(xs)
    if ys.ndim >= 3 and ys.shape[1] == 1:
        ys = ys[:, 0]  # the model's own batch axis of 1
    try:
        np.save(args.output, ys)
    except OSError as exc:
        raise TinypropError(f"{args.output}: cannot write ({exc.strerror}); pass a writable "
                            "path for the outputs") from None
    print(f"{args.output}: {len(ys)} outputs, int8 {' x '.join(map(str, ys.shape))} "
          f"(engine {engine}, {per_sample * 1e3:.1f} ms a sample)")
    return 0
