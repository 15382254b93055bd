"""Write the samples file a MicroPython board trains on (micropython/examples/train_vww.py), or
stream it to the board over TCP. Host side; docs/micropython.md.

    python micropython/samples.py vww.tpb --data vww-mini --shift haze -o samples.bin
    mpremote cp samples.bin :samples.bin                      # onto the board's filesystem
    python micropython/samples.py vww.tpb --data vww-mini --serve 9000   # or stream it

The format is the bulk file the qemu-m4 board reads (tinyprop.device.device.write_bulk_file): per
sample a label byte, then the int8 model input, so a board reads a sample straight into the
session's input tensor. The images of a split, quantized with the blob's input scale and zero
point, after the optional sensor shift, shuffled with --seed.
"""

from __future__ import annotations

import argparse
import socketserver
import sys
from pathlib import Path

import numpy as np
from tinyprop.compile.blob import read_blob
from tinyprop.data.datasets import load_split
from tinyprop.device.device import write_bulk_file
from tinyprop.errors import TinypropError


def write_samples(blob: Path, data: Path, out: Path, split: str = "train",
                  shift: str | None = None, count: int | None = None, seed: int = 0) -> int:
    """Write the samples file of `split` for `blob`; returns the number of samples."""
    if not blob.exists():
        raise TinypropError(f"{blob}: no such file; create it with tinyprop convert")
    b = read_blob(blob.read_bytes(), str(blob))
    tin = b.tensors[b.input]
    xs, ys, _ = load_split(data, split, tin.scale, tin.zero_point, shift)
    order = np.random.default_rng(seed).permutation(len(ys))[:count]
    return write_bulk_file(out, xs[order], ys[order])


def serve(path: Path, port: int) -> None:
    """Send the file to every TCP connection on `port`, until interrupted."""
    data = path.read_bytes()

    class Send(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.sendall(data)

    with socketserver.TCPServer(("", port), Send) as server:
        print(f"serving {path} ({len(data)} bytes) on port {port}; Ctrl-C ends", flush=True)
        server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("blob", type=Path, help="training blob (.tpb from tinyprop convert)")
    parser.add_argument("--data", type=Path, required=True,
                        help="dataset folder (person/, non_person/, holdout.txt)")
    parser.add_argument("--split", default="train", help="train, holdout or all (default train)")
    parser.add_argument("--shift", help="sensor shift applied to the images (e.g. haze)")
    parser.add_argument("--count", type=int, help="at most this many samples")
    parser.add_argument("--seed", type=int, default=0, help="shuffle seed (default 0)")
    parser.add_argument("-o", "--out", type=Path, default=Path("samples.bin"))
    parser.add_argument("--serve", type=int, metavar="PORT",
                        help="then send the file to each TCP connection on PORT")
    args = parser.parse_args(argv)
    try:
        n = write_samples(args.blob, args.data, args.out, args.split, args.shift, args.count,
                          args.seed)
    except TinypropError as exc:
        print(f"samples: {exc}", file=sys.stderr)
        return 2
    print(f"{args.out}: {n} samples of {args.split}", flush=True)
    if args.serve is not None:
        try:
            serve(args.out, args.serve)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
