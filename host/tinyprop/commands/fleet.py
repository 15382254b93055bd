"""tinyprop fleet: boards learning together, federated on Flower's Simulation Engine or (with
--deploy) its Deployment Engine on this machine; only the trainable parameters travel
(tinyprop.fleet)."""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

from ..errors import TinypropError
from ..fleet.node import ROUND_TIMEOUT
from ..fleet.params import AGGREGATIONS


def add_parser(sub: argparse._SubParsersAction) -> None:
    from ..engines import BOARD_HELP

    p = sub.add_parser(
        "fleet", help="federated learning: a fleet of boards trains one blob together",
        description="Each board of the fleet trains BLOB on its own data for --epochs, sends "
        "back its trainable parameters (the biases and weight rows the blob trains, never the "
        "frozen weights), the server aggregates them and sends the global ones back; the global "
        "model's .tflite is written after every round. Runs on Flower's Simulation Engine, one "
        "emulated board a client, or with --deploy on its Deployment Engine: a SuperLink and "
        "one SuperNode a board, processes on 127.0.0.1 (needs tinyprop[fleet]).")
    p.add_argument("blob", type=Path, metavar="BLOB.tpb", help="training blob from tinyprop "
                   "convert")
    p.add_argument("--data", type=Path, required=True, metavar="DIR",
                   help="dataset folder (a sub-folder of images a class, holdout.txt)")
    p.add_argument("--clients", required=True, metavar="NAME,NAME,...",
                   help="the boards, by their data: a camera shift of DIR (haze, night, "
                   "sodium, blur, none) or a sub-folder of DIR")
    p.add_argument("--board", default="host", metavar="BOARD[,BOARD,...]",
                   help=f"every client's board, or one a client in --clients order (a mixed "
                   f"fleet): {BOARD_HELP} (default host)")
    p.add_argument("--rounds", type=int, default=5, help="federated rounds (default 5)")
    p.add_argument("--epochs", type=int, default=1,
                   help="local epochs a board trains each round (default 1)")
    p.add_argument("--strategy", choices=AGGREGATIONS, default="fedavg",
                   help="aggregation: fedavg (mean weighted by steps), fedmedian or trimmed "
                   "(robust to a poisoned board); default fedavg")
    p.add_argument("--lr", type=float, default=0.005, help="learning rate (default 0.005)")
    p.add_argument("--seed", type=int, default=0,
                   help="seeds the boards' orders and roundings and the aggregate's rounding")
    p.add_argument("--server-holdout", metavar="NAME",
                   help="score the global model before the first round and after each on this "
                   "holdout too, on this machine: a camera shift of DIR (none: as it is) or a "
                   "sub-folder")
    p.add_argument("--holdout", type=float, default=None, metavar="FRACTION",
                   help="hold out this seeded fraction of every class instead of holdout.txt")
    p.add_argument("--model", type=Path, metavar="SRC.tflite",
                   help="the blob's source .tflite if it moved since convert")
    p.add_argument("--out", type=Path, metavar="DIR", help="where each round's global "
                   ".tflite goes (round-N.tflite; default BLOB's name + .fleet beside it)")
    p.add_argument("--alone", action="store_true", help="then train each board alone for as "
                   "many steps, the baseline (one board after the other, on this machine)")
    p.add_argument("--centralized", action="store_true", help="then train one board on every "
                   "board's data pooled, for as many steps as the whole fleet: the bound")
    p.add_argument("--json", type=Path, metavar="FILE", help="write the rounds as JSON")
    p.add_argument("--log", type=Path, metavar="FILE.jsonl", help="the fleet log: what the "
                   "server sees, as it happens (`tinyprop monitor FILE.jsonl --follow` shows "
                   "it; default OUT/fleet.jsonl)")
    p.add_argument("--round-timeout", type=float, default=ROUND_TIMEOUT, metavar="S",
                   help="seconds a round waits for the boards' replies; a board silent that "
                   f"long is dropped from the round (default {ROUND_TIMEOUT:g}, Flower's)")
    p.add_argument("--plot", type=Path, metavar="FILE.png", help="draw the rounds (and the "
                   "--alone and --centralized runs) as a PNG")
    p.add_argument("--deploy", action="store_true", help="run on Flower's Deployment Engine: "
                   "a SuperLink and one SuperNode a board started here on 127.0.0.1 (free "
                   "ports, TLS, only the fleet's SuperNode keys accepted), all ended on exit")
    p.add_argument("--insecure", action="store_true", help="with --deploy: no TLS, and so no "
                   "SuperNode authentication (Flower needs TLS for it)")
    p.add_argument("--deploy-dir", type=Path, metavar="DIR", help="with --deploy: keep the "
                   "certificates, the SuperNodes' keys, the Flower App and every process's log "
                   "here (default: a temporary folder, removed)")
    p.add_argument("--write-app", type=Path, metavar="DIR", help="write the fleet's Flower "
                   "App (DIR/pyproject.toml, this run's settings as its run config) for `flwr "
                   "run DIR` against a SuperLink of your own, and exit; the ServerApp writes "
                   "the --json (default DIR/fleet.json) on the SuperLink's machine")
    p.add_argument("--verbose", action="store_true", help="show Flower's and Ray's log (the "
                   "Simulation Engine; with --deploy, --deploy-dir keeps every process's log)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..extras import require

    require("flwr", "tinyprop fleet (Flower)", extra="fleet")
    from ..fleet.node import FleetConfig
    from ..fleet.simulation import draw_fleet, run_fleet

    clients = tuple(c.strip() for c in args.clients.split(",") if c.strip())
    out = args.out or args.blob.with_suffix(".fleet")
    boards = tuple(b.strip() for b in args.board.split(","))
    fleet = FleetConfig(args.blob, args.data, clients, boards[0], args.rounds, args.epochs,
                        args.lr, args.seed, args.strategy, args.holdout, args.model, out,
                        boards if len(boards) > 1 else (), args.server_holdout,
                        args.log or out / "fleet.jsonl", args.round_timeout)
    for flag, given in (("--insecure", args.insecure), ("--deploy-dir", args.deploy_dir)):
        if given and not args.deploy:
            raise TinypropError(f"{flag}: only with --deploy (the Simulation Engine has no "
                                f"processes or network of its own); add --deploy or drop {flag}")
    if args.write_app:
        from ..fleet.deploy import write_app

        report = (args.json or args.write_app / "fleet.json").resolve()
        print(f"wrote {write_app(args.write_app, fleet, report) / 'pyproject.toml'}: "
              f"flwr run {args.write_app} CONNECTION (the ServerApp writes {report})")
        return 0
    stopped = False
    with progress(fleet.log):
        if args.deploy:
            from ..fleet.deploy import run_fleet_deployed

            report = run_fleet_deployed(fleet, args.json, tls=not args.insecure,
                                        alone=args.alone, centralized=args.centralized,
                                        workdir=args.deploy_dir)
        else:
            try:
                report = run_fleet(fleet, args.json, verbose=args.verbose, alone=args.alone,
                                   centralized=args.centralized)
            except KeyboardInterrupt:
                stopped = True
    if stopped:
        interrupted()
    if report["server"] is not None:
        print(f"the blob on the server's holdout ({args.server_holdout}): "
              f"{report['server']['accuracy_before']:.1%}")
    for r in report["rounds"]:
        print(round_line(r, args.rounds))
    last = {c["name"]: c["global_accuracy"] for c in report["rounds"][-1]["clients"]}
    for a in report.get("alone", []):
        if a["accuracy"] is None:
            print(f"{a['name']} alone: not trained ({a['error']})")
            continue
        g = last.get(a["name"])
        print(f"{a['name']} alone: {a['accuracy']:.1%} after {a['steps']} steps (the global "
              "model on its holdout: " + (f"{g:.1%})" if g is not None else "-)"))
    if "centralized" in report:
        c = report["centralized"]
        scores = ", ".join(f"{x['name']} {x['accuracy']:.1%}" for x in c["clients"])
        print(f"centralized (one board on all the data, {c['steps']} steps): {scores}")
    b = report["bytes"]
    print(f"each board sends {b['message']:,} B a round and receives as many: the trainable "
          f"parameters ({b['trainable']:,} B), not the model's {b['model_parameters']:,} B")
    if report["exported"]:
        print(f"global models: {out}/round-1..{len(report['exported'])}.tflite")
    if args.json:
        print(f"wrote {args.json}")
    if args.plot:
        print(f"wrote {draw_fleet(report, args.plot)}")
    return 0


def interrupted() -> NoReturn:
    """End the process after Ctrl-C on the Simulation Engine: Flower's worker threads can be
    left waiting on Ray futures that Ray's shutdown never completes, and Python joins such
    threads at exit, forever (seen: a process alive an hour after its Ctrl-C). What the run
    wrote is closed (the fleet log's end, the rounds' .tflite); the verb says what `tinyprop`
    says of any interrupted verb and exits 130."""
    print("tinyprop fleet: interrupted", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(130)


@contextmanager
def progress(log: Path) -> Iterator[None]:
    """While the fleet runs, a line for each event its server writes to `log` (the fleet
    log, written by this process or, deployed, by the ServerApp's), read as it grows."""
    from ..monitor.fleet import event_line, follow_source

    try:
        log.unlink(missing_ok=True)  # a previous run's: its lines are not this run's
    except OSError:
        pass  # not a file we can remove: the fleet's own checks say what is wrong with it
    done = threading.Event()

    def show() -> None:
        while not log.exists():  # the server creates it when its rounds start
            if done.wait(0.2):
                return
        for event in follow_source(log, idle=None):
            line = event_line(event)
            if line is not None:
                print(f"  {line}", flush=True)
            if done.is_set():
                return

    thread = threading.Thread(target=show, name="fleet-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=2)


def round_line(r: dict, rounds: int) -> str:
    """One round: the global model's accuracy, each board's after its local training."""
    g = r["global_accuracy"]
    line = f"round {r['round']}/{rounds}: global " + (f"{g:.1%}" if g is not None else "-")
    if r["server_accuracy"] is not None:
        line += f" (server's holdout {r['server_accuracy']:.1%})"
    boards = ", ".join(f"{c['name']} {c['accuracy']:.1%} ({c['steps']} steps)"
                       for c in r["clients"])
    line += f"; boards after local training: {boards or 'none'}"
    for c in r["rejected"]:
        line += f"; {c['name']} refused ({c['reason']})"
    for c in r["failed"]:
        line += f"; {c['name']} failed ({c['reason']})"
    return line
