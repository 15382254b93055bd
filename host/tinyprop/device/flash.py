"""Flashing a real board: the command that builds the device firmware with PlatformIO (a blob
compiled in) and uploads it, or writes a prebuilt image with esptool, as the board's descriptor
says (profile.json's flash: tinyprop.device.profiles).

    job = flash_job(load_profile("nano33ble"), blob=Path("model.tpb"), port=None)
    subprocess.run(job.command, env=job.env)

The learn application (the board learns from its own camera, firmware/apps/learn/) instead of
the device loop: app="learn", built by the board's learn env, an env of platformio.ini named
`<name>-learn` that extends the board's (nano33ble-learn; esp32cam-learn and esp32s3eye-learn,
one for each camera board, chosen with pio_env):

    job = flash_job(load_profile("esp32"), blob=Path("model.tpb"), app="learn",
                    pio_env="esp32cam-learn", learn_config=Path("learn_config.h"))

Every missing piece (tool, port, file), and a blob larger than the board's profile allows, is a
one-line error naming it, before anything is built. The PlatformIO project is the board folder
when it has its own platformio.ini (a user's board), else tinyprop.paths.REPO_ROOT's
(platformio.ini, boards/, firmware/, monitor/); for an installed package its build files
(PlatformIO's workspace, .pio/ in a checkout) go under tinyprop.paths.BUILD_ROOT.
"""

from __future__ import annotations

import configparser
import importlib.util
import os
import shutil
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import TinypropError
from ..paths import BUILD_ROOT, IN_CHECKOUT, REPO_ROOT
from .profiles import BoardProfile, Flashing, blob_needs, check_fits

# Where PlatformIO installs a platform from on a board's first build.
PIO_REGISTRY = ("api.registry.platformio.org", 443)


@dataclass(frozen=True)
class FlashJob:
    """A command to run (with `env`, None: this process's), and the tool it runs."""

    command: list[str]
    env: dict[str, str] | None
    tool: str  # "pio" or "esptool"


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
    """The given port if it exists, else the only USB serial port present (real boards
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


def _flashing(board: BoardProfile) -> Flashing:
    if board.flashing is None:
        raise TinypropError(f"{board.where()}: not a board to flash (its descriptor has no "
                            f"flash section); tinyprop builds and starts it itself: "
                            f"tinyprop train BLOB --board {board.arg}")
    return board.flashing


def pio_project(board: BoardProfile) -> Path:
    """The PlatformIO project holding the board's env: its own folder's, else the tree's."""
    return board.folder if (board.folder / "platformio.ini").is_file() else REPO_ROOT


def image_job(board: BoardProfile, image: Path, port: str | None) -> FlashJob:
    """esptool writing the prebuilt application `image` to the board."""
    spec = _flashing(board).image
    if spec is None:
        raise TinypropError(f"--image: {board.where()} takes no prebuilt image (its descriptor "
                            f"has no flash.image); build and upload the {board.name} with "
                            "--blob instead")
    if not image.is_file():
        env = board.flashing.platformio_env
        raise TinypropError(f"--image {image}: no such file; build it with "
                            f"`pio run -e {env}` (.pio/build/{env}/firmware.bin)")
    esptool = esptool_command()
    if esptool is None:
        raise TinypropError("--image needs esptool, which is not installed; run "
                            "`pip install esptool`")
    return FlashJob([*esptool, "--chip", spec.chip, "--port", resolve_port(port), "--baud",
                     str(spec.baud), "write_flash", spec.offset, str(image)], None, "esptool")


def check_blob(board: BoardProfile, blob_path: Path) -> None:
    """The blob exists and fits the board's profile: refused before anything is built."""
    if not blob_path.is_file():
        raise TinypropError(f"--blob {blob_path}: no such file; make one with "
                            f"`tinyprop convert MODEL.tflite -o MODEL.tpb --board {board.arg}`")
    check_fits(blob_needs(blob_path.read_bytes()), board.capacity(), board.where(), board.arg)


def learn_envs(board: BoardProfile) -> list[str]:
    """The envs building the learn application for `board`: named `<name>-learn`, extending the
    board's env."""
    project, base = pio_project(board), f"env:{_flashing(board).platformio_env}"
    ini = read_ini(project)
    names = [s.removeprefix("env:") for s in ini.sections() if s.startswith("env:")]
    return [n for n in names if n.endswith("-learn") and base in env_sections(ini, n)]


def app_env(board: BoardProfile, app: str, pio_env: str | None) -> str:
    """The PlatformIO env building `app` ("device" or "learn") for `board`; `pio_env` chooses
    among the board's learn envs (one for each camera board), needed only when it has several."""
    if app == "device":
        if pio_env not in (None, _flashing(board).platformio_env):
            raise TinypropError(f"env {pio_env}: the device firmware of the {board.name} is "
                                f"env {board.flashing.platformio_env}; leave the env out")
        return board.flashing.platformio_env
    if app != "learn":
        raise TinypropError(f"app {app!r}: no such application; choose device or learn")
    envs = learn_envs(board)
    if not envs:
        raise TinypropError(f"{board.where()}: no learn build (no env named *-learn extending "
                            f"env {board.flashing.platformio_env} in "
                            f"{pio_project(board) / 'platformio.ini'}); the learn application "
                            "needs a board with a camera: nano33ble, esp32")
    if pio_env is None and len(envs) == 1:
        return envs[0]
    if pio_env not in envs:
        given = "no camera board given" if pio_env is None else f"env {pio_env} is not one"
        raise TinypropError(f"the {board.name}'s learn builds are {', '.join(envs)} ({given}): "
                            "choose your camera board's with --env")
    return pio_env


def pio_job(board: BoardProfile, blob_path: Path | None, port: str | None,
            upload: bool = True, app: str = "device", pio_env: str | None = None,
            learn_config: Path | None = None) -> FlashJob:
    """`pio run` building `app`'s firmware for `board` (the device loop, or the learn
    application: app_env) with the blob compiled in, and uploading it unless `upload` is
    False. `learn_config`: the learn application's configuration header (tp_learn.h's
    TP_LEARN_CONFIG)."""
    env_name = app_env(board, app, pio_env)
    if app == "learn" and blob_path is None:
        raise TinypropError(f"the learn application needs a blob to compile in: --blob MODEL.tpb "
                            f"(`tinyprop convert MODEL.tflite -o MODEL.tpb --board {board.arg}`)")
    if learn_config is not None and (app != "learn" or not learn_config.is_file()):
        raise TinypropError(f"learn config {learn_config}: " + (
            "only the learn application takes one" if app != "learn" else "no such file"))
    if blob_path is not None:
        check_blob(board, blob_path)
    pio = find_pio()
    if pio is None:
        raise TinypropError(f"flashing {board.name} needs PlatformIO (pio), which is not "
                            "installed; run `pip install platformio`"
                            + (" (or pass --image)" if board.flashing.image else ""))
    upload_port = resolve_port(port) if upload else None
    env = dict(os.environ)
    if not IN_CHECKOUT:  # the installed package's folder is not PlatformIO's to write in
        env.setdefault("PLATFORMIO_WORKSPACE_DIR", str(BUILD_ROOT / "platformio"))
    check_platform(pio_project(board), env_name, env,
                   "" if app == "learn" else ", or flash a prebuilt image with --image")
    if blob_path is not None:
        from .firmware import write_blob_header

        header = write_blob_header(blob_path.read_bytes())
        env["PLATFORMIO_BUILD_FLAGS"] = f'-DTP_MODEL_HEADER=\\"{header}\\"'
    if learn_config is not None:
        env["PLATFORMIO_BUILD_FLAGS"] += f' -DTP_LEARN_CONFIG=\\"{learn_config.resolve()}\\"'
    command = [pio, "run", "-d", str(pio_project(board)), "-e", env_name]
    if upload_port is not None:
        command += ["-t", "upload", "--upload-port", upload_port]
    return FlashJob(command, env, "pio")


def read_ini(project: Path) -> configparser.ConfigParser:
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(project / "platformio.ini")
    return ini


def env_sections(ini: configparser.ConfigParser, env_name: str) -> list[str]:
    """The sections env `env_name` takes its options from, first to last: its own, those it
    `extends` and [env], as PlatformIO looks them up."""
    todo, seen = [f"env:{env_name}"], []
    while todo:
        section = todo.pop(0)
        if section in seen or not ini.has_section(section):
            continue
        seen.append(section)
        todo += [e.strip() for e in ini.get(section, "extends", fallback="").split(",") if e]
        todo.append("env")
    return seen


def env_platform(project: Path, env_name: str) -> str | None:
    """The platform name (no version or owner) env `env_name` of project's platformio.ini
    builds with, following `extends` and [env]; None when it names none."""
    ini = read_ini(project)
    for section in env_sections(ini, env_name):
        if ini.has_option(section, "platform"):
            return ini.get(section, "platform").split("@")[0].rstrip("/").split("/")[-1]
    return None


def check_platform(project: Path, env_name: str, env: dict[str, str], other: str = "") -> None:
    """Refuse, in one line, a build PlatformIO cannot start: its platform is not installed and
    its registry cannot be reached (offline, PlatformIO would sit at "Installing ..." retrying
    until killed); `other` ends the fix with another way, if the command has one."""
    name = env_platform(project, env_name)
    core = Path(env.get("PLATFORMIO_CORE_DIR") or Path.home() / ".platformio")
    if name in (None, "native") or any(p.name.split("@")[0] == name
                                       for p in (core / "platforms").glob("*")):
        return
    try:
        socket.create_connection(PIO_REGISTRY, timeout=5).close()
    except OSError as exc:
        raise TinypropError(
            f"env {env_name} needs PlatformIO's {name} platform, which is not installed in "
            f"{core / 'platforms'}, and its registry {PIO_REGISTRY[0]} cannot be reached "
            f"({exc.strerror or exc}); build once with the network (`pio run -e {env_name}` "
            f"installs it){other}") from None


def flash_job(board: BoardProfile, *, blob: Path | None = None, image: Path | None = None,
              port: str | None = None, build_only: bool = False, app: str = "device",
              pio_env: str | None = None, learn_config: Path | None = None) -> FlashJob:
    """What `tinyprop flash` (app "device") and `tinyprop learn --board nano33ble|esp32` (app
    "learn") run: esptool for an `image`, else PlatformIO (`build_only`: build, upload
    nothing; pio_env and learn_config: pio_job)."""
    if image is None:
        return pio_job(board, blob, port, not build_only, app, pio_env, learn_config)
    if build_only:
        raise TinypropError("--build-only builds with PlatformIO and --image writes a "
                            "prebuilt image: choose one")
    return image_job(board, image, port)
