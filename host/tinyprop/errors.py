"""User-facing errors: one line naming the input, what is wrong and what to do; CLI exit code 2."""

from __future__ import annotations


class TinypropError(Exception):
    """Bad input or environment. The message is shown as is, on one line, and the CLI exits 2."""

    exit_code = 2


class DeviceError(TinypropError):
    """The device answered with an error frame (.status: its tp_status, tinyprop.status), or the
    link to it failed (.status None). The CLI exits 2 when the status says the input was bad
    (a learning rate out of range, a label), 1 otherwise."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status

    @property
    def exit_code(self) -> int:  # type: ignore[override]
        from .status import is_input  # here: tinyprop.status imports this module

        return 2 if self.status is not None and is_input(self.status) else 1
