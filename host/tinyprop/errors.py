"""User-facing errors: one line naming the input, what is wrong and what to do; CLI exit code 2."""


class TinypropError(Exception):
    """Bad input or environment. The message is shown as is, on one line, and the CLI exits 2."""

    exit_code = 2


class DeviceError(TinypropError):
    """The device answered with an error frame, or the link to it failed."""

    exit_code = 1
