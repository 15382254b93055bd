"""The full-screen live dashboard (Textual). Events arrive on the pump's queue from a worker
thread; a timer drains it and redraws at most `REDRAW_HZ` times a second, so a slow terminal
costs redraws, never events, and the producer is never waited on."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from textual import events
from textual.app import App, ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Static

from . import render
from .runlog import RunState
from .sources import EventPump, EventSource

REDRAW_HZ = 8
DRAIN_LIMIT = 20_000  # events folded a tick at most, so one tick stays short under a flood


class Dashboard(App):
    """Shows a RunState folded live from an EventPump."""

    TITLE = "tinyprop monitor"
    BINDINGS: ClassVar = [("q", "quit", "quit")]
    CSS = """
    Screen { layout: vertical; }
    #top { height: 1; }
    #identity { width: 1fr; height: 1; }
    #status { width: auto; height: 1; }
    #progress { height: 1; }
    #main { height: 1fr; }
    #charts { width: 3fr; }
    #side { width: 2fr; min-width: 44; }
    .panel { border: round $primary-darken-1; border-title-color: $text-accent; padding: 0 1; }
    #loss, #accuracy { height: 1fr; }
    #camera { height: 2fr; min-height: 8; max-height: 26; display: none; }
    #classes { height: auto; }
    #memory { height: auto; }
    #perf { height: auto; }
    #log { height: 1fr; min-height: 4; text-wrap: nowrap; text-overflow: ellipsis; }
    Screen.disconnected .panel { border: round $error; }
    """

    def __init__(self, pump: EventPump, state: RunState | None = None,
                 on_key: Callable[[str], bool] | None = None) -> None:
        super().__init__()
        self.pump = pump
        self.on_key_pressed = on_key  # a key the run takes (a label): True when taken
        self.state = state or RunState()
        self.redraws = 0
        self.source_ended = False
        self._dirty = True

    def on_key(self, event: events.Key) -> None:
        if self.on_key_pressed is not None and event.character and \
                self.on_key_pressed(event.character):
            event.stop()

    def compose(self) -> ComposeResult:
        with Horizontal(id="top"):
            yield Static(id="identity")
            yield Static(id="status")
        yield Static(id="progress")
        with Horizontal(id="main"):
            with Vertical(id="charts"):
                yield self._panel("camera", "camera: the newest frame the model saw")
                yield self._panel("loss", "loss")
                yield self._panel("accuracy", "training accuracy")
            with Vertical(id="side"):
                yield self._panel("classes", "per class (training predictions)")
                yield self._panel("memory", "memory (measured on the device)")
                yield self._panel("perf", "speed")
                yield self._panel("log", "log")
        yield Footer()

    @staticmethod
    def _panel(widget_id: str, title: str) -> Static:
        panel = Static(id=widget_id, classes="panel")
        panel.border_title = title
        return panel

    def on_mount(self) -> None:
        self.pump.start()
        self.set_interval(1 / REDRAW_HZ, self.tick)

    def on_resize(self) -> None:
        self._dirty = True

    def tick(self) -> None:
        """Fold what arrived since the last tick, then redraw once if anything changed."""
        events, ended = self.pump.drain(DRAIN_LIMIT)
        for event in events:
            self.state.fold(event)
        if ended:
            self.state.end_of_source()
            self.source_ended = True
        if events or ended or self._dirty:
            self.redraw()

    def redraw(self) -> None:
        state = self.state
        self._dirty = False
        self.redraws += 1
        self.screen.set_class(state.disconnected, "disconnected")
        self.query_one("#identity", Static).update(render.identity_text(state))
        self.query_one("#status", Static).update(render.status_text(state))
        width = self.query_one("#progress", Static).content_size.width
        self.query_one("#progress", Static).update(render.progress_text(state, width))
        camera = self.query_one("#camera", Static)
        if state.has_frames and not camera.display:  # a camera run: lay out, draw next tick
            camera.display = True
            self._dirty = True
        for widget_id, panel in (("camera", render.camera_panel), ("loss", render.loss_panel),
                                 ("accuracy", render.accuracy_panel)):
            widget = self.query_one(f"#{widget_id}", Static)
            size = widget.content_size
            widget.update(panel(state, size.width, max(2, size.height)))
        self.query_one("#classes", Static).update(render.classes_panel(state))
        memory = self.query_one("#memory", Static)
        memory.update(render.memory_panel(state, memory.content_size.width))
        perf = self.query_one("#perf", Static)
        perf.update(render.perf_panel(state, perf.content_size.width))
        log = self.query_one("#log", Static)
        log.update(render.log_panel(state, max(1, log.content_size.height)))


def run_dashboard(source: EventSource, log_path: str | Path | None = None,
                  on_key: Callable[[str], bool] | None = None,
                  stop: threading.Event | None = None) -> RunState:
    """Show `source` full screen until the user quits (q); returns the state at that point.
    With `log_path`, every event is also appended there as it arrives; `on_key` is offered
    every other key pressed (tinyprop learn --labels keys: a class's index labels a frame).
    `stop`: the source's stop flag (training.run.RunConfig.stop), set when the user quits a run
    under way, whose last events (its `stop`) are then taken before this returns."""
    pump = EventPump(source, log_path)
    app = Dashboard(pump, on_key=on_key)
    app.run()
    if stop is not None and not pump.finished.is_set():
        stop.set()
        for event in pump:
            app.state.fold(event)
    return app.state
