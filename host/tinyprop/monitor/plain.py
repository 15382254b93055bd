"""Plain output: one readable line an event, for pipes, CI logs and `--plain`."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from .render import event_line
from .runlog import RunState
from .sources import EventPump, EventSource


def plain_lines(source: EventSource, out: TextIO, log_path: str | Path | None = None) -> RunState:
    """Print a line for each event of `source` (steps, evals, logs, errors, the summary) as it
    arrives; returns the final state. A source that ends without a summary or a stop ends
    DISCONNECTED."""
    state = RunState()
    for event in EventPump(source, log_path).start():
        state.fold(event)
        line = event_line(state, event)
        if line is not None:
            print(line, file=out, flush=True)
    if state.summary is None and state.stopped is None and not state.disconnected:
        state.end_of_source()
        print(f"DISCONNECTED {state.disconnect_text}", file=out, flush=True)
    return state
