"""The fleet on Flower's Deployment Engine: real processes on 127.0.0.1 (a SuperLink, one
SuperNode a host board, the apps' processes Flower starts), TLS and SuperNode authentication.
The same fleet on both runtimes gives the same JSON and the same global models byte for byte;
a SuperNode whose key is not on the SuperLink's list is refused while the run goes on with the
listed ones; nothing is left running or listening after a run."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import tomllib

# tinyprop.fleet (through fleet_data) before flwr: Flower's telemetry off
from fleet_data import vww_last2, vww_slice

pytest.importorskip("flwr")  # tinyprop[fleet]: scripts/setup.sh installs it

from flwr.app import ConfigRecord, Context, Message, Metadata, RecordDict  # noqa: E402
from flwr.common.config import validate_config  # noqa: E402
from tinyprop.cli import main  # noqa: E402
from tinyprop.fleet.apps import from_record, to_record  # noqa: E402
from tinyprop.fleet.deploy import (  # noqa: E402
    MARK,
    LocalFederation,
    client_app,
    marked_pids,
)
from tinyprop.fleet.node import BoardNode, FleetConfig  # noqa: E402

CLIENTS = ("haze", "night")
ROUND_TIMEOUT = 20.0  # s: a round without a board's reply goes on after this long


def fleet_processes() -> list[int]:
    """Every live process any LocalFederation started (its environment holds MARK)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and int(entry.name) != os.getpid() and any(
                    v.startswith(f"{MARK}=".encode())
                    for v in (entry / "environ").read_bytes().split(b"\0")):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def small_fleet(vww_model_path, vww_data_dir, tmp_path):
    """The VWW last:2 blob and a vww-mini slice of 4 training and 2 holdout photos a class."""
    return (vww_last2(vww_model_path, tmp_path / "vww.tpb"),
            vww_slice(vww_data_dir, tmp_path / "data", train=4, holdout=2))


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


@pytest.mark.slow  # Ray's start and the Deployment Engine's processes: a minute or two
def test_deployment_run_equals_the_simulation_bit_for_bit(small_fleet, tmp_path):
    """`tinyprop fleet --deploy` (TLS, authenticated SuperNodes) and the Simulation Engine run
    of the same fleet: the same JSON but for where the .tflite went, the same .tflite bytes
    every round; no process of the deployment is left."""
    tpb, data = small_fleet
    common = ["fleet", str(tpb), "--data", str(data), "--clients", ",".join(CLIENTS),
              "--rounds", "2", "--seed", "3", "--server-holdout", "none"]
    assert main([*common, "--out", str(tmp_path / "sim"), "--json",
                 str(tmp_path / "sim.json")]) == 0
    assert main([*common, "--out", str(tmp_path / "dep"), "--json",
                 str(tmp_path / "dep.json"), "--deploy"]) == 0
    assert fleet_processes() == []
    sim, dep = (json.loads((tmp_path / f"{k}.json").read_text()) for k in ("sim", "dep"))
    assert [len(r["clients"]) for r in dep["rounds"]] == [2, 2]
    assert [Path(p).name for p in dep["exported"]] == ["round-1.tflite", "round-2.tflite"]
    for report in (sim, dep):
        report.pop("exported")
    assert dep == sim
    for n in (1, 2):
        assert ((tmp_path / "dep" / f"round-{n}.tflite").read_bytes() ==
                (tmp_path / "sim" / f"round-{n}.tflite").read_bytes())


@pytest.mark.slow  # the Deployment Engine's processes, 3 rounds, two waits of ROUND_TIMEOUT
def test_a_deployed_fleet_refuses_an_unknown_node_and_takes_back_a_restarted_one(small_fleet,
                                                                                  tmp_path):
    """A third SuperNode with a key of its own, never registered: the SuperLink refuses it
    (its log says no SuperNode has that key), it exits saying it could not activate. Then,
    as round 1's training starts, night's SuperNode is killed (its machine loses power) and
    started again as a supervisor would: the round goes on without it (no reply: its message
    expires with the round), and it is back for round 3 by the same name. Afterwards no
    process of the federation is left and none of its ports listens."""
    tpb, data = small_fleet
    log = tmp_path / "fleet.jsonl"
    fleet = FleetConfig(tpb, data, CLIENTS, rounds=3, seed=3, log=log,
                        round_timeout=ROUND_TIMEOUT)
    with LocalFederation(tmp_path / "federation") as federation:
        for name in CLIENTS:
            federation.add_node(name, "host")
        intruder = federation.add_node("sodium", "host", register=False)
        federation.wait_online(len(CLIENTS))
        assert intruder.process.wait(60) != 0
        said = intruder.log.read_text()  # Flower's exit code 305: no connection to the SuperLink
        assert "Exit Code: 305" in said and "Failed to activate SuperNode" in said
        assert "No SuperNode found with the given public key" in \
            federation.superlink_log.read_text()
        ran: dict = {}
        runner = threading.Thread(target=lambda: ran.update(report=federation.run(fleet)))
        runner.start()
        deadline = time.monotonic() + 120
        while not (log.exists() and '"phase":"train"' in log.read_text()):
            assert runner.is_alive() and time.monotonic() < deadline
            time.sleep(0.1)
        federation.restart_node(federation.nodes[1])
        runner.join(600)
        assert federation.online() == len(CLIENTS)
        ports = [federation.port] + [n.port for n in federation.nodes]
    report = ran["report"]
    assert [[c["name"] for c in r["clients"]] for r in report["rounds"]] == \
        [["haze"], ["haze"] if report["rounds"][1]["failed"] else ["haze", "night"],
         ["haze", "night"]]
    [failed] = report["rounds"][0]["failed"]
    assert failed["name"] == "night", failed  # named once it replied, in a later round
    assert report["rounds"][2]["failed"] == []
    assert all(r["rejected"] == [] for r in report["rounds"])
    assert marked_pids(str(tmp_path / "federation")) == []
    assert not any(listening(p) for p in ports)


@pytest.mark.slow  # the Deployment Engine's processes, then a round or two
def test_sigterm_ends_a_deployed_fleet_and_every_process(small_fleet, tmp_path):
    """SIGTERM during `tinyprop fleet --deploy`: exit 143 within seconds, and no SuperLink,
    SuperNode, SuperExec or app process is left. (Ctrl-C unwinds the same way, as a
    KeyboardInterrupt through LocalFederation.close: exit 130, the Simulation Engine's test.)"""
    tpb, data = small_fleet
    out = tmp_path / "rounds"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tinyprop.cli", "fleet", str(tpb), "--data", str(data), "--clients",
         ",".join(CLIENTS), "--rounds", "1000", "--out", str(out), "--deploy"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        deadline = time.monotonic() + 180
        while not (out / "round-1.tflite").exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        assert len(fleet_processes()) >= 1 + 2 * len(CLIENTS)  # a SuperLink, its SuperNodes
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert fleet_processes() == []
