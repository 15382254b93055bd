"""The host monitor: a live Textual dashboard or plain lines, fed by an EventSource."""

from .app import Dashboard, run_dashboard
from .plain import plain_lines
from .sources import EventPump, EventSource, live_source, replay_source

__all__ = [
    "Dashboard",
    "EventPump",
    "EventSource",
    "live_source",
    "plain_lines",
    "replay_source",
    "run_dashboard",
]
