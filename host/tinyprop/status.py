"""Every status tinyprop reports, read from the one table of them, the C header
firmware/include/tp_status.h (the core's, the protocol's and the board HAL's, in one numbering;
an ERROR frame's code is one of them), and the host's one check of training hyper-parameters.

    status_name(0x10)        # "TP_ERR_BAD_LR"
    status_message(0x10)     # "the learning rate must be finite, >= 0 and at most 1e30: ..."
    raise StatusError(Status.TP_ERR_BAD_LR, "--lr nan")   # exit code 2: the input's to fix
"""

from __future__ import annotations

import re
from enum import IntEnum

import numpy as np

from .errors import TinypropError
from .paths import REPO_ROOT

HEADER = REPO_ROOT / "firmware" / "include" / "tp_status.h"
_ROW = re.compile(r'\bX\(\s*(\w+),\s*(0x[0-9A-Fa-f]+),\s*(\w+),\s*((?:"[^"]*"\s*)+)\)')
_LR_MAX = re.compile(r"#define TP_LR_MAX ([0-9.eE+-]+)f\b")


def _read_table() -> tuple[float, dict[int, tuple[str, str, str]]]:
    """TP_LR_MAX and {code: (name, kind, message)} of tp_status.h."""
    text = HEADER.read_text()
    body = re.sub(r"/\*.*?\*/", "", text[text.index("#define TP_STATUS_TABLE(X)"):], flags=re.S)
    rows = {int(code, 16): (name, kind, "".join(re.findall(r'"([^"]*)"', message)))
            for name, code, kind, message in _ROW.findall(body.replace("\\\n", " "))}
    return float(_LR_MAX.search(text).group(1)), rows


LR_MAX, TABLE = _read_table()
LR_MAX = float(np.float32(LR_MAX))  # TP_LR_MAX is a float, as the lr the core compares to it
Status = IntEnum("Status", {name: code for code, (name, _, _) in TABLE.items()})
Status.__doc__ = "tp_status: every status of the core, the protocol and the board HAL."


def status_name(code: int) -> str:
    """The C name of a status ("TP_ERR_BAD_LABEL"), or its hex code if it is not in the table."""
    return TABLE[code][0] if code in TABLE else f"0x{code:04x}"


def status_code(name: str) -> int:
    """The code of a status name, e.g. status_code("TP_ERR_NONFINITE")."""
    return Status[name].value


def status_message(code: int) -> str:
    """The status's one line: what was wrong and what to do."""
    if code in TABLE:
        return TABLE[code][2]
    return "a status this host does not know: use the same tinyprop on host and firmware"


def is_input(code: int) -> bool:
    """Whether the status says the caller's input was wrong (the CLI then exits 2)."""
    return code in TABLE and TABLE[code][1] == "INPUT"


def describe(code: int, detail: str = "") -> str:
    """"TP_ERR_BAD_LR: the learning rate must be ... (detail)": a status as the host shows it."""
    return f"{status_name(code)}: {status_message(code)}" + (f" ({detail})" if detail else "")


class StatusError(TinypropError):
    """A status other than TP_OK, about `subject` (the input it concerns); .status is its code.
    The CLI exits 2 for a status of bad input, 1 for any other."""

    def __init__(self, status: int, subject: str, detail: str = ""):
        super().__init__(f"{subject}: {describe(status, detail)}")
        self.status = status
        self.exit_code = 2 if is_input(status) else 1


def hparams_status(lr: float, momentum: float = 0.0, optimizer: bool | None = None) -> Status:
    """tp_set_hparams' checks (tp_session.c), for what does not reach the C core first (the NumPy
    reference, the CLI's arguments): the learning rate finite in [0, TP_LR_MAX], momentum in
    [0, 1) and non-zero only with optimizer state (optimizer None: not known yet)."""
    with np.errstate(over="ignore"):  # as the wire's f32: too large a value becomes inf
        lr32, momentum32 = np.float32(lr), np.float32(momentum)
    if not 0.0 <= lr32 <= LR_MAX:  # NaN fails it too
        return Status.TP_ERR_BAD_LR
    if not 0.0 <= momentum32 < 1.0:
        return Status.TP_ERR_BAD_MOMENTUM
    if momentum32 != 0.0 and optimizer is False:
        return Status.TP_ERR_NO_OPTIMIZER
    return Status.TP_OK


def check_hparams(lr: float, momentum: float = 0.0, optimizer: bool | None = None,
                  subject: str = "") -> None:
    """Raise StatusError for hyper-parameters tp_set_hparams would refuse; `subject` names the
    blob or command they are for."""
    status = hparams_status(lr, momentum, optimizer)
    if status != Status.TP_OK:
        raise StatusError(status, f"{subject}{': ' if subject else ''}lr {lr:g}, momentum "
                          f"{momentum:g}")
