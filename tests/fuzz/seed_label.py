"""Seed the learn-app fuzzer's corpus with sessions a host and a camera really play (see
fuzz_label.c for the layout): a host that says HELLO, asks for thumbnails, labels frames, pulls
and saves the params; frames labelled by a button; a store holding this blob's record.

    seed_label.py CORPUS_DIR
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

from tinyprop.device.protocol import GetFrame, Hello, Label, PullParams, SaveParams

HOST_FRAME, SIZED_FRAME, LABELLED_FRAME = 1, 3, 4


def chunk(kind: int, body: bytes = b"") -> bytes:
    return bytes([kind, len(body)]) + body


def host(msg) -> bytes:
    """A host request: its type, then its payload (the board frames it with a good CRC)."""
    return chunk(HOST_FRAME, bytes([msg.TYPE]) + msg.pack())


def header(fmt: int, width: int, height: int, *, wait: bool = False, store: int = 0,
           step: int = 0) -> bytes:
    return bytes([fmt | (4 if wait else 0) | store << 3, width - 1, height - 1]) + \
        struct.pack("<I", step)


def sessions() -> dict[str, bytes]:
    pixels = bytes(range(0, 250, 7))
    hosted = (header(2, 12, 10, wait=True) + host(Hello()) + host(GetFrame(2))
              + chunk(SIZED_FRAME, pixels) + host(Label(1)) + chunk(SIZED_FRAME, pixels[3:])
              + host(Label(7)) + host(Label(2)) + chunk(SIZED_FRAME, pixels[5:])
              + host(Label(0)) + host(PullParams(0, 64)) + host(SaveParams()))
    button = header(1, 8, 8, store=1, step=40) + b"".join(
        chunk(LABELLED_FRAME, bytes([k % 10]) + pixels[k:]) for k in range(7))
    gray = header(0, 5, 5, store=2) + chunk(SIZED_FRAME, pixels) + chunk(2, pixels[:9]) + \
        chunk(LABELLED_FRAME, bytes([200]) + pixels)
    return {"hosted": hosted, "button": button, "gray": gray}


def main(corpus: Path) -> int:
    corpus.mkdir(parents=True, exist_ok=True)
    found = sessions()
    for name, data in found.items():
        (corpus / f"seed_{name}").write_bytes(data)
    print(f"seed_label.py: {len(found)} sessions into {corpus}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
