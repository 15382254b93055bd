"""`tinyprop report RUN.jsonl`: plots of a recorded run (PNG, optionally an HTML page)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import TinypropError


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        help="plot a recorded run: loss, accuracy, memory, counter per step",
        description="Draw the report of a run log (written by `tinyprop train` or "
        "`tinyprop monitor --log`) as a PNG; --html also writes a page around it.",
    )
    parser.add_argument("runlog", type=Path, metavar="RUN.jsonl")
    parser.add_argument("-o", "--output", type=Path, default=None, metavar="report.png",
                        help="PNG to write (default: RUN.png beside the log)")
    parser.add_argument("--html", action="store_true",
                        help="also write an HTML page (same name, .html) with the run's tables")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..monitor.report import draw_report, write_html  # matplotlib: only when drawing
    from ..monitor.runlog import RunState, read_runlog

    state = RunState.from_events(read_runlog(args.runlog))
    if not state.steps_seen:
        raise TinypropError(
            f"{args.runlog}: no step events, nothing to plot; give the log of a run that trained"
        )
    png = draw_report(state, args.output or args.runlog.with_suffix(".png"))
    print(f"wrote {png}")
    if args.html:
        print(f"wrote {write_html(state, png, png.with_suffix('.html'))}")
    return 0
