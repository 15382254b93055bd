"""Where monitor events come from, and the pump that moves them off the producer's thread.

An EventSource is any iterator of event dicts (docs/runlog.md); it ending means the run is over
or the link was lost. The pump consumes it on a worker thread into an unbounded queue, so a slow
display never holds up the producer: the display drains the queue at its own pace.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from ..errors import TinypropError
from .runlog import RunLog, read_runlog

EventSource = Iterator[dict]


def replay_source(path: str | Path, speed: float | None = None) -> EventSource:
    """The events of a recorded run log; with `speed`, paced by their `time` (2.0 = twice as
    fast as recorded), else as fast as they can be read."""
    if speed is not None and speed <= 0:
        raise TinypropError(f"--speed {speed}: must be a positive factor, e.g. 1 or 10")
    events = read_runlog(path)

    def generate() -> EventSource:
        t0 = time.monotonic()
        for event in events:
            if speed is not None and isinstance(event.get("time"), (int, float)):
                delay = event["time"] / speed - (time.monotonic() - t0)
                if delay > 0:
                    time.sleep(delay)
            yield event

    return generate()


def live_source(url: str) -> EventSource:
    """Events from a device link (serial port, socket://host:port, exec:COMMAND): `start` from
    the device's READY (sent again if it restarts), then `step` (or `sample_eval`) for each
    METRIC, `error` for each ERROR and `log` for each LOG it sends, until the link closes, which
    ends the source with a `disconnect` event. The monitor owns the link: the device trains on
    its own samples (or a tool on its other end drives it) while the monitor listens."""
    # Imported here: the replay path must not need the protocol stack.
    from ..device.device import COUNTER_UNITS, Device, step_event
    from ..device.link import open_link
    from ..device.protocol import Error, Log, Metric, Ready
    from ..errors import DeviceError
    from ..status import status_name

    link = open_link(url)  # a bad port or URL is a user error now, not a disconnect later

    def start(ready: Ready) -> dict:
        return {"type": "start", "board": ready.board, "sram": ready.sram_bytes,
                "counter_unit": COUNTER_UNITS.get(ready.counter_unit, "?"),
                "blob_id": f"{ready.blob_id:08x}"}

    def generate() -> EventSource:
        with link:
            try:
                ready = Device(link).hello()
                yield start(ready)
                while True:
                    got = link.recv(1.0)
                    msg = None if got is None else got.msg
                    if isinstance(msg, Metric):
                        yield step_event(msg, ready.sram_bytes)
                    elif isinstance(msg, Error):
                        yield {"type": "error", "code": msg.code, "name": status_name(msg.code),
                               "text": msg.text}
                    elif isinstance(msg, Log):
                        yield {"type": "log", "text": msg.text}
                    elif isinstance(msg, Ready):
                        ready = msg
                        yield start(ready)
            except DeviceError as exc:
                yield {"type": "disconnect", "text": str(exc)}

    return generate()


END = object()  # queued after the source's last event


class EventPump:
    """Runs `source` on a daemon thread, queueing each event (and writing it to `log_path` if
    given, on the same thread, so the log is complete whatever the display does). Events
    without a `time` get one. A source that raises is reported as a `disconnect` event; the END
    marker follows the last event."""

    def __init__(self, source: EventSource, log_path: str | Path | None = None) -> None:
        self.events: queue.SimpleQueue = queue.SimpleQueue()
        self._source = source
        self._log_path = log_path
        self._thread = threading.Thread(target=self._run, name="tinyprop-events", daemon=True)
        self.finished = threading.Event()

    def start(self) -> EventPump:
        self._thread.start()
        return self

    def _run(self) -> None:
        log = RunLog(self._log_path) if self._log_path is not None else None
        t0 = time.monotonic() - (log.resumed_at if log is not None else 0.0)

        def put(event: dict) -> None:
            # Rates and ETA need `time`: stamp it here, so the display has it with or without a
            # log, on the same clock as the log (seconds since the pump started, after a
            # resumed log's last).
            if "time" not in event:
                event = {**event, "time": round(time.monotonic() - t0, 6)}
            self.events.put(log.write(event) if log is not None else event)

        try:
            for event in self._source:
                put(event)
        except TinypropError as exc:  # ours (DeviceError too): the message says it all
            put({"type": "disconnect", "text": str(exc)})
        except Exception as exc:  # noqa: BLE001 - any failure of the link ends the run the same way
            put({"type": "disconnect", "text": f"{type(exc).__name__}: {exc}"})
        finally:
            if log is not None:
                log.close()
            self.events.put(END)
            self.finished.set()

    def __iter__(self) -> EventSource:
        """Queued events as they come, blocking, until the source ends."""
        while (item := self.events.get()) is not END:
            yield item

    def drain(self, limit: int | None = None) -> tuple[list[dict], bool]:
        """Events queued so far (at most `limit`), and whether the source has ended."""
        taken: list[dict] = []
        while limit is None or len(taken) < limit:
            try:
                item = self.events.get_nowait()
            except queue.Empty:
                return taken, False
            if item is END:
                return taken, True
            taken.append(item)
        return taken, False
