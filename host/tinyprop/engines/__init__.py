"""Engines: what runs a blob. One protocol (base.Engine) over the NumPy reference, the C core
in this process and a board over a link; open_engine picks one from a --board value.

    with open_engine("host", tb, HParams(lr=0.005, seed=0)) as engine:
        engine.train(x, label)
"""

from __future__ import annotations

from ..status import check_hparams
from .base import BlobModel, Engine, HParams, Model, SampleResult, StepResult

# What --board takes, for every verb's help.
BOARD_HELP = ("reference (NumPy), host (the C core on this machine), a board tinyprop builds "
              "and starts (its name under boards/, e.g. qemu-m4, or your own board's folder), "
              "or the serial port / URL of a board flashed with the blob")

__all__ = ["BOARD_HELP", "BlobModel", "Engine", "HParams", "Model", "SampleResult", "StepResult",
           "open_engine"]


def open_engine(spec: str, model: Model, hparams: HParams | None = None) -> Engine:
    """The engine `spec` names (reference, host, a board's name or folder, a port or URL) running
    `model`; with `hparams` set for training (None: left as the engine starts, e.g. to infer or
    to pull a flashed board's parameters)."""
    if hparams is not None:  # before a board is built for them
        check_hparams(hparams.lr, hparams.momentum, subject=model.name)
    if spec == "reference":
        from .reference import ReferenceEngine

        return ReferenceEngine(model, hparams)
    if spec == "host":
        from .native import NativeEngine

        return NativeEngine(model, hparams)
    from .device import DeviceEngine

    return DeviceEngine(spec, model, hparams)
