"""tinyprop flash: build the device firmware for a real board and upload it.

    tinyprop flash --board nano33ble --blob model.tpb [--port /dev/ttyACM0]   # PlatformIO
    tinyprop flash --board esp32 --blob model.tpb [--port /dev/ttyUSB0]       # PlatformIO
    tinyprop flash --board esp32 --image firmware.bin [--port /dev/ttyUSB0]   # esptool
    tinyprop flash --board nano33ble --blob model.tpb --build-only            # no board needed

With --blob the blob is compiled into the firmware (its header, with the arena and params sizes,
goes to PlatformIO as TP_MODEL_HEADER). Every missing piece (tool, port, file), and a blob
larger than the board's profile allows (boards/<board>/profile.json), is a one-line error naming
it, before anything is built. The PlatformIO project is tinyprop.paths.REPO_ROOT
(platformio.ini, boards/, firmware/, monitor/); for an installed package its build files
(PlatformIO's workspace, .pio/ in a checkout) go under tinyprop.paths.BUILD_ROOT.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ..errors import TinypropError
from ..paths import BUILD_ROOT, IN_CHECKOUT, REPO_ROOT

# board -> PlatformIO env in platformio.ini
PIO_ENVS = {"nano33ble": "nano33ble", "esp32": "esp32dev"}
# esptool: where the Arduino ESP32 application image goes, and a fast, reliable speed
ESP32_APP_OFFSET = "0x10000"
ESPTOOL_BAUD = "921600"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "flash", help="build and upload the device firmware to a real board",
        description="Build the firmware with PlatformIO (the blob compiled in) and upload it, "
        "or write a prebuilt ESP32 image with esptool.")  # fmt: skip
    p.add_argument("--board", required=True, choices=sorted(PIO_ENVS))
    p.add_argument("--blob", type=Path, help="training blob (.tpb) to compile into the firmware")
    p.add_argument("--port", help="serial port of the board (default: the only one present)")
    p.add_argument("--image", type=Path,
                   help="ESP32 only: write this application image with esptool, no build")
    p.add_argument("--build-only", action="store_true",
                   help="build the firmware with PlatformIO, upload nothing (no board needed)")
    p.set_defaults(func=run)


def find_pio() -> str | None:
    """pio on PATH, beside this Python (a venv not activated), or PlatformIO's own install."""
    places = [os.environ.get("PATH", ""), str(Path(sys.executable).parent),
              str(Path.home() / ".platformio" / "penv" / "bin")]
    return shutil.which("pio", path=os.pathsep.join(places))


def esptool_command() -> list[str] | None:
    if importlib.util.find_spec("esptool") is not None:
        return [sys.executable, "-m", "esptool"]
    found = shutil.which("esptool.py") or shutil.which("esptool")
    return [found] if found else None


def resolve_port(port: str | None) -> str:
    """The given port if it exists, else the only USB serial port present (both boards
    enumerate over USB; /dev/ttyS* are the host's own UARTs)."""
    from serial.tools import list_ports

    if port is not None:
        if not port.upper().startswith("COM") and not Path(port).exists():
            raise TinypropError(f"--port {port}: no such serial port; plug the board in and "
                                "check the name with `pio device list`")
        return port
    ports = [p.device for p in list_ports.comports() if p.vid is not None]
    if not ports:
        raise TinypropError("no USB serial port found: plug the board in over USB (a data "
                            "cable), or name its port with --port")
    if len(ports) > 1:
        raise TinypropError(f"several serial ports ({', '.join(ports)}): choose one with --port")
    return ports[0]


def flash_image(image: Path, port: str | None) -> list[str]:
    if not image.is_file():
        raise TinypropError(f"--image {image}: no such file; build it with "
                            "`pio run -e esp32dev` (.pio/build/esp32dev/firmware.bin)")
    esptool = esptool_command()
    if esptool is None:
        raise TinypropError("--image needs esptool, which is not installed; run "
                            "`pip install esptool`")
    return [*esptool, "--chip", "esp32", "--port", resolve_port(port), "--baud", ESPTOOL_BAUD,
            "write_flash", ESP32_APP_OFFSET, str(image)]


def check_blob(board: str, blob_path: Path) -> None:
    """The blob exists and fits the board's profile: refused before anything is built."""
    from ..device.profiles import blob_needs, check_fits, load_profile

    if not blob_path.is_file():
        raise TinypropError(f"--blob {blob_path}: no such file; make one with "
                            f"`tinyprop convert MODEL.tflite -o MODEL.tpb --board {board}`")
    profile = load_profile(board)
    check_fits(blob_needs(blob_path.read_bytes()), profile.capacity(), profile.where(), board)


def pio_command(board: str, blob_path: Path | None, port: str | None,
                upload: bool = True) -> tuple[list[str], dict]:
    """The `pio run` command (and its environment) that builds the firmware for `board`, with
    the blob compiled in, and uploads it unless `upload` is False."""
    if blob_path is not None:
        check_blob(board, blob_path)
    pio = find_pio()
    if pio is None:
        raise TinypropError(f"flashing {board} needs PlatformIO (pio), which is not installed; "
                            "run `pip install platformio` (or pass --image for an ESP32)")
    upload_port = resolve_port(port) if upload else None
    env = dict(os.environ)
    if not IN_CHECKOUT:  # the installed package's folder is not PlatformIO's to write in
        env.setdefault("PLATFORMIO_WORKSPACE_DIR", str(BUILD_ROOT / "platformio"))
    if blob_path is not None:
        from ..device.firmware import write_blob_header

        header = write_blob_header(blob_path.read_bytes())
        env["PLATFORMIO_BUILD_FLAGS"] = f'-DTP_MODEL_HEADER=\\"{header}\\"'
    command = [pio, "run", "-d", str(REPO_ROOT), "-e", PIO_ENVS[board]]
    if upload_port is not None:
        command += ["-t", "upload", "--upload-port", upload_port]
    return command, env


def run(args: argparse.Namespace) -> int:
    if args.image is not None:
        if args.board != "esp32":
            raise TinypropError(f"--image is for the esp32 (esptool); build and upload the "
                                f"{args.board} with --blob instead")
        if args.build_only:
            raise TinypropError("--build-only builds with PlatformIO and --image writes a "
                                "prebuilt image: choose one")
        command, env = flash_image(args.image, args.port), None
    else:
        command, env = pio_command(args.board, args.blob, args.port, not args.build_only)
    tool = "esptool" if args.image is not None else "pio"
    print("$", " ".join(command), flush=True)
    status = subprocess.run(command, env=env, check=False).returncode
    if status != 0:
        doing = "building for" if args.build_only else "flashing"
        raise TinypropError(f"{doing} the {args.board} failed ({tool} exited with status "
                            f"{status}); its output is above")
    return 0
