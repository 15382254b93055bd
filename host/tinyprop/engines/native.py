"""The C core on this machine, in process (`--board host`): the one ctypes binding of
firmware/include/tinyprop.h.

The library is libtinyprop.so from `make -C firmware host-shared` (tinyprop.device.firmware
builds it; make rebuilds it when a source changed). Statuses are tinyprop.status's, read from
the header the library is built with (tests/test_status.py compares them with its
tp_status_name and tp_status_message).
"""

from __future__ import annotations

import ctypes
from functools import cache

import numpy as np

from ..compile.blob import read_blob
from ..device.firmware import core_library
from ..errors import TinypropError
from ..status import Status, StatusError, status_name
from .base import Engine, HParams, Model, StepResult


class NativeError(StatusError):
    """The C core returned a status other than TP_OK (.status, a tinyprop.status.Status)."""


class Requirements(ctypes.Structure):
    """tp_requirements."""

    _fields_ = [(name, ctypes.c_uint32) for name in (
        "arena_infer", "arena_train", "params", "input_bytes", "n_classes", "model_id", "blob_id",
        "optimizer")]


class Result(ctypes.Structure):
    """tp_result."""

    _fields_ = [("loss", ctypes.c_float), ("prediction", ctypes.c_int32),
                ("label", ctypes.c_int32), ("arena_peak", ctypes.c_uint32),
                ("skipped", ctypes.c_uint32)]


class Fault(ctypes.Structure):
    """tp_fault: which loader check refused a blob (tp_fault_text writes it as one line)."""

    _fields_ = [("status", ctypes.c_int), ("check", ctypes.c_uint16), ("field", ctypes.c_uint16),
                ("section", ctypes.c_uint32), ("record", ctypes.c_uint32),
                ("file", ctypes.c_char_p), ("line", ctypes.c_uint32)]


class _HParams(ctypes.Structure):
    """tp_hparams."""

    _fields_ = [("lr", ctypes.c_float), ("momentum", ctypes.c_float), ("seed", ctypes.c_uint32),
                ("flags", ctypes.c_uint32)]


TP_HP_NO_QAS = 1
# tp_row_source: (ctx, first row, rows, destination, bytes) -> tp_status
ROW_SOURCE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32,
                              ctypes.c_void_p, ctypes.c_uint32)


@cache
def load_library() -> ctypes.CDLL:
    """libtinyprop.so, built if needed, with the signatures of tinyprop.h."""
    lib = ctypes.CDLL(str(core_library(shared=True)))
    p, u32 = ctypes.c_void_p, ctypes.c_uint32
    signatures = {
        "tp_blob_requirements": ([ctypes.c_char_p, u32, ctypes.POINTER(Requirements)],
                                 ctypes.c_int),
        "tp_blob_check": ([ctypes.c_char_p, u32, ctypes.POINTER(Requirements),
                           ctypes.POINTER(Fault)], ctypes.c_int),
        "tp_session_fault": ([p], ctypes.POINTER(Fault)),
        "tp_fault_text": ([ctypes.POINTER(Fault), ctypes.c_char_p, u32], u32),
        "tp_session_size": ([], u32),
        "tp_session_init": ([p, ctypes.c_char_p, u32, p, u32, p, u32], ctypes.c_int),
        "tp_input": ([p], p),
        "tp_output": ([p], p),
        "tp_output_bytes": ([p], u32),
        "tp_class_name": ([p, u32], ctypes.c_char_p),
        "tp_infer": ([p, ctypes.POINTER(Result)], ctypes.c_int),
        "tp_train_step": ([p, ctypes.c_int32, ctypes.POINTER(Result)], ctypes.c_int),
        "tp_set_hparams": ([p, ctypes.POINTER(_HParams)], ctypes.c_int),
        "tp_set_step": ([p, u32], None),
        "tp_reset_params": ([p], ctypes.c_int),
        "tp_status_name": ([ctypes.c_int], ctypes.c_char_p),
        "tp_status_message": ([ctypes.c_int], ctypes.c_char_p),
        "tp_set_row_source": ([p, ROW_SOURCE, p], None),
    }
    for name, (args, result) in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, result
    return lib


def blob_status(blob: bytes) -> str:
    """What the C loader says about a blob: a status name, "TP_OK" when it accepts it."""
    req = Requirements()
    return status_name(load_library().tp_blob_requirements(blob, len(blob), ctypes.byref(req)))


def fault_text(fault: Fault) -> str:
    """A fault as tp_fault_text writes it: one line naming the status, where and the check."""
    lib = load_library()
    n = lib.tp_fault_text(ctypes.byref(fault), None, 0) + 1
    buf = ctypes.create_string_buffer(n)
    lib.tp_fault_text(ctypes.byref(fault), buf, n)
    return buf.value.decode()


def blob_fault(blob: bytes) -> str:
    """What the C loader says about a blob, as one line: "TP_OK" when it accepts it, else the
    status, where and the check that refused it (tp_blob_check, tp_fault_text)."""
    req, fault = Requirements(), Fault()
    fault.status = load_library().tp_blob_check(blob, len(blob), ctypes.byref(req),
                                                ctypes.byref(fault))
    return fault_text(fault)


def aligned_buffer(n: int) -> ctypes.Array:
    """n bytes (at least 1) at a multiple of TP_MEMORY_ALIGN (8): an array of uint64s."""
    return (ctypes.c_uint64 * max((n + 7) // 8, 1))()


class NativeEngine(Engine):
    """One blob bound to arena and params memory owned by this object, run by the C core.
    `.requirements` is what tp_blob_requirements reported, `.last_result` the tp_result of the
    last call."""

    name = "host"

    def __init__(self, model: Model, hparams: HParams | None = None):
        self.model = model
        self._lib = lib = load_library()
        blob = model.blob
        self._raw = ctypes.create_string_buffer(blob, len(blob))  # the core keeps pointers
        req, fault = Requirements(), Fault()
        fault.status = lib.tp_blob_check(self._raw, len(blob), ctypes.byref(req),
                                         ctypes.byref(fault))
        self._refused(fault)
        self.requirements = req
        arena_bytes = max(req.arena_infer, req.arena_train)
        self._arena = aligned_buffer(arena_bytes)
        # no params region for an inference blob: the core reads every weight from the blob
        self._params = aligned_buffer(req.params) if req.params else None
        self._session = ctypes.create_string_buffer(lib.tp_session_size())
        lib.tp_session_init(self._session, self._raw, len(blob), self._arena, arena_bytes,
                            self._params, req.params)
        self._refused(lib.tp_session_fault(self._session).contents)
        info = read_blob(blob, model.name)  # the C loader accepted it: so does this reader
        self.input_shape = tuple(info.tensors[info.input].shape)
        self.output_shape = tuple(info.tensors[info.output].shape)
        self.last_result = Result()
        self._sample = np.zeros(0, np.int8)
        self.rows_read: list[tuple[int, int]] = []  # (first row, rows) a row-band blob asked for
        self._rows = ROW_SOURCE(self._read_rows)  # kept: the core holds the pointer
        lib.tp_set_row_source(self._session, self._rows, None)
        self._hp = _HParams()
        self.set_hparams(hparams or HParams())

    def class_names(self) -> tuple[str, ...] | None:
        """The class names the core reads from the blob (tp_class_name), None without them."""
        first = self._lib.tp_class_name(self._session, 0)
        if first is None:
            return None
        n = self.requirements.n_classes
        return tuple(self._lib.tp_class_name(self._session, k).decode() for k in range(n))

    def _refused(self, fault: Fault) -> None:
        """Raise, with the fault's line, when the core refused the blob or its memory."""
        if fault.status != Status.TP_OK:
            raise NativeError(Status(fault.status), self.model.name,
                              f"the C core refused to load it: {fault_text(fault)}")

    def _check(self, code: int, what: str) -> None:
        if code != Status.TP_OK:
            raise NativeError(Status(code), self.model.name, f"the C core refused the {what}")

    def _put(self, x: np.ndarray) -> None:
        x = np.ascontiguousarray(x)
        if x.dtype != np.int8 or x.size != self.requirements.input_bytes:
            raise TinypropError(f"{self.model.name}: input is {x.dtype} {x.shape} ({x.nbytes} "
                                f"bytes); expected int8 {self.input_shape} "
                                f"({self.requirements.input_bytes} bytes)")
        at = self._lib.tp_input(self._session)
        if at is None:  # the blob reads its input in row bands: _read_rows serves them
            self._sample = x.reshape(-1).copy()
            self.rows_read = []
            return
        ctypes.memmove(at, x.ctypes.data, x.size)

    def _read_rows(self, _ctx, row: int, n: int, dst: int, nbytes: int) -> int:
        """The row source of a row-band blob: rows of the sample _put was given."""
        per = self.requirements.input_bytes // self.input_shape[1]
        self.rows_read.append((row, n))
        if nbytes != n * per or (row + n) * per > self._sample.size:
            return Status.TP_ERR_BAD_INPUT
        ctypes.memmove(dst, self._sample[row * per:].ctypes.data, nbytes)
        return 0

    def set_hparams(self, hparams: HParams) -> None:
        self._hp.lr, self._hp.momentum = hparams.lr, hparams.momentum
        self._hp.seed = hparams.seed & 0xFFFFFFFF
        self._hp.flags = 0 if hparams.qas else TP_HP_NO_QAS
        self._check(self._lib.tp_set_hparams(self._session, ctypes.byref(self._hp)),
                    f"hyper-parameters lr {hparams.lr:g}, momentum {hparams.momentum:g}")
        self.hparams = hparams

    def train(self, x: np.ndarray, label: int, index: int | None = None) -> StepResult:
        self._put(x)
        code = self._lib.tp_train_step(self._session, int(label), ctypes.byref(self.last_result))
        if code != Status.TP_ERR_NONFINITE:  # a non-finite loss: a skipped step
            self._check(code, "training step")
        r = self.last_result
        return StepResult(float(r.loss), int(r.prediction), bool(r.skipped),
                          {"arena_peak": int(r.arena_peak)})

    def infer(self, x: np.ndarray) -> np.ndarray:
        self._put(x)
        self._check(self._lib.tp_infer(self._session, ctypes.byref(self.last_result)), "inference")
        n = self._lib.tp_output_bytes(self._session)
        out = ctypes.string_at(self._lib.tp_output(self._session), n)
        return np.frombuffer(out, np.int8).reshape(self.output_shape).copy()

    def params(self) -> bytes:
        if self._params is None:
            return b""
        return ctypes.string_at(self._params, self.requirements.params)

    def load_params(self, raw: bytes, step: int) -> None:
        if self._params is None or len(raw) != self.requirements.params:
            raise TinypropError(f"{self.model.name}: {len(raw)} bytes of parameters for a "
                                f"params region of {self.requirements.params}; they belong to "
                                "another blob")
        ctypes.memmove(self._params, raw, len(raw))
        # the step counter keys stochastic rounding: restore it so a resume continues exactly
        self._lib.tp_set_step(self._session, step)
