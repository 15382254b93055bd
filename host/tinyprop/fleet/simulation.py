"""A fleet run on Flower's Simulation Engine: N emulated boards on this machine (Ray actors,
each opening its node's board per message), the server in this process; the run's figures as
the JSON `tinyprop fleet --json` writes.

    report = run_fleet(FleetConfig(Path("m.tpb"), Path("vww-mini"), ("haze", "night")))
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

from ..errors import TinypropError
from ..extras import quiet_tensorflow
from .apps import FleetServer, client_app, to_record
from .node import BoardNode, FleetConfig, client_data, holdout_accuracy

# Each emulated board takes one CPU of Ray's and no GPU; Ray gets at most two (the boards
# run side by side, the server thread waits), no dashboard and a small object store. Its
# workers start with TensorFlow kept out (_without_tensorflow).
CLIENT_RESOURCES = {"num_cpus": 1, "num_gpus": 0.0}
STOP_WAIT = 10.0  # s for the server to end its rounds after Ctrl-C
RAY_INIT = {"include_dashboard": False, "object_store_memory": 100 * 2**20}


def _without_tensorflow() -> None:
    """A Ray worker's setup: `import tensorflow` fails there as if it were not installed. Flower's
    actor module imports flwr.simulation, which imports TensorFlow when it can (for GPU memory
    growth, which a board's node never asks for): 6 s of CPU and 400 MB a worker. A board's
    node trains and scores with the C core and never needs it."""
    sys.modules.setdefault("tensorflow", None)


def run_fleet(fleet: FleetConfig, json_path: Path | None = None, verbose: bool = False,
              alone: bool = False, centralized: bool = False) -> dict:
    """Run `fleet` on the Simulation Engine; its report (fleet_report), also written as JSON
    to `json_path` when given. `verbose`: Flower's INFO log and the Ray workers' output;
    then, here, one after the other: `alone`, each board trained alone for as many steps
    (report["alone"]); `centralized`, one board trained on every board's data for as many
    steps as the whole fleet (report["centralized"])."""
    # flwr.simulation imports TensorFlow when it is installed (for GPU memory growth): quiet
    # here and in the Ray workers, which inherit this
    quiet_tensorflow()
    # Ray's notice that it will stop hiding GPUs from workers asking for none: none is asked
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    from flwr.simulation import run_simulation

    check_fleet(fleet)
    logging.getLogger("flwr").setLevel(logging.DEBUG if verbose else logging.WARNING)
    server = FleetServer(fleet)
    start_ray(min(2, len(fleet.clients)), verbose)
    backend = {"client_resources": dict(CLIENT_RESOURCES)}
    try:
        run_simulation(server_app=server.app, client_app=client_app(fleet),
                       num_supernodes=len(fleet.clients), backend_config=backend,
                       verbose_logging=verbose)
    except KeyboardInterrupt:
        # the server stops waiting for replies and writes the end of its log; Ray is shut
        # down. Flower's worker threads may still wait on Ray futures that never complete,
        # which Python would join at exit: the verb ends the process itself (os._exit).
        server.stop.set()
        server.ended.wait(STOP_WAIT)
        import ray

        ray.shutdown()
        raise
    report = fleet_report(fleet, server)
    add_baselines(report, fleet, alone, centralized)
    if json_path is not None:
        json_path.write_text(json.dumps(report, indent=1) + "\n")
    return report


def start_ray(cpus: int, verbose: bool) -> None:
    """Ray for the Simulation Engine, started here rather than by Flower's Ray backend (which
    starts it only when it is not running, with the same workers' PYTHONPATH: this process's
    sys.path), so that its workers also run _without_tensorflow first."""
    import ray

    if ray.is_initialized():
        return
    path = os.pathsep.join([*sys.path, *filter(None, [os.environ.get("PYTHONPATH")])])
    ray.init(**RAY_INIT, num_cpus=cpus, log_to_driver=verbose,
             runtime_env={"env_vars": {"PYTHONPATH": path},
                          "worker_process_setup_hook":
                          "tinyprop.fleet.simulation._without_tensorflow"})


def check_fleet(fleet: FleetConfig) -> None:
    """Refuse a bad blob, a missing source model, an unknown client or an unwritable --out
    before any runtime starts (Ray, or a Deployment Engine's processes)."""
    fleet.layout()
    for name in fleet.clients + ((fleet.server,) if fleet.server else ()):
        client_data(fleet.data, name)
    if fleet.out is not None:
        try:
            fleet.out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise TinypropError(f"--out {fleet.out}: cannot create it ({exc.strerror}); pass a "
                                "writable folder for the rounds' .tflite") from None


def add_baselines(report: dict, fleet: FleetConfig, alone: bool, centralized: bool) -> None:
    """After a run, on this machine, one after the other: `alone`, each board trained alone
    for as many steps (report["alone"]); `centralized`, one board trained on every board's
    data for as many steps as the whole fleet (report["centralized"])."""
    if alone:
        report["alone"] = [alone_json(fleet, i) for i in range(len(fleet.clients))]
    if centralized:
        report["centralized"] = centralized_json(fleet)


def fleet_report(fleet: FleetConfig, server: FleetServer) -> dict:
    """The run as JSON: its settings, what travels (bytes a board sends a round, the same
    back, against the model's parameters) and each round (RoundRecord.to_json)."""
    layout = server.layout
    return {
        "blob": str(fleet.blob), "blob_id": f"{layout.blob_id:08x}",
        "boards": {name: fleet.board_of(name) for name in fleet.clients},
        "strategy": fleet.aggregation, "epochs": fleet.epochs, "lr": fleet.lr,
        "seed": fleet.seed, "clients": list(fleet.clients),
        "bytes": {"trainable": layout.params_bytes,
                  "message": to_record(layout.initial_arrays()).count_bytes(),
                  "model_parameters": layout.model_bytes},
        "exported": server.exported,
        "server": None if fleet.server is None else
        {"holdout": fleet.server, "accuracy_before": server.server_accuracy.get(0)},
        "rounds": [{**r.to_json(), "server_accuracy": server.server_accuracy.get(r.round)}
                   for r in server.rounds],
    }


def alone_json(fleet: FleetConfig, index: int) -> dict:
    """Board `index` trained alone for the fleet's rounds: its holdout accuracy and steps, or
    why it could not (a board that is gone)."""
    name = fleet.clients[index]
    try:
        _, r = BoardNode(fleet, name, index).train_alone(fleet.rounds)
    except TinypropError as exc:
        return {"name": name, "accuracy": None, "steps": 0, "error": str(exc)}
    return {"name": name, "accuracy": r.accuracy, "steps": r.steps}


def centralized_json(fleet: FleetConfig) -> dict:
    """The centralized bound: one board (the first's) trained on the data of all the boards,
    pooled, for the fleet's rounds of its epochs (as many steps as the whole fleet), then
    scored on each board's holdout."""
    node = BoardNode.pooled(fleet)
    arrays, r = node.train_alone(fleet.rounds)
    return {"steps": r.steps, "accuracy": r.accuracy,
            "clients": [{"name": name, "accuracy": holdout_accuracy(fleet, name, arrays,
                                                                    node.board)}
                        for name in fleet.clients]}


def draw_fleet(report: dict, path: Path) -> Path:
    """A fleet run as a PNG: each board's holdout accuracy of the global model round by round,
    with, at the last round, that board alone (a hollow marker) and the centralized bound
    (a cross) when the report has them; the server's holdout in black."""
    from matplotlib.figure import Figure

    f = Figure(figsize=(8, 3.6), dpi=100)
    ax = f.add_subplot()
    rounds = [r["round"] for r in report["rounds"]]
    alone = {a["name"]: a["accuracy"] for a in report.get("alone", [])}
    central = {c["name"]: c["accuracy"]
               for c in report.get("centralized", {}).get("clients", [])}
    for i, name in enumerate(report["clients"]):
        color = f"C{i}"
        ys = [next((100 * c["global_accuracy"] for c in r["clients"] if c["name"] == name
                    and c["global_accuracy"] is not None), None) for r in report["rounds"]]
        ax.plot(rounds, [float("nan") if y is None else y for y in ys], "o-", color=color,
                label=f"{name}: the global model")
        if alone.get(name) is not None:
            ax.plot([rounds[-1]], [100 * alone[name]], "o", mfc="none", ms=9, color=color)
        if name in central:
            ax.plot([rounds[-1]], [100 * central[name]], "x", ms=9, color=color)
    server = report.get("server")
    if server is not None:
        ax.plot([0, *rounds], [100 * server["accuracy_before"],
                               *(100 * r["server_accuracy"] for r in report["rounds"])],
                "s-", color="black", ms=4, label=f"server's holdout ({server['holdout']})")
    ax.plot([], [], "o", mfc="none", color="gray", label="each board alone, as many steps")
    if central:
        ax.plot([], [], "x", color="gray", label="centralized: all the data")
    ax.set_xlabel("round")
    ax.set_ylabel("holdout accuracy (%)")
    ax.set_xticks([0, *rounds] if server is not None else rounds)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside: no line hidden
    f.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    f.savefig(path)
    return path
