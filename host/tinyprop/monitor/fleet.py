"""The monitor's fleet view: a fleet log (`tinyprop fleet` writes OUT/fleet.jsonl, events in
docs/fleet.md) folded into who is online and each board's and the global model's accuracy
round by round; shown full screen, as plain lines, or followed while the fleet runs."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..errors import TinypropError
from .sources import EventPump, EventSource, replay_source

FLEET_START = "fleet"  # a fleet log's first event
FOLLOW_POLL = 0.2  # s between looks at a followed log that has not grown


def is_fleet_log(path: str | Path) -> bool:
    """Whether `path` is a fleet log (its first event is a `fleet` event); False for a run
    log, an empty file or one that is not JSON (read_runlog says what is wrong with it)."""
    try:
        with Path(path).open(encoding="utf-8", errors="replace") as f:
            first = f.readline()
    except OSError:
        return False
    try:
        event = json.loads(first)
    except json.JSONDecodeError:
        return False
    return isinstance(event, dict) and event.get("type") == FLEET_START


def follow_source(path: str | Path, poll: float = FOLLOW_POLL,
                  idle: float | None = None) -> EventSource:
    """The events of a fleet log as its writer appends them, until its `fleet_end` (or, with
    `idle`, that many seconds without a new line: a writer that died)."""
    path = Path(path)

    def generate() -> EventSource:
        pending, last = "", time.monotonic()
        with path.open(encoding="utf-8", errors="replace") as f:
            while True:
                chunk = f.read()
                if not chunk:
                    if idle is not None and time.monotonic() - last > idle:
                        return
                    time.sleep(poll)
                    continue
                last = time.monotonic()
                pending += chunk
                *lines, pending = pending.split("\n")  # a line still being written waits
                for line in lines:
                    if not line.strip():
                        continue
                    try:
                        event = json.loads(line)
                    except json.JSONDecodeError:
                        raise TinypropError(f"{path}: a line is not a JSON event; give the "
                                            "fleet.jsonl `tinyprop fleet` writes") from None
                    yield event
                    if event.get("type") == "fleet_end":
                        return

    if not path.is_file():
        raise TinypropError(f"{path}: no such fleet log; `tinyprop fleet` writes OUT/fleet.jsonl "
                            "(--log) when its run starts")
    return generate()


def replay_fleet(path: str | Path) -> EventSource:
    """A recorded fleet log's events, as fast as they can be read (sources.replay_source)."""
    return replay_source(path)


@dataclass
class BoardState:
    """One board as the server last saw it: `status` trained, scored (online), refused,
    failed, or waiting (no word yet); its reason when refused or failed; its holdout accuracy
    after its local training and of the global model, by round; its steps so far."""

    name: str
    board: str = ""
    status: str = "waiting"
    reason: str = ""
    round: int = 0
    local: dict[int, float] = field(default_factory=dict)
    scored: dict[int, float] = field(default_factory=dict)
    steps: int = 0

    @property
    def online(self) -> bool:
        return self.status in ("trained", "scored", "refused")


@dataclass
class FleetState:
    """A fleet log folded: the run's settings, its boards, the round and phase it is in, the
    global model's accuracy by round (over every board's holdout, and the server's)."""

    clients: list[str] = field(default_factory=list)
    boards: dict[str, BoardState] = field(default_factory=dict)
    rounds: int = 0
    strategy: str = ""
    blob_id: str = ""
    bytes: int = 0
    server_holdout: str | None = None
    round: int = 0
    phase: str = ""
    nodes: int = 0
    global_accuracy: dict[int, float] = field(default_factory=dict)
    server_accuracy: dict[int, float] = field(default_factory=dict)
    ended: str | None = None  # completed, stopped, or the reason the log ended early
    time: float = 0.0
    lines: list[str] = field(default_factory=list)  # the newest event lines, for the log panel

    def board(self, name: str) -> BoardState:
        if name not in self.boards:
            self.boards[name] = BoardState(name)
        return self.boards[name]

    def fold(self, event: dict) -> str | None:
        """Take one event in; its line (event_line), or None for one that says nothing new."""
        kind = event.get("type")
        self.time = float(event.get("time") or self.time)
        if kind == FLEET_START:
            self.clients = list(event.get("clients", []))
            for name in self.clients:
                self.board(name).board = event.get("boards", {}).get(name, "")
            self.rounds = int(event.get("rounds", 0))
            self.strategy = str(event.get("strategy", ""))
            self.blob_id = str(event.get("blob_id", ""))
            self.bytes = int(event.get("bytes", 0))
            self.server_holdout = event.get("server_holdout")
        elif kind == "round":
            self.round, self.phase = int(event["round"]), str(event["phase"])
            self.nodes = int(event.get("nodes", 0))
        elif kind == "board":
            b = self.board(str(event["name"]))
            b.status, b.round = str(event["status"]), int(event["round"])
            b.reason = str(event.get("reason", ""))
            if b.status == "trained":
                b.local[b.round] = float(event["accuracy"])
                b.steps += int(event.get("steps", 0))
            elif b.status == "scored":
                b.scored[b.round] = float(event["global_accuracy"])
        elif kind == "global":
            r = int(event["round"])
            if event.get("global_accuracy") is not None:
                self.global_accuracy[r] = float(event["global_accuracy"])
            if event.get("server_accuracy") is not None:
                self.server_accuracy[r] = float(event["server_accuracy"])
        elif kind == "fleet_end":
            self.ended = str(event.get("status", "completed"))
        elif kind == "disconnect":  # the source failed (EventPump)
            self.ended = f"log ended: {event.get('text', '')}"
        line = event_line(event)
        if line is not None:
            self.lines = [*self.lines[-199:], line]
        return line

    def end_of_source(self) -> None:
        if self.ended is None:
            self.ended = "log ended before the fleet did (still running, or its server died)"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def event_line(event: dict) -> str | None:
    """One readable line for an event of a fleet log."""
    kind = event.get("type")
    if kind == FLEET_START:
        return (f"fleet of {len(event.get('clients', []))} boards "
                f"({', '.join(event.get('clients', []))}), {event.get('rounds')} rounds, "
                f"{event.get('strategy')}, blob {event.get('blob_id')}")
    if kind == "round":
        return (f"round {event['round']}: {event['phase']} "
                f"({event.get('nodes', 0)} nodes connected)")
    if kind == "board":
        head = f"round {event['round']}: {event['name']} {event['status']}"
        if event["status"] == "trained":
            return (f"{head}, {event.get('steps')} steps, its holdout "
                    f"{_pct(event.get('accuracy'))}")
        if event["status"] == "scored":
            return f"{head}: the global model on its holdout {_pct(event.get('global_accuracy'))}"
        return f"{head}: {event.get('reason', '')}"
    if kind == "global":
        if event["round"] == 0:  # the blob, scored by the server only with a holdout of its own
            if event.get("server_accuracy") is None:
                return None
            return f"the blob on the server's holdout: {_pct(event['server_accuracy'])}"
        line = f"round {event['round']}: global {_pct(event.get('global_accuracy'))}"
        if event.get("server_accuracy") is not None:
            line += f", server's holdout {_pct(event['server_accuracy'])}"
        return line
    if kind == "fleet_end":
        return f"fleet {event.get('status', 'completed')} after {event.get('rounds')} rounds"
    if kind == "disconnect":
        return f"log ended: {event.get('text', '')}"
    return None


STATUS_STYLE = {"trained": "green", "scored": "green", "refused": "yellow", "failed": "red",
                "waiting": "dim"}


def status_text(state: FleetState) -> Text:
    """The top line: round and phase, boards online, how the run ended."""
    online = sum(b.online for b in state.boards.values())
    text = Text(f"round {state.round}/{state.rounds} {state.phase}  ·  "
                f"{online}/{len(state.clients)} boards online  ·  "
                f"{state.nodes} nodes connected  ·  {state.strategy}  ·  blob {state.blob_id}")
    if state.ended is not None:
        text.append(f"  ·  {state.ended}", style="bold red" if state.ended != "completed"
                    else "bold green")
    return text


def fleet_table(state: FleetState, expand: bool = True) -> Table:
    """Boards by rounds: each cell the global model's accuracy on that board's holdout (after
    the round), with the board's own after its local training beside it; a board's state and
    steps; then the global accuracy over all holdouts and the server's holdout, by round."""
    table = Table(expand=expand, pad_edge=False)
    table.add_column("board", no_wrap=True)
    table.add_column("state", no_wrap=True, overflow="ellipsis", max_width=36)  # the log has
    # the whole reason
    table.add_column("steps", justify="right")
    last = max([state.rounds, state.round, 1])
    for r in range(1, last + 1):
        table.add_column(f"round {r} %", justify="right", no_wrap=True)
    for name in state.clients or list(state.boards):
        b = state.board(name)
        status = Text(f"{b.status} r{b.round}" if b.round else b.status,
                      style=STATUS_STYLE.get(b.status, ""))
        if b.reason:
            status.append(f" ({b.reason})", style="dim")
        cells = []
        for r in range(1, last + 1):
            g, lo = b.scored.get(r), b.local.get(r)
            cell = Text(f"{100 * g:.1f}" if g is not None else "")
            if lo is not None:
                cell.append(f" ({100 * lo:.1f})", style="dim")
            cells.append(cell)
        table.add_row(f"{name} [dim]{b.board}[/]", status, f"{b.steps:,}", *cells)
    table.add_section()
    def by_round(accuracy: dict[int, float]) -> list[str]:
        return [f"{100 * accuracy[r]:.1f}" if r in accuracy else "" for r in range(1, last + 1)]

    table.add_row("[b]global[/] (every holdout)", "", "", *by_round(state.global_accuracy))
    if state.server_holdout is not None:
        table.add_row(f"server ({state.server_holdout})",
                      f"before: {_pct(state.server_accuracy.get(0))}", "",
                      *by_round(state.server_accuracy))
    table.caption = ("each cell: the global model on the board's holdout (the board's own "
                     f"after its local training); {state.bytes:,} B of parameters travel each "
                     "way a board a round")
    return table


def plain_fleet(source: EventSource, out: TextIO) -> FleetState:
    """A line an event of a fleet log, then the table; the final state."""
    state = FleetState()
    for event in EventPump(source).start():
        line = state.fold(event)
        if line is not None:
            print(line, file=out, flush=True)
    if state.ended is None:
        state.end_of_source()
        print(state.ended, file=out, flush=True)
    Console(file=out, width=160).print(fleet_table(state, expand=False))
    return state


def run_fleet_dashboard(source: EventSource) -> FleetState:
    """Show a fleet log full screen until the user quits (q)."""
    app = _dashboard_class()(EventPump(source))
    app.run()
    return app.state


def _dashboard_class() -> type:
    """The Textual app, built on first use (Textual is imported only for a dashboard)."""
    from textual.app import App, ComposeResult
    from textual.widgets import Footer, Static

    from .app import DRAIN_LIMIT, REDRAW_HZ  # the run dashboard's pace

    class FleetDashboard(App):
        TITLE = "tinyprop monitor: fleet"
        BINDINGS: ClassVar = [("q", "quit", "quit")]
        CSS = """
        #status { height: 1; }
        #table { height: auto; }
        #log { height: 1fr; border: round $primary-darken-1; padding: 0 1; }
        """

        def __init__(self, pump: EventPump) -> None:
            super().__init__()
            self.pump = pump
            self.state = FleetState()

        def compose(self) -> ComposeResult:
            yield Static(id="status")
            yield Static(id="table")
            log = Static(id="log")
            log.border_title = "the server's log"
            yield log
            yield Footer()

        def on_mount(self) -> None:
            self.pump.start()
            self.set_interval(1 / REDRAW_HZ, self.tick)
            self.redraw()

        def tick(self) -> None:
            events, ended = self.pump.drain(DRAIN_LIMIT)
            for event in events:
                self.state.fold(event)
            if ended and self.state.ended is None:
                self.state.end_of_source()
            if events or ended:
                self.redraw()

        def redraw(self) -> None:
            self.query_one("#status", Static).update(status_text(self.state))
            self.query_one("#table", Static).update(fleet_table(self.state))
            log = self.query_one("#log", Static)
            height = max(1, log.content_size.height)
            log.update("\n".join(self.state.lines[-height:]))

    return FleetDashboard

