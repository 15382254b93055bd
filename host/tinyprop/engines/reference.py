"""The NumPy reference as an engine (`--board reference`): tinyprop.reference, in process."""

from __future__ import annotations

import numpy as np

from ..errors import TinypropError
from ..reference.backward import ReferenceTrainer
from ..reference.forward import Forward
from .base import Engine, HParams, Model, StepResult


class ReferenceEngine(Engine):
    """Trains `model.program` with ReferenceTrainer (`.trainer`: the bench's rounding ablation
    reaches into it); a model without a program only infers, with Forward."""

    name = "reference"

    def __init__(self, model: Model, hparams: HParams | None = None):
        if model.graph is None:
            raise TinypropError(f"{model.name}: the reference engine needs the .tflite model; "
                                "pass it, or use --board host for a .tpb blob")
        self.model = model
        self.trainer = ReferenceTrainer(model.program, lr=0.0) if model.program else None
        self._forward = Forward(model.graph) if self.trainer is None else None
        if hparams is not None:
            self.set_hparams(hparams)

    def _trainer(self) -> ReferenceTrainer:
        if self.trainer is None:
            raise TinypropError(f"{self.model.name}: has no training program; make a training "
                                "blob with tinyprop convert")
        return self.trainer

    def set_hparams(self, hparams: HParams) -> None:
        self._trainer().set_hparams(hparams.lr, hparams.seed, hparams.qas, hparams.momentum)
        self.hparams = hparams

    def train(self, x: np.ndarray, label: int, index: int | None = None) -> StepResult:
        r = self._trainer().train_step(x, label)
        return StepResult(r.loss, r.prediction, r.skipped)

    def infer(self, x: np.ndarray) -> np.ndarray:
        return self.trainer.infer(x) if self.trainer is not None else self._forward.run(x)

    def params(self) -> bytes:
        return self._trainer().params_bytes()

    def load_params(self, raw: bytes, step: int) -> None:
        self._trainer().load_params(raw)
        self._trainer().step = step
