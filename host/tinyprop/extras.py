"""Optional dependencies (pyproject.toml's extras): imported where a verb needs them, or a
one-line error naming the extra that installs them."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

from .errors import TinypropError

# TensorFlow's C++ start-up lines (oneDNN, CPU features, absl) say nothing to a user. On a CPU
# where TensorFlow turns its oneDNN kernels on (AVX-512 VNNI and newer), it says so before the
# log level takes effect, and its float results then depend on the CPU: off, they are the same
# everywhere.
QUIET_TF = {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0"}


def quiet_tensorflow(env: dict | None = None) -> dict:
    """QUIET_TF into `env` (os.environ when None) where it does not say otherwise."""
    env = os.environ if env is None else env
    for k, v in QUIET_TF.items():
        env.setdefault(k, v)
    return env


def require(module: str, what: str, extra: str = "tf") -> ModuleType:
    """`import module` for `what` (e.g. "eval of a .tflite"), or a TinypropError saying which
    extra to install."""
    if module.split(".")[0] in ("tensorflow", "keras", "tflite_micro"):  # each imports TensorFlow
        quiet_tensorflow()
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        broken = "" if exc.name == top else f" ({exc})"  # installed, but it does not import
        raise TinypropError(
            f"{what} needs {top}, which is not installed{broken}; run "
            f"`pip install 'tinyprop[{extra}]'`"
        ) from None
