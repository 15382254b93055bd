"""The fleet on Flower's Deployment Engine: real processes on 127.0.0.1 (a SuperLink, one
SuperNode a host board, the apps' processes Flower starts), TLS and SuperNode authentication.
Each round of a deployed fleet is the fleet recomputed here, byte for byte, as on the
Simulation Engine; SIGTERM ends a deployment and every process of it. (A refused SuperNode and
a restarted one: test_fleet_restart.py, a file of its own so that the workers share the slow
tests.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tomllib

# tinyprop.fleet (through fleet_data) before flwr: Flower's telemetry off
from fleet_data import check_rounds, killed_output
from fleet_data import small_fleet as make_small_fleet

pytest.importorskip("flwr")  # tinyprop[fleet]: scripts/setup.sh installs it

from flwr.app import ConfigRecord, Context, Message, Metadata, RecordDict  # noqa: E402
from flwr.common.config import validate_config  # noqa: E402
from tinyprop.cli import main  # noqa: E402
from tinyprop.fleet.apps import from_record, to_record  # noqa: E402
from tinyprop.fleet.deploy import (  # noqa: E402
    client_app,
    marked_pids,
)
from tinyprop.fleet.node import BoardNode, FleetConfig  # noqa: E402

CLIENTS = ("haze", "night")


@pytest.fixture
def small_fleet(vww_model_path, vww_data_dir, tmp_path):
    return make_small_fleet(vww_model_path, vww_data_dir, tmp_path)


def test_a_fleet_travels_as_a_run_config_in_a_flower_app(small_fleet, tmp_path, capsys):
    """The fleet's Flower App (`tinyprop fleet --write-app`): a pyproject.toml Flower's own
    check accepts, whose run config gives back the same FleetConfig, unset options (None) left
    out."""
    tpb, data = small_fleet
    full = FleetConfig(tpb, data, ("haze", "night"), "host", 3, 2, 0.01, 7, "trimmed", 0.25,
                       tmp_path / "m.tflite", tmp_path / "out", ("host", "qemu-m4"), "none",
                       tmp_path / "out" / "fleet.jsonl", 90.0)
    bare = FleetConfig(tpb, data, ("haze",))
    for fleet in (full, bare):
        assert FleetConfig.from_run_config(fleet.to_run_config()) == fleet
    assert not {"holdout", "out", "log"} & set(bare.to_run_config())
    app = tmp_path / "app"
    assert main(["fleet", str(tpb), "--data", str(data), "--clients", "haze,night", "--board",
                 "host,qemu-m4", "--rounds", "3", "--epochs", "2", "--lr", "0.01", "--seed",
                 "7", "--strategy", "trimmed", "--holdout", "0.25", "--model",
                 str(tmp_path / "m.tflite"), "--out", str(tmp_path / "out"),
                 "--server-holdout", "none", "--round-timeout", "90", "--write-app",
                 str(app)]) == 0
    assert f"the ServerApp writes {app / 'fleet.json'}" in capsys.readouterr().out
    config = tomllib.loads((app / "pyproject.toml").read_text())
    valid, errors, _ = validate_config(config, check_module=True, project_dir=app)
    assert valid, errors
    run_config = config["tool"]["flwr"]["app"]["config"]
    assert run_config["report"] == str(app / "fleet.json")
    assert FleetConfig.from_run_config(run_config) == full


def test_the_deployed_client_app_takes_the_fleet_from_the_run_and_paths_from_its_node(
        small_fleet, tmp_path):
    """The Flower App's ClientApp (deploy.client_app, no fleet of its own): the run config
    names the fleet, the node config the board and this machine's copies of the blob and the
    data (the run config's paths do not exist here); it trains as that board's node does."""
    tpb, data = small_fleet
    fleet = FleetConfig(tpb, data, CLIENTS, rounds=2, seed=3)
    elsewhere = FleetConfig(tmp_path / "server" / "vww.tpb", tmp_path / "server" / "data",
                            CLIENTS, rounds=2, seed=3)
    start = fleet.layout().initial_arrays()
    meta = Metadata(run_id=1, message_id="m1", src_node_id=0, dst_node_id=5,
                    reply_to_message_id="", group_id="2", created_at=0.0, ttl=3600.0,
                    message_type="train")
    msg = Message(RecordDict({"arrays": to_record(start),
                              "config": ConfigRecord({"server-round": 2})}), metadata=meta)
    context = Context(run_id=1, node_id=5, state=RecordDict(),
                      run_config=elsewhere.to_run_config(),
                      node_config={"name": "night", "board": "host", "blob": str(tpb),
                                   "data": str(data)})
    reply = client_app(msg, context)
    assert not reply.has_error(), reply.error
    want, _ = BoardNode(fleet, "night", index=1).train(start, round_=2)
    got = from_record(reply.content["arrays"])
    assert {n: a.tobytes() for n, a in got.items()} == {n: a.tobytes() for n, a in want.items()}


def test_deployment_flags_without_deploy_are_refused(small_fleet, capsys):
    tpb, data = small_fleet
    for flag in (["--insecure"], ["--deploy-dir", "logs"]):
        assert main(["fleet", str(tpb), "--data", str(data), "--clients", "haze", *flag]) == 2
        assert f"{flag[0]}: only with --deploy" in capsys.readouterr().err


@pytest.mark.slow  # the Deployment Engine's processes: a minute
def test_a_deployed_run_is_the_fleet_recomputed_bit_for_bit(small_fleet, tmp_path):
    """`tinyprop fleet --deploy` (TLS, authenticated SuperNodes): each round's global model
    (its .tflite, byte for byte), the boards' accuracies and scores are those of the same
    boards trained here from the previous round's global model, as the Simulation Engine's
    are (test_fleet_cli.py); no process of the deployment is left."""
    tpb, data = small_fleet
    federation = tmp_path / "federation"
    assert main(["fleet", str(tpb), "--data", str(data), "--clients", ",".join(CLIENTS),
                 "--rounds", "2", "--seed", "3", "--server-holdout", "none", "--out",
                 str(tmp_path / "dep"), "--json", str(tmp_path / "dep.json"), "--deploy",
                 "--deploy-dir", str(federation)]) == 0
    assert marked_pids(str(federation.resolve())) == []
    report = json.loads((tmp_path / "dep.json").read_text())
    assert [Path(p).name for p in report["exported"]] == ["round-1.tflite", "round-2.tflite"]
    assert all(r["failed"] == [] for r in report["rounds"])
    check_rounds(report, FleetConfig(tpb, data, CLIENTS, rounds=2, seed=3, server="none"),
                 tmp_path / "dep")


@pytest.mark.slow  # the Deployment Engine's processes
def test_sigterm_ends_a_deployed_fleet_and_every_process(small_fleet, tmp_path):
    """SIGTERM during `tinyprop fleet --deploy`: exit 143 within seconds, and no SuperLink,
    SuperNode, SuperExec or app process is left. (Ctrl-C unwinds the same way, as a
    KeyboardInterrupt through LocalFederation.close: exit 130, the Simulation Engine's test.)"""
    tpb, data = small_fleet
    out, federation = tmp_path / "rounds", str((tmp_path / "federation").resolve())
    proc = subprocess.Popen(
        [sys.executable, "-m", "tinyprop.cli", "fleet", str(tpb), "--data", str(data), "--clients",
         ",".join(CLIENTS), "--rounds", "1000", "--out", str(out), "--deploy", "--deploy-dir",
         federation],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        # once round 1's training started: the ServerApp and the boards' apps are running
        deadline, log = time.monotonic() + 300, out / "fleet.jsonl"
        while not (log.exists() and '"phase":"train"' in log.read_text()):
            assert proc.poll() is None and time.monotonic() < deadline, killed_output(proc)
            time.sleep(0.2)
        # a SuperLink, its SuperNodes (this run's: another test's federation may be running)
        assert len(marked_pids(federation)) >= 1 + 2 * len(CLIENTS)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert marked_pids(federation) == []
