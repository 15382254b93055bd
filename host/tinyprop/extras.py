"""Optional dependencies (pyproject.toml's extras): imported where a verb needs them, or a
one-line error naming the extra that installs them."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

from .errors import TinypropError


def require(module: str, what: str, extra: str = "tf") -> ModuleType:
    """`import module` for `what` (e.g. "eval of a .tflite"), or a TinypropError saying which
    extra to install."""
    if module.split(".")[0] == "tensorflow":
        # TensorFlow's C++ start-up lines (oneDNN, CPU features, absl) say nothing to a user
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        broken = "" if exc.name == top else f" ({exc})"  # installed, but it does not import
        raise TinypropError(
            f"{what} needs {top}, which is not installed{broken}; run "
            f"`pip install 'tinyprop[{extra}]'`"
        ) from None
