"""Building C with make: the portable core for this machine (libtinyprop.so for the ctypes
binding, libtinyprop.a for C programs such as the test drivers) through firmware/Makefile, and
board firmware through the board folder's Makefile (boards/<name>/, or a user's board folder
anywhere: tinyprop.device.profiles), with a model blob compiled in.

make decides what to rebuild. Builds that share files hold a file lock while make runs (the
core's folder; a board firmware's own output): test workers in parallel processes share build/.
The sources are tinyprop.paths.REPO_ROOT's (the checkout, or the copy an installed package
carries); everything built goes under tinyprop.paths.BUILD_ROOT, never beside the sources.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
import zlib
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from functools import cache
from pathlib import Path

import numpy as np

from ..compile.blob import blob_header, blob_id
from ..errors import TinypropError
from ..paths import BUILD_ROOT, REPO_ROOT, file_lock, setup_hint
from .profiles import BoardProfile, load_profile

FIRMWARE_DIR = REPO_ROOT / "firmware"
CORE_BUILD = BUILD_ROOT / "firmware"  # BUILD= of firmware/Makefile
BLOB_DIR = BUILD_ROOT / "blobs"
SAMPLES_DIR = BUILD_ROOT / "samples"

# A program linking the core adds these to `make print-cflags` (the headers, the C standard).
PROGRAM_FLAGS = ["-O2", "-g", "-Wall", "-Wextra", "-Werror"]
SAN_FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all",
             "-fno-omit-frame-pointer"]


def _need(what: str, *tools: tuple[str, str]) -> None:
    """Refuse, in one line, to build `what` without its tools ((program, Debian packages))."""
    for tool, package in tools:
        if shutil.which(tool) is None:
            raise TinypropError(f"{what} needs {tool}, which is not installed; run "
                                f"`sudo apt-get install {package}`{setup_hint()}")


def build_lock(directory: Path) -> AbstractContextManager[None]:
    """`directory`'s build lock (directory/.lock, paths.file_lock): every process that runs make
    into that directory, or writes a file there that a build reads, holds it, so two processes
    never compile the same object or write the same header at once."""
    return file_lock(directory / ".lock")


def _make(args: Sequence[str], lock_dir: Path, what: str, output: str = "") -> str:
    """Run make with `args` while holding lock_dir's lock (with `output`, the name of what the
    run builds, that output's own lock, lock_dir/.<output>.lock); its standard output."""
    with file_lock(lock_dir / (f".{output}.lock" if output else ".lock")):
        result = subprocess.run(["make", "--no-print-directory", *args], check=False,
                                capture_output=True, text=True)
    if result.returncode != 0:
        log = lock_dir / (f"{output}.build-error.log" if output else "build-error.log")
        log.write_text(result.stdout + result.stderr)
        raise TinypropError(f"building {what} failed: {_first_error(result.stderr)}; full output "
                            f"in {log}")
    return result.stdout


def _first_error(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or lines or ["make failed with no output"])[0]


# ---- the core, for this machine ----

def core_library(shared: bool = True, sanitize: bool = False,
                 dsp_emulation: bool = False) -> Path:
    """The core built for this machine: libtinyprop.so (`shared`, what ctypes loads) or
    libtinyprop.a (what C programs link); `sanitize` adds ASan+UBSan (a sanitized .so loads into
    Python only with libasan preloaded, so sanitizer tests link a C driver instead);
    `dsp_emulation` builds the Cortex-M DSP kernels in, their intrinsics in portable C (tests)."""
    _need("the host engine (the C core built for this machine)", ("gcc", "gcc make"),
          ("make", "gcc make"))
    if not FIRMWARE_DIR.is_dir():
        raise TinypropError(f"{FIRMWARE_DIR}: firmware sources not found; this tinyprop is "
                            "incomplete: reinstall it (`pip install --force-reinstall tinyprop`)")
    _make(["-C", str(FIRMWARE_DIR), f"BUILD={CORE_BUILD}", "host-shared" if shared else "host",
           *(["SANITIZE=1"] if sanitize else []), *(["DSP_EMULATION=1"] if dsp_emulation else [])],
          CORE_BUILD, "the C core")
    return CORE_BUILD / (("host-san" if sanitize else "host")
                         + ("-dspemu" if dsp_emulation else "")) / (
        "libtinyprop.so" if shared else "libtinyprop.a")


@cache
def core_cflags() -> tuple[str, ...]:
    """What a C program that uses the core compiles with (`make print-cflags`)."""
    _need("a C program using the core", ("make", "gcc make"))
    out = _make(["-s", "-C", str(FIRMWARE_DIR), f"BUILD={CORE_BUILD}", "print-cflags"],
                CORE_BUILD, "the core's compiler flags")
    return tuple(shlex.split(out))


@cache
def core_sources() -> tuple[Path, ...]:
    """The library's C sources (`make print-sources`, firmware/sources.mk's list)."""
    _need("the list of the core's sources", ("make", "gcc make"))
    out = _make(["-s", "-C", str(FIRMWARE_DIR), f"BUILD={CORE_BUILD}", "print-sources"],
                CORE_BUILD, "the core's source list")
    return tuple(Path(line) for line in out.split())


def build_program(main_source: str | os.PathLike, sanitize: bool = False,
                  include_dirs: Iterable[str | os.PathLike] = (),
                  dsp_emulation: bool = False) -> Path:
    """An executable of one C file holding main() linked against the core (test drivers,
    benchmarks; `dsp_emulation`: the core with the emulated DSP kernels, core_library), rebuilt
    when the file, the library or the flags changed."""
    main_source = Path(main_source).resolve()
    lib = core_library(shared=False, sanitize=sanitize, dsp_emulation=dsp_emulation)
    flags = [*core_cflags(), *PROGRAM_FLAGS, *(SAN_FLAGS if sanitize else []),
             *(f"-I{d}" for d in include_dirs)]
    out = CORE_BUILD / "programs" / (f"{main_source.parent.name}_{main_source.stem}"
                                     + ("-san" if sanitize else "")
                                     + ("-dspemu" if dsp_emulation else ""))
    stamp = out.with_name(out.name + ".cmd")
    recipe = "\n".join([str(main_source), *flags])
    if (out.exists() and stamp.exists() and stamp.read_text() == recipe
            and out.stat().st_mtime >= max(main_source.stat().st_mtime, lib.stat().st_mtime)):
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    # built beside, then renamed: a concurrent builder never runs a half-written file
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=out.name + ".")
    os.close(fd)
    cmd = ["gcc", *flags, str(main_source), str(lib), "-lm", "-o", tmp]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        os.unlink(tmp)
        raise TinypropError(f"building {main_source.name} against the C core failed "
                            f"({' '.join(cmd)}):\n{proc.stderr}")
    os.replace(tmp, out)
    stamp.write_text(recipe)
    return out


# ---- board firmware ----

def board_build_root(board: BoardProfile) -> Path:
    """TP_BUILD of `board`'s builds (its output goes to <TP_BUILD>/<name>/): build/ for the
    repository's boards; for a board folder elsewhere, a folder named by a digest of its path,
    so two folders of one name never share objects."""
    if board.in_tree:
        return BUILD_ROOT
    return BUILD_ROOT / "boards" / hashlib.sha256(str(board.folder).encode()).hexdigest()[:12]


def build_firmware(
    board: str = "qemu-m4", app: str | None = None, variables: dict[str, str] | None = None
) -> Path:
    """Build `app` ("selftest", or None for the board's default, the device firmware) for
    `board` (a --board value: a board's name or folder) with its folder's Makefile and return
    the executable; make rebuilds only what changed. `variables` are extra make variables,
    e.g. {"BLOB": "path/to/model_tpb.h"}."""
    profile = load_profile(board)
    if profile.toolchain is None:
        raise TinypropError(f"{profile.where()}: tinyprop does not build this board (its "
                            "descriptor has no build section); flash it with tinyprop flash")
    _need(f"building for {profile.name}",
          (profile.toolchain.compiler, profile.toolchain.packages), ("make", "make"))
    build_root = board_build_root(profile)
    make = ["-C", str(profile.folder), f"TP_ROOT={REPO_ROOT}", f"TP_BUILD={build_root}"]
    if app is not None:
        make.append(f"APP={app}")
    make += [f"{name}={value}" for name, value in (variables or {}).items()]
    out = Path(_make([*make, "path"], build_root / profile.name,
                     f"the path of {profile.name}'s firmware").strip())
    # The library's objects, shared by every output of the application (app.mk), are built
    # first under the board's objects lock; then each output (an app, a blob, a samples
    # header) compiles its own app.o and links under its own lock, so two processes build two
    # blobs' firmware at once, and one waiting for the same output finds it built.
    what = f"{profile.name} firmware (APP={app or 'device'})"
    _make([*make, "lib"], out.parent, what, output="obj-lib")
    _make(make, out.parent, what, output=out.name)
    return out


def write_blob_header(blob: bytes) -> Path:
    """blob_header(blob) as build/blobs/<blob id>/model_tpb.h (what firmware builds include as
    TP_MODEL_HEADER); rewritten only when different, so make and PlatformIO rebuild nothing
    for an unchanged blob."""
    return _write_header(BLOB_DIR / f"{blob_id(blob):08x}" / "model_tpb.h", blob_header(blob))


def build_device_firmware(board: str, blob: bytes) -> Path:
    """Firmware for `board` (a board tinyprop builds) with `blob` compiled in; cached per
    blob."""
    return build_firmware(board, variables={"BLOB": str(write_blob_header(blob))})


def samples_header(
    inputs: np.ndarray, labels: Sequence[int], *, steps: int, lr: float, seed: int
) -> str:
    """The C header of a self-training run (firmware/apps/selftrain/selftrain.c): the int8
    samples, one a row of `inputs`, their labels, and the run's steps, learning rate and seed."""
    x = np.asarray(inputs)
    if x.dtype != np.int8 or x.ndim < 2 or len(x) != len(labels) or len(x) == 0:
        raise TinypropError(
            f"samples header: need int8 samples, one a row, and one label each (got {x.dtype} "
            f"of shape {x.shape} and {len(labels)} labels); convert them with to_model_input"
        )
    if steps < len(x):
        raise TinypropError(
            f"samples header: {steps} steps do not make one pass over {len(x)} samples; "
            "give at least as many steps as samples"
        )
    rows = x.reshape(len(x), -1)
    # lr as a hexadecimal float literal: exactly the float32 the reference trainer uses
    lines = [
        "/* Generated by tinyprop.device.firmware.write_samples_header: a self-training run. */",
        "#include <stdint.h>",
        f"#define TP_SAMPLES_COUNT {len(rows)}u",
        f"#define TP_SAMPLES_INPUT_BYTES {rows.shape[1]}u",
        f"#define TP_SELFTRAIN_STEPS {steps}u",
        f"#define TP_SELFTRAIN_LR {float(np.float32(lr)).hex()}f",
        f"#define TP_SELFTRAIN_SEED {seed & 0xFFFFFFFF}u",
        f"const uint8_t tp_selftrain_labels[{len(rows)}] = "
        f"{{{','.join(str(int(y)) for y in labels)}}};",
        f"const int8_t tp_selftrain_samples[{rows.size}] = {{",
    ]
    flat = rows.reshape(-1).tolist()
    lines += ["  " + ",".join(map(str, flat[i : i + 32])) + "," for i in range(0, len(flat), 32)]
    return "\n".join([*lines, "};"]) + "\n"


def write_samples_header(
    inputs: np.ndarray, labels: Sequence[int], *, steps: int = 16, lr: float = 0.02,
    seed: int = 7,
) -> Path:
    """samples_header(...) as build/samples/<crc32 of its text>/samples.h (SAMPLES= of
    `make APP=selftrain`), rewritten only when different, like write_blob_header."""
    text = samples_header(inputs, labels, steps=steps, lr=lr, seed=seed)
    return _write_header(SAMPLES_DIR / f"{zlib.crc32(text.encode()):08x}" / "samples.h", text)


def _write_header(header: Path, text: str) -> Path:
    # Compared and written under the folder's lock: two processes writing the same header at once
    # write it once (a second write, the same text with a newer time, would make the other's
    # build recompile), and a build never includes half a header.
    with build_lock(header.parent):
        if not header.exists() or header.read_text() != text:
            tmp = header.with_suffix(".tmp")
            tmp.write_text(text)
            tmp.replace(header)
    return header
