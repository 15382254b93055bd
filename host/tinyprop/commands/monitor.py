"""`tinyprop monitor SOURCE`: the live dashboard for a recorded run (RUN.jsonl) or a device."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import TinypropError


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "monitor",
        help="show a training run live: loss, accuracy, memory, speed",
        description="Full-screen dashboard of a training run, from a recorded run log "
        "(RUN.jsonl, replayed) or a device link (serial port or socket://host:port), or of a "
        "fleet (the fleet.jsonl `tinyprop fleet` writes: who is online, each board's and the "
        "global model's accuracy round by round). "
        "When stdout is not a terminal, prints one line an event instead.",
    )
    parser.add_argument("source", metavar="RUN.jsonl|PORT_OR_URL")
    parser.add_argument("--plain", action="store_true", help="one line an event, no dashboard")
    parser.add_argument("--speed", type=float, default=None, metavar="X",
                        help="replay at X times the recorded pace (default: as fast as it reads)")
    parser.add_argument("--log", type=Path, default=None, metavar="FILE",
                        help="also append every event received to FILE (JSONL)")
    parser.add_argument("--follow", action="store_true",
                        help="a fleet log: show it as the fleet writes it, until the fleet ends")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..monitor import live_source, plain_lines, replay_source, run_dashboard  # textual
    from ..monitor.fleet import is_fleet_log

    if args.source.endswith(".jsonl") and is_fleet_log(args.source):
        return fleet(args)
    if args.follow:
        raise TinypropError(f"--follow: {args.source} is not a fleet log; --follow shows a "
                            "fleet.jsonl as `tinyprop fleet` writes it")
    if args.source.endswith(".jsonl"):
        if args.log is not None and Path(args.log).resolve() == Path(args.source).resolve():
            raise TinypropError(f"--log {args.log}: is the run being replayed; give another file")
        source = replay_source(args.source, args.speed)
    else:
        source = live_source(args.source)
    if args.plain or not sys.stdout.isatty():
        try:
            state = plain_lines(source, sys.stdout, log_path=args.log)
        except BrokenPipeError:  # the reader (e.g. `| head`) has had enough: not an error
            sys.stdout = None  # no flush of the closed pipe at exit
            return 0
    else:
        state = run_dashboard(source, log_path=args.log)
    return 1 if state.disconnected else 0


def fleet(args: argparse.Namespace) -> int:
    """A fleet log, replayed or (--follow) followed: 0 once the fleet completed, else 1."""
    from ..monitor.fleet import follow_source, plain_fleet, replay_fleet, run_fleet_dashboard

    for flag, given in (("--speed", args.speed), ("--log", args.log)):
        if given is not None:
            raise TinypropError(f"{flag}: not for a fleet log; drop it (a fleet log is "
                                "already the record of the run)")
    source = follow_source(args.source) if args.follow else replay_fleet(args.source)
    if args.plain or not sys.stdout.isatty():
        state = plain_fleet(source, sys.stdout)
    else:
        state = run_fleet_dashboard(source)
    return 0 if state.ended == "completed" else 1
