"""A fleet board on qemu-m4 (the emulated Cortex-M4 running the device firmware with the blob,
through the same Engine API as the host board): its round, pushed the global arrays over
PUSH_PARAMS, training its camera's photos and pulled back, equals the host board's bit for
bit, and so does its score of a global model."""

from __future__ import annotations

import pytest

# tinyprop.fleet (through fleet_data) before flwr: Flower's telemetry off
from fleet_data import vww_last2, vww_slice

pytest.importorskip("flwr")  # the fleet's tests run where Flower is installed (its own venv)

from tinyprop.fleet.node import BoardNode, FleetConfig  # noqa: E402


@pytest.mark.slow  # VWW on qemu-m4: a firmware build, then 15-30 s of emulation
def test_a_qemu_board_trains_its_round_as_the_host_board(vww_model_path, vww_data_dir,
                                                         tmp_path):
    fleet = FleetConfig(vww_last2(vww_model_path, tmp_path / "vww.tpb"),
                        vww_slice(vww_data_dir, tmp_path / "data", train=2, holdout=1),
                        ("haze", "night"), seed=2)
    start = fleet.layout().initial_arrays()
    host = BoardNode(fleet, "night", index=1, board="host")
    qemu = BoardNode(fleet, "night", index=1, board="qemu-m4")
    want, want_result = host.train(start, round_=2)
    got, result = qemu.train(start, round_=2)
    assert {n: a.tobytes() for n, a in got.items()} == {n: a.tobytes() for n, a in want.items()}
    assert any((got[n] != start[n]).any() for n in start)  # it trained
    assert result == want_result
    assert qemu.evaluate(got) == host.evaluate(got)
