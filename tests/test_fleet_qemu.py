"""A fleet board on qemu-m4 (the emulated Cortex-M4 running the device firmware with the blob,
through the same Engine API as the host board): its round, pushed the global arrays over
PUSH_PARAMS, training its camera's photos and pulled back, equals the host board's bit for
bit, and so does its score of a global model. A board whose QEMU is killed mid-round answers
an error naming it and the kill, and rejoins the next round."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

# tinyprop.fleet (through fleet_data) before flwr: Flower's telemetry off
from fleet_data import vww_last2, vww_slice

pytest.importorskip("flwr")  # tinyprop[fleet]: scripts/setup.sh installs it

from test_fleet_apps import node_context, train_message  # noqa: E402
from tinyprop.fleet.apps import BOARD_FAILED, client_app, from_record  # noqa: E402
from tinyprop.fleet.node import BoardNode, FleetConfig  # noqa: E402


@pytest.fixture
def fleet(vww_model_path, vww_data_dir, tmp_path):
    return FleetConfig(vww_last2(vww_model_path, tmp_path / "vww.tpb"),
                       vww_slice(vww_data_dir, tmp_path / "data", train=2, holdout=1),
                       ("haze", "night"), seed=2)


@pytest.mark.slow  # VWW on qemu-m4: a firmware build, then 15-30 s of emulation
def test_a_qemu_board_trains_its_round_as_the_host_board(fleet):
    start = fleet.layout().initial_arrays()
    host = BoardNode(fleet, "night", index=1, board="host")
    qemu = BoardNode(fleet, "night", index=1, board="qemu-m4")
    want, want_result = host.train(start, round_=2)
    got, result = qemu.train(start, round_=2)
    assert {n: a.tobytes() for n, a in got.items()} == {n: a.tobytes() for n, a in want.items()}
    assert any((got[n] != start[n]).any() for n in start)  # it trained
    assert result == want_result
    assert qemu.evaluate(got) == host.evaluate(got)


def qemu_children() -> list[int]:
    """The QEMU processes this test process started (its children, by /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)
        except OSError:  # gone meanwhile
            continue
        if "qemu-system" in fields[0] and int(fields[1].split()[1]) == os.getpid():
            found.append(int(stat.parent.name))
    return found


def kill_qemu_once_started(after: float) -> threading.Thread:
    """A thread that kills the first QEMU this process starts, `after` s into its run."""
    def run() -> None:
        deadline = time.monotonic() + 120
        while not (pids := qemu_children()) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(after)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # the round ended first: the test's asserts say so
                pass

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.mark.slow  # two rounds of a board on qemu-m4
def test_a_board_killed_mid_round_fails_that_round_and_rejoins_the_next(fleet):
    app = client_app(fleet)
    context = node_context(3, {"name": "night", "board": "qemu-m4"})
    start = fleet.layout().initial_arrays()
    killer = kill_qemu_once_started(after=2.0)  # while the global arrays are pushed
    reply = app(train_message(start, 3, round_=1), context)
    killer.join()
    assert reply.has_error() and reply.error.code == BOARD_FAILED
    assert reply.error.reason.startswith("night: device on socket://127.0.0.1:")
    assert "killed by signal 9" in reply.error.reason
    # the next round opens the board afresh: it trains from the global arrays it is sent
    reply = app(train_message(start, 3, round_=2), context)
    assert not reply.has_error()
    want, _ = BoardNode(fleet, "night", index=1, board="host").train(start, round_=2)
    got = from_record(reply.content["arrays"])
    assert {n: a.tobytes() for n, a in got.items()} == {n: a.tobytes() for n, a in want.items()}
