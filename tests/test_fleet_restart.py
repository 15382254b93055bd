"""A deployed fleet (Flower's Deployment Engine, real processes on 127.0.0.1) refuses a
SuperNode whose key is not on the SuperLink's list while the run goes on with the listed ones,
and takes back a SuperNode that was killed and restarted; nothing is left running or listening
afterwards."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

import pytest

# tinyprop.fleet (through fleet_data) before flwr: Flower's telemetry off
from fleet_data import small_fleet as make_small_fleet

pytest.importorskip("flwr")  # tinyprop[fleet]: scripts/setup.sh installs it

from tinyprop.fleet.deploy import LocalFederation, marked_pids  # noqa: E402
from tinyprop.fleet.node import FleetConfig  # noqa: E402

CLIENTS = ("haze", "night")
# s: a round without a board's reply goes on after this long. Longer than the SuperLink holds
# a killed SuperNode online (two 30 s heartbeat intervals at most), so round 1 ends when it
# declares night gone, the moment its restarts start being accepted: night is back well
# before round 3, which starts two rounds of haze alone later.
ROUND_TIMEOUT = 70.0


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def small_fleet(vww_model_path, vww_data_dir, tmp_path):
    return make_small_fleet(vww_model_path, vww_data_dir, tmp_path)


@pytest.mark.slow  # the Deployment Engine's processes, 3 rounds, 30-60 s of a node gone
def test_a_deployed_fleet_refuses_an_unknown_node_and_takes_back_a_restarted_one(small_fleet,
                                                                                  tmp_path):
    """A third SuperNode with a key of its own, never registered: the SuperLink refuses it
    (its log says no SuperNode has that key), it exits saying it could not activate. Then,
    as round 1's training starts, night's SuperNode is killed (its machine loses power) and
    started again as a supervisor would: the round goes on without it once the SuperLink
    declares it gone (no heartbeat for two intervals), and it is back for round 3 by the same
    name. Afterwards no
    process of the federation is left and none of its ports listens.

    night's SuperNode is frozen (SIGSTOP) as the run starts, before round 1 hands out its
    messages, so it cannot pull round 1's work and reply before it is killed, however late
    this thread sees round 1 begin on a loaded machine (it once did: every round had both
    boards). The SuperLink still counts it online for round 1: a node stays online for two
    heartbeat intervals after its last heartbeat, at least 33 s after the freeze."""
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
        night = federation.nodes[1]
        for seen in ('"type":"fleet"', '"phase":"train"'):  # the run began; round 1 began
            deadline = time.monotonic() + 120
            while not (log.exists() and seen in log.read_text()):
                assert runner.is_alive() and time.monotonic() < deadline, seen
                time.sleep(0.1)
            if seen == '"type":"fleet"':
                os.kill(night.process.pid, signal.SIGSTOP)
        federation.restart_node(night)
        runner.join(600)
        assert federation.online() == len(CLIENTS)
        ports = [federation.port] + [n.port for n in federation.nodes]
    report = ran["report"]
    names = [[c["name"] for c in r["clients"]] for r in report["rounds"]]
    # round 2: night took part, or failed, or was not back online yet when the round sampled
    # its nodes (a loaded machine: its restart had not yet re-registered with the SuperLink)
    assert names[0] == ["haze"] and names[2] == ["haze", "night"], names
    assert names[1] in (["haze"], ["haze", "night"]), names
    assert not report["rounds"][1]["failed"] or names[1] == ["haze"], report["rounds"][1]
    [failed] = report["rounds"][0]["failed"]
    assert failed["name"] == "night", failed  # named once it replied, in a later round
    assert report["rounds"][2]["failed"] == []
    assert all(r["rejected"] == [] for r in report["rounds"])
    assert marked_pids(str(tmp_path / "federation")) == []
    assert not any(listening(p) for p in ports)
