"""A training blob on the host: its graph and program rebuilt from the source model, and the
engines that train it (the NumPy reference, or the C core in this process).

A .tpb carries a META section naming its source .tflite (with the source's CRC as model id) and
its scheme with explicit channels. Rebuilding from those must reproduce the blob byte for byte,
so the host-side view is exactly what the device runs.
"""

from __future__ import annotations

import ctypes
import json
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import TinypropError
from ..frontend.graph import Graph
from ..frontend.tflite_reader import read_tflite
from .blob import pack_blob, read_blob
from .scheme import SparseScheme, scheme_from_dict
from .train_plan import TrainProgram, build_program


@dataclass
class TrainingBlob:
    graph: Graph
    program: TrainProgram
    blob: bytes
    source: Path

    @property
    def classes(self) -> int:
        return self.graph.tensors[self.graph.logits_op().outputs[0]].size


def make_blob(model: Path, scheme: SparseScheme, momentum: bool = False) -> TrainingBlob:
    """The blob of `model` trained by `scheme`; `momentum` reserves its optimizer state."""
    graph = read_tflite(model)
    raw = Path(model).read_bytes()
    program = build_program(graph, scheme, momentum)
    meta = {"source": str(Path(model).resolve()), "scheme": scheme.to_json()}
    if momentum:  # only then: a blob without optimizer state stays as it always was
        meta["momentum"] = True
    blob = pack_blob(graph, zlib.crc32(raw), train=program, meta=meta)
    return TrainingBlob(graph, program, blob, Path(model))


def load_blob(path: Path, model: Path | None = None) -> TrainingBlob:
    """A .tpb with its source model (from META, or `model` when the file moved)."""
    path = Path(path)
    if not path.exists():
        raise TinypropError(f"{path}: no such file; create it with tinyprop convert")
    raw = path.read_bytes()
    info = read_blob(raw, str(path))
    if "META" not in info.sections or "TRAN" not in info.sections:
        raise TinypropError(f"{path}: has no training program; re-run tinyprop convert")
    meta = json.loads(info.sections["META"])
    src = Path(model) if model else Path(meta["source"])
    if not src.exists():
        raise TinypropError(f"{path}: its source model {src} is missing; pass --model SRC.tflite")
    if zlib.crc32(src.read_bytes()) != info.model_id:
        raise TinypropError(f"{path}: was converted from another model than {src}; pass the "
                            "original with --model or re-run tinyprop convert")
    tb = make_blob(src, scheme_from_dict(meta["scheme"]), bool(meta.get("momentum")))
    if tb.blob != raw:
        raise TinypropError(f"{path}: rebuilding it from {src} gives a different blob (made by "
                            "another tinyprop version?); re-run tinyprop convert")
    return tb


class ReferenceEngine:
    """The NumPy reference, in process."""

    name = "reference"

    def __init__(self, tb: TrainingBlob, lr: float, seed: int, qas: bool = True,
                 momentum: float = 0.0):
        from ..reference.backward import ReferenceTrainer

        self.trainer = ReferenceTrainer(tb.program, lr=lr, seed=seed, qas=qas, momentum=momentum)

    def set_lr(self, lr: float) -> None:
        self.trainer.lr = np.float32(lr)

    def train(self, x: np.ndarray, label: int) -> dict:
        r = self.trainer.train_step(x, label)
        return {"loss": r.loss, "prediction": r.prediction, "skipped": r.skipped}

    def infer(self, x: np.ndarray) -> np.ndarray:
        return self.trainer.infer(x)

    def params(self) -> bytes:
        return self.trainer.params_bytes()

    def load_params(self, raw: bytes, step: int) -> None:
        self.trainer.load_params(raw)
        self.trainer.step = step

    def close(self) -> None:
        pass


class _HParams(ctypes.Structure):
    _fields_ = [("lr", ctypes.c_float), ("momentum", ctypes.c_float), ("seed", ctypes.c_uint32),
                ("flags", ctypes.c_uint32)]


class NativeEngine:
    """The C core built for this machine, in process (ctypes): `--board host`."""

    name = "host"

    def __init__(self, tb: TrainingBlob, lr: float, seed: int, qas: bool = True,
                 momentum: float = 0.0):
        from ..engines import native

        self.native = native
        lib = self.lib = native.load_library()
        lib.tp_train_step.argtypes = [ctypes.c_void_p, ctypes.c_int32,
                                      ctypes.POINTER(native.Result)]
        lib.tp_set_hparams.argtypes = [ctypes.c_void_p, ctypes.POINTER(_HParams)]
        self.tb = tb
        self._raw = ctypes.create_string_buffer(tb.blob, len(tb.blob))
        req = native.Requirements()
        self._check(lib.tp_blob_requirements(self._raw, len(tb.blob), ctypes.byref(req)))
        self.req = req
        self._arena = ctypes.create_string_buffer(max(req.arena_infer, req.arena_train))
        self._params = ctypes.create_string_buffer(max(req.params, 1))
        self._session = ctypes.create_string_buffer(lib.tp_session_size())
        self._check(lib.tp_session_init(self._session, self._raw, len(tb.blob), self._arena,
                                        len(self._arena), self._params, req.params))
        self._hp = _HParams(lr, momentum, seed & 0xFFFFFFFF, 0 if qas else 1)
        lib.tp_set_hparams(self._session, ctypes.byref(self._hp))
        self.result = native.Result()
        self.step_offset = 0

    def set_lr(self, lr: float) -> None:
        self._hp.lr = lr
        self.lib.tp_set_hparams(self._session, ctypes.byref(self._hp))

    def _check(self, code: int) -> None:
        if code != 0:
            raise TinypropError(f"C core: {self.native.status_name(code)}")

    def _put(self, x: np.ndarray) -> None:
        x = np.ascontiguousarray(x, np.int8)
        if x.size != self.req.input_bytes:
            raise TinypropError(f"sample has {x.size} bytes; the model input has "
                                f"{self.req.input_bytes}")
        ctypes.memmove(self.lib.tp_input(self._session), x.ctypes.data, x.size)

    def train(self, x: np.ndarray, label: int) -> dict:
        self._put(x)
        code = self.lib.tp_train_step(self._session, int(label), ctypes.byref(self.result))
        if code not in (0, 13):  # 13: TP_ERR_NONFINITE, reported as a skipped step
            self._check(code)
        r = self.result
        return {"loss": float(r.loss), "prediction": int(r.prediction),
                "skipped": bool(r.skipped), "memory": {"arena_peak": int(r.arena_peak)}}

    def infer(self, x: np.ndarray) -> np.ndarray:
        self._put(x)
        self._check(self.lib.tp_infer(self._session, ctypes.byref(self.result)))
        n = self.lib.tp_output_bytes(self._session)
        out = ctypes.string_at(self.lib.tp_output(self._session), n)
        return np.frombuffer(out, np.int8).copy()

    def params(self) -> bytes:
        return self._params.raw[: self.req.params]

    def load_params(self, raw: bytes, step: int) -> None:
        ctypes.memmove(self._params, raw, len(raw))
        # the step counter keys stochastic rounding: restore it so a resume continues exactly
        self.lib.tp_set_step(self._session, ctypes.c_uint32(step))

    def close(self) -> None:
        pass


class DeviceEngine:
    """A board over the serial protocol (qemu-m4, the host board, or a port URL). Samples go
    through the board's bulk store when it has one (QEMU semihosting), else over the link."""

    TRAIN_FILE, EVAL_FILE = "train.bin", "eval.bin"

    def __init__(self, spec: str, tb: TrainingBlob, lr: float, seed: int, qas: bool = True,
                 momentum: float = 0.0):
        import contextlib
        import tempfile

        from ..device.boards import open_board

        self.name = spec
        self._stack = contextlib.ExitStack()
        self.workdir = Path(self._stack.enter_context(tempfile.TemporaryDirectory()))
        self.device = self._stack.enter_context(open_board(spec, tb.blob, self.workdir))
        self._seed, self._qas, self._momentum = seed, qas, momentum
        self.set_lr(lr)
        self.counter_unit = self.device.counter_unit
        self.bulk = False  # the training set is in the bulk store
        self._open_file: str | None = None  # the bulk file the board has open

    def _bulk_store(self, name: str, xs: np.ndarray, ys: np.ndarray) -> bool:
        """Write samples as bulk file `name` and open it; False if the board has no store."""
        from ..device.device import write_bulk_file
        from ..device.runners import QEMU_BOARDS  # the boards with semihosting, hence a bulk store

        if self.name not in QEMU_BOARDS:
            return False
        write_bulk_file(self.workdir / name, xs, ys)
        self._open_bulk(name)
        return True

    def _open_bulk(self, name: str) -> None:
        if self._open_file != name:  # the board keeps one bulk file open
            self.device.bulk_open(name)
            self._open_file = name

    def set_lr(self, lr: float) -> None:
        self.device.set_hparams(lr, self._seed, self._qas, self._momentum)

    def prepare(self, xs: np.ndarray, ys: np.ndarray) -> None:
        """Put the training set in the board's bulk store if it has one."""
        self.bulk = self._bulk_store(self.TRAIN_FILE, xs, ys)

    def train_index(self, i: int, x: np.ndarray, label: int) -> dict:
        if not self.bulk:
            return self.device.train(x, label)
        self._open_bulk(self.TRAIN_FILE)
        return self.device.train_bulk(i)

    def train(self, x: np.ndarray, label: int) -> dict:
        return self.device.train(x, label)

    def infer(self, x: np.ndarray) -> np.ndarray:
        return self.device.evaluate(x).reshape(-1)

    def evaluate_samples(self, xs: np.ndarray, ys: np.ndarray) -> list[dict]:
        """A `sample_eval` event (prediction, counter) for each sample, in order."""
        if self._bulk_store(self.EVAL_FILE, xs, ys):
            return [self.device.evaluate_bulk(i) for i in range(len(xs))]
        return [self.device.classify(x, int(y)) for x, y in zip(xs, ys, strict=True)]

    def board_status(self) -> str:
        """How the board process tinyprop started ended ("" while it runs, or not ours)."""
        import subprocess

        run = self.device.process
        if run is None:
            return ""
        try:  # the link breaks a moment before a killed board process is reaped
            code = run.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            return ""
        return f"the board process was killed by signal {-code}" if code < 0 else \
            f"the board process exited with status {code}"

    def params(self) -> bytes:
        return self.device.pull_params()

    def load_params(self, raw: bytes, step: int) -> None:
        self.device.push_params(raw, step)

    def close(self) -> None:
        self._stack.close()
