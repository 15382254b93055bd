"""A board as an engine (`--board NAME|FOLDER|PORT`): tinyprop.device.boards opens it (a board
tinyprop starts is built with the blob compiled in; a port or URL is a board flashed with it)
and every call is a request over the serial protocol."""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from ..compile.blob import read_blob
from ..device.boards import open_board
from ..device.device import write_bulk_file
from ..device.profiles import board_named
from .base import Engine, HParams, Model, SampleResult, StepResult


class DeviceEngine(Engine):
    """Samples go through the board's bulk store when its descriptor says so (run.bulk_samples:
    QEMU semihosting on the emulated boards), else over the link. `.device` is the
    tinyprop.device.device.Device; `interpose` is open_board's (a lossy line in between)."""

    TRAIN_FILE, EVAL_FILE = "train.bin", "eval.bin"

    def __init__(self, spec: str, model: Model, hparams: HParams | None = None,
                 interpose=None):
        self.name = spec
        board = board_named(spec)  # None: a port or URL
        self.bulk_samples = bool(board and board.runner and board.runner.bulk_samples)
        info = read_blob(model.blob, model.name)
        self.output_shape = tuple(info.tensors[info.output].shape)
        self._stack = contextlib.ExitStack()
        try:
            self.workdir = Path(self._stack.enter_context(tempfile.TemporaryDirectory()))
            self.device = self._stack.enter_context(open_board(spec, model.blob, self.workdir,
                                                                interpose=interpose))
            self.counter_unit = self.device.counter_unit
            self.sram = self.device.ready.sram_bytes
            self.bulk = False  # the training set is in the bulk store
            self._open_file: str | None = None  # the bulk file the board has open
            if hparams is not None:
                self.set_hparams(hparams)
        except BaseException:
            self._stack.close()
            raise

    def _bulk_store(self, name: str, xs: np.ndarray, ys: np.ndarray) -> bool:
        """Write samples as bulk file `name` and open it; False if the board has no store."""
        if not self.bulk_samples:
            return False
        write_bulk_file(self.workdir / name, xs, ys)
        self._open_bulk(name)
        return True

    def _open_bulk(self, name: str) -> None:
        if self._open_file != name:  # the board keeps one bulk file open
            self.device.bulk_open(name)
            self._open_file = name

    def set_hparams(self, hparams: HParams) -> None:
        self.device.set_hparams(hparams.lr, hparams.seed, hparams.qas, hparams.momentum)
        self.hparams = hparams

    def prepare(self, xs: np.ndarray, ys: np.ndarray) -> None:
        self.bulk = self._bulk_store(self.TRAIN_FILE, xs, ys)

    def train(self, x: np.ndarray, label: int, index: int | None = None) -> StepResult:
        if self.bulk and index is not None:
            self._open_bulk(self.TRAIN_FILE)
            ev = self.device.train_bulk(index)
        else:
            ev = self.device.train(x, label)
        return StepResult(ev["loss"], ev["prediction"], ev["skipped"], ev["memory"],
                          ev["counter"])

    def infer(self, x: np.ndarray) -> np.ndarray:
        return self.device.evaluate(x).reshape(self.output_shape)

    def evaluate(self, xs: np.ndarray, ys: np.ndarray) -> list[SampleResult]:
        if self._bulk_store(self.EVAL_FILE, xs, ys):
            events = [self.device.evaluate_bulk(i) for i in range(len(xs))]
        else:
            events = [self.device.classify(x, int(y)) for x, y in zip(xs, ys, strict=True)]
        return [SampleResult(e["prediction"], e["counter"]) for e in events]

    def params(self) -> bytes:
        return self.device.pull_params()

    def load_params(self, raw: bytes, step: int) -> None:
        self.device.push_params(raw, step)

    def status(self) -> str:
        run = self.device.process
        if run is None:
            return ""
        try:  # the link breaks a moment before a killed board process is reaped
            code = run.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            return ""
        return f"the board process was killed by signal {-code}" if code < 0 else \
            f"the board process exited with status {code}"

    def close(self) -> None:
        self._stack.close()
