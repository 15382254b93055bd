"""The Engine protocol: one blob running somewhere, whether the NumPy reference, the C core in
this process or a board over a link. train, eval, infer, export, demo and bench all drive one
through these methods and never ask what kind it is.

    with open_engine("qemu-m4", tb, HParams(lr=0.005)) as engine:   # tinyprop.engines
        engine.prepare(xs, ys)
        step = engine.train(xs[7], int(ys[7]), index=7)    # a StepResult
        y = engine.infer(xs[0])                             # the int8 output tensor
        raw = engine.params()                               # the trained params region
"""

from __future__ import annotations

import zlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
from typing_extensions import Self  # a dependency of textual; typing.Self is 3.11+

from ..compile.blob import pack_blob, read_blob
from ..compile.kernels import DEFAULT_TARGET, plan_scratch
from ..errors import TinypropError
from ..frontend.graph import Graph
from ..frontend.tflite_reader import read_tflite
from ..program import TrainProgram


class Model(Protocol):
    """What an engine runs: `blob` for the C core and the boards; `graph` and, to train,
    `program` for the NumPy reference (None when only the blob's bytes are known). A
    tinyprop.compile.blobfile.TrainingBlob is one, a BlobModel another."""

    @property
    def name(self) -> str: ...  # names the model in messages

    @property
    def blob(self) -> bytes: ...

    @property
    def graph(self) -> Graph | None: ...

    @property
    def program(self) -> TrainProgram | None: ...


@dataclass(frozen=True)
class BlobModel:
    """A blob for inference: a .tpb known by its bytes, or a .tflite packed on the fly (then
    with its graph, so the NumPy reference can run it too)."""

    name: str
    blob: bytes
    graph: Graph | None = None
    program: TrainProgram | None = None

    @classmethod
    def load(cls, path: Path) -> BlobModel:
        """A .tpb by its bytes, or a .tflite packed on the fly (with its graph)."""
        if path.suffix != ".tflite":
            if not path.is_file():
                raise TinypropError(f"{path}: no such file; pass a .tpb from tinyprop convert")
            return cls(str(path), path.read_bytes())
        graph = read_tflite(path)
        scratch = plan_scratch(graph, DEFAULT_TARGET)  # what qemu-m4's kernels ask for
        return cls(str(path), pack_blob(graph, zlib.crc32(path.read_bytes()), scratch=scratch),
                   graph)

    @property
    def input_shape(self) -> tuple[int, ...]:
        info = read_blob(self.blob, self.name)
        return tuple(info.tensors[info.input].shape)


@dataclass(frozen=True)
class HParams:
    """Training hyper-parameters (tinyprop.h's tp_hparams): the SGD learning rate, the seed of
    stochastic rounding, quantization-aware scaling (off only for the ablation) and momentum
    in [0, 1) (non-zero needs a blob converted with --momentum)."""

    lr: float = 0.0
    seed: int = 0
    qas: bool = True
    momentum: float = 0.0


@dataclass(frozen=True)
class StepResult:
    """One training step: the loss before the update (None when a board reports it not
    finite), the prediction, whether the update was skipped (a non-finite loss), the memory the
    engine measured (bytes: `arena_peak`; a board adds `static`, `trainable`, `stack_peak`,
    `sram`) and the step's cost in the engine's counter_unit (None without a counter)."""

    loss: float | None
    prediction: int
    skipped: bool
    memory: dict[str, int] = field(default_factory=dict)
    counter: int | None = None


@dataclass(frozen=True)
class SampleResult:
    """One evaluated sample: the prediction and, on an engine with a counter, its cost."""

    prediction: int
    counter: int | None = None


class Engine(ABC):
    """One blob on one engine. Implementations: ReferenceEngine (tinyprop.engines.reference),
    NativeEngine (tinyprop.engines.native), DeviceEngine (tinyprop.engines.device)."""

    name: str  # the --board value it answers to: reference, host, a board, a port or URL
    counter_unit: str | None = None  # what StepResult.counter counts; None: no cost counter
    sram: int | None = None  # bytes of SRAM of the board it runs on; None off a board
    hparams: HParams = HParams()

    @abstractmethod
    def set_hparams(self, hparams: HParams) -> None:
        """Train with `hparams` from the next step on."""

    def set_lr(self, lr: float) -> None:
        """Change the learning rate alone (a schedule does, every step)."""
        self.set_hparams(HParams(lr, self.hparams.seed, self.hparams.qas, self.hparams.momentum))

    def prepare(self, xs: np.ndarray, ys: np.ndarray) -> None:  # noqa: B027 (a no-op default)
        """Hand over the training set before a run. A board with a bulk store keeps it there,
        and train(x, label, index=i) then reads sample i from it; other engines keep nothing."""

    @abstractmethod
    def train(self, x: np.ndarray, label: int, index: int | None = None) -> StepResult:
        """One training step on int8 sample `x` with `label`; `index` is its position in the
        set given to prepare(), if it came from there."""

    @abstractmethod
    def infer(self, x: np.ndarray) -> np.ndarray:
        """The int8 output tensor (in the model's output shape) for one int8 input sample, with
        the parameters as trained so far."""

    def evaluate(self, xs: np.ndarray, ys: np.ndarray) -> list[SampleResult]:
        """Each sample's prediction (and cost, on an engine with a counter), in order; the
        parameters do not change. The default takes the argmax of infer()."""
        return [SampleResult(int(np.argmax(self.infer(x)))) for x in xs]

    @abstractmethod
    def params(self) -> bytes:
        """The params region as the C core lays it out: the trainable parameters, then the
        optimizer state (TrainProgram.unpack_params reads it)."""

    @abstractmethod
    def load_params(self, raw: bytes, step: int) -> None:
        """Restore a params region (a checkpoint's); the step count continues from `step`
        (it keys stochastic rounding, so a resumed run equals an uninterrupted one)."""

    def status(self) -> str:
        """How the board process this engine started ended, when it did ("" otherwise)."""
        return ""

    def close(self) -> None:  # noqa: B027 (a no-op default)
        """Release what the engine holds (a board process, its link, working files)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
