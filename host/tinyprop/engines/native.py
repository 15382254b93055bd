"""The C core (firmware/) on this machine: built with gcc on demand, bound with ctypes.

The library is cached under build/native/ and rebuilt when any firmware source is newer or the
set of core sources changed. The core is every firmware/*.c that does not include tp_board.h
(the same rule as firmware/Makefile). With TINYPROP_NATIVE_SANITIZE=1 (or sanitize=True) the build
adds ASan+UBSan; loading such a library into Python needs LD_PRELOAD of libasan, so sanitizer
tests link a small C driver instead (build_program).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from ..compile.blob import read_blob
from ..errors import TinypropError
from ..paths import REPO_ROOT as REPO

FIRMWARE = REPO / "firmware"
BUILD = REPO / "build" / "native"
SANITIZE_ENV = "TINYPROP_NATIVE_SANITIZE"

CFLAGS = ["-std=c99", "-O2", "-g", "-Wall", "-Wextra", "-Werror", "-ffp-contract=off"]
SAN_FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all",
             "-fno-omit-frame-pointer"]

STATUS_NAMES = (
    "TP_OK", "TP_ERR_BLOB_TRUNCATED", "TP_ERR_BLOB_MAGIC", "TP_ERR_BLOB_VERSION",
    "TP_ERR_BLOB_SIZE", "TP_ERR_BLOB_CRC", "TP_ERR_BLOB_BOUNDS", "TP_ERR_BLOB_INVALID",
    "TP_ERR_ARENA_TOO_SMALL", "TP_ERR_PARAMS_TOO_SMALL", "TP_ERR_BAD_LABEL", "TP_ERR_BAD_INPUT",
    "TP_ERR_NOT_LOADED", "TP_ERR_NONFINITE", "TP_ERR_NO_TRAIN", "TP_ERR_ARG",
)
STATUS = {name: code for code, name in enumerate(STATUS_NAMES)}


class NativeError(TinypropError):
    """The C core returned a status other than TP_OK; .status is its name (tinyprop.h)."""

    def __init__(self, message: str, status: str):
        super().__init__(message)
        self.status = status


class Requirements(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint32) for name in (
        "arena_infer", "arena_train", "params", "input_bytes", "n_classes", "model_id", "blob_id",
        "optimizer")]


class Result(ctypes.Structure):
    _fields_ = [("loss", ctypes.c_float), ("prediction", ctypes.c_int32),
                ("label", ctypes.c_int32), ("arena_peak", ctypes.c_uint32),
                ("skipped", ctypes.c_uint32)]


def status_name(code: int) -> str:
    return STATUS_NAMES[code] if 0 <= code < len(STATUS_NAMES) else f"TP_ERR_UNKNOWN({code})"


def core_sources() -> list[Path]:
    """The portable core: firmware/*.c that do not reach a board."""
    if not FIRMWARE.is_dir():
        raise TinypropError(f"{FIRMWARE}: firmware sources not found; the host engine needs a "
                            "source checkout of tinyprop")
    return [p for p in sorted(FIRMWARE.glob("*.c")) if "tp_board.h" not in p.read_text()]


def _compiler() -> str:
    cc = os.environ.get("CC", "gcc")
    path = shutil.which(cc)
    if path is None:
        raise TinypropError(f"C compiler '{cc}' not found: the host engine builds the C core "
                            "with it; install gcc (apt-get install gcc) or set CC")
    return path


def _build(out: Path, sources: list[Path], flags: list[str]) -> Path:
    """Compile sources into out unless it is up to date (newer than every input, same inputs)."""
    inputs = sources + sorted(FIRMWARE.glob("*.h"))
    recipe = "\n".join([*map(str, sources), *flags])
    stamp = out.with_name(out.name + ".cmd")
    fresh = (out.exists() and stamp.exists() and stamp.read_text() == recipe
             and out.stat().st_mtime >= max(p.stat().st_mtime for p in inputs))
    if fresh:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    # build beside, then rename: concurrent builders never load a half-written file
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=out.name + ".")
    os.close(fd)
    cmd = [_compiler(), *CFLAGS, *flags, f"-I{FIRMWARE}", *map(str, sources), "-o", tmp]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        os.unlink(tmp)
        raise TinypropError(f"building the C core failed ({' '.join(cmd)}):\n{proc.stderr}")
    os.replace(tmp, out)
    stamp.write_text(recipe)
    return out


def _sanitize_default(sanitize: bool | None) -> bool:
    return os.environ.get(SANITIZE_ENV, "") not in ("", "0") if sanitize is None else sanitize


def build_library(sanitize: bool | None = None) -> Path:
    """The core as a shared library for this machine; path of the cached build."""
    san = _sanitize_default(sanitize)
    name = "libtinyprop-san.so" if san else "libtinyprop.so"
    return _build(BUILD / name, core_sources(), ["-shared", "-fPIC", *(SAN_FLAGS if san else [])])


def build_program(main_source: str | os.PathLike, sanitize: bool | None = None) -> Path:
    """An executable of the core plus one C file holding main() (test drivers, benchmarks)."""
    san = _sanitize_default(sanitize)
    main_source = Path(main_source).resolve()
    name = main_source.stem + ("-san" if san else "")
    return _build(BUILD / name, [*core_sources(), main_source], SAN_FLAGS if san else [])


_LIB: dict[Path, ctypes.CDLL] = {}


def load_library(sanitize: bool | None = None) -> ctypes.CDLL:
    path = build_library(sanitize)
    if path not in _LIB:
        lib = ctypes.CDLL(str(path))
        u8p = ctypes.c_char_p
        lib.tp_blob_requirements.argtypes = [u8p, ctypes.c_uint32, ctypes.POINTER(Requirements)]
        lib.tp_session_init.argtypes = [ctypes.c_void_p, u8p, ctypes.c_uint32, ctypes.c_void_p,
                                        ctypes.c_uint32, ctypes.c_void_p, ctypes.c_uint32]
        lib.tp_infer.argtypes = [ctypes.c_void_p, ctypes.POINTER(Result)]
        lib.tp_input.argtypes = [ctypes.c_void_p]
        lib.tp_input.restype = ctypes.c_void_p
        lib.tp_output.argtypes = [ctypes.c_void_p]
        lib.tp_output.restype = ctypes.c_void_p
        lib.tp_output_bytes.argtypes = [ctypes.c_void_p]
        lib.tp_output_bytes.restype = ctypes.c_uint32
        lib.tp_session_size.restype = ctypes.c_uint32
        _LIB[path] = lib
    return _LIB[path]


def blob_status(blob: bytes) -> str:
    """What the C loader says about a blob: a status name, "TP_OK" when it accepts it."""
    req = Requirements()
    return status_name(load_library().tp_blob_requirements(blob, len(blob), ctypes.byref(req)))


class NativeSession:
    """One blob bound to arena and params memory owned by this object, run by the C core."""

    def __init__(self, blob: bytes, name: str = "blob"):
        self.name = name
        self.blob = read_blob(blob, name)
        self._lib = lib = load_library()
        self._raw = ctypes.create_string_buffer(bytes(blob), len(blob))  # the core keeps pointers
        req = Requirements()
        self._check(lib.tp_blob_requirements(self._raw, len(blob), ctypes.byref(req)), "load")
        self.requirements = req
        self._arena = ctypes.create_string_buffer(max(req.arena_infer, 1))
        self._params = ctypes.create_string_buffer(req.params) if req.params else None
        self._session = ctypes.create_string_buffer(lib.tp_session_size())
        self._check(lib.tp_session_init(self._session, self._raw, len(blob), self._arena,
                                        len(self._arena), self._params,
                                        req.params if self._params else 0), "load")
        self.input_shape = self.blob.tensors[self.blob.input].shape
        self.output_shape = self.blob.tensors[self.blob.output].shape
        self.last_result = Result()

    def _check(self, code: int, what: str) -> None:
        if code != 0:
            name = status_name(code)
            raise NativeError(f"{self.name}: the C core refused to {what} it ({name}); re-run "
                              "tinyprop convert, and report a bug if it persists", name)

    def infer(self, x: np.ndarray) -> np.ndarray:
        """int8 output (the blob's output shape) for one int8 sample of the input's size."""
        x = np.ascontiguousarray(x)
        if x.dtype != np.int8 or x.size != self.requirements.input_bytes:
            raise TinypropError(f"{self.name}: input is {x.dtype} {x.shape}; expected int8 "
                                f"{self.input_shape}")
        ctypes.memmove(self._lib.tp_input(self._session), x.ctypes.data, x.size)
        self._check(self._lib.tp_infer(self._session, ctypes.byref(self.last_result)), "run")
        n = self._lib.tp_output_bytes(self._session)
        out = ctypes.string_at(self._lib.tp_output(self._session), n)
        return np.frombuffer(out, np.int8).reshape(self.output_shape).copy()
