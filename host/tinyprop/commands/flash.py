"""tinyprop flash: build the device firmware for a real board and upload it.

    tinyprop flash --board nano33ble --blob model.tpb [--port /dev/ttyACM0]   # PlatformIO
    tinyprop flash --board esp32 --blob model.tpb [--port /dev/ttyUSB0]       # PlatformIO
    tinyprop flash --board esp32 --image firmware.bin [--port /dev/ttyUSB0]   # esptool
    tinyprop flash --board nano33ble --blob model.tpb --build-only            # no board needed
    tinyprop flash --board path/to/myboard --blob model.tpb                   # your own board

With --blob the blob is compiled into the firmware (its header, with the arena and params sizes,
goes to PlatformIO as TP_MODEL_HEADER). The board's descriptor (its profile.json's flash) names
the PlatformIO env and the image esptool writes; tinyprop.device.flash makes the command, and
every missing piece is a one-line error naming it, before anything is built.
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

from ..errors import TinypropError


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "flash", help="build and upload the device firmware to a real board",
        description="Build the firmware with PlatformIO (the blob compiled in) and upload it, "
        "or write a prebuilt image with esptool.")  # fmt: skip
    p.add_argument("--board", required=True,
                   help="a real board: its name under boards/ (e.g. nano33ble) or your own "
                   "board's folder, whose profile.json has a flash section")
    p.add_argument("--blob", type=Path, help="training blob (.tpb) to compile into the firmware")
    p.add_argument("--port", help="serial port of the board (default: the only one present)")
    p.add_argument("--image", type=Path,
                   help="write this prebuilt application image with esptool, no build (a board "
                   "whose descriptor has flash.image)")
    p.add_argument("--build-only", action="store_true",
                   help="build the firmware with PlatformIO, upload nothing (no board needed)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..device.flash import flash_job
    from ..device.profiles import load_profile

    board = load_profile(args.board)
    job = flash_job(board, blob=args.blob, image=args.image, port=args.port,
                    build_only=args.build_only)
    print("$", " ".join(job.command), flush=True)
    status = subprocess.run(job.command, env=job.env, check=False).returncode
    if status != 0:
        doing = "building for" if args.build_only else "flashing"
        raise TinypropError(f"{doing} the {board.name} failed ({job.tool} exited with status "
                            f"{status}); its output is above")
    return 0
