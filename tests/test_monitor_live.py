"""The monitor on a live device: the POSIX host board (firmware/apps/device/tp_device.c over real
pipes) trains while the dashboard shows it, then the board is killed mid-run. The dashboard says
DISCONNECTED and keeps what it had; the run log holds every step received, then the loss."""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from modelgen import build_tflite, sample_inputs
from test_monitor import screen_text, settle
from tinyprop.compile.blobfile import TrainingBlob, make_blob
from tinyprop.compile.scheme import parse_scheme
from tinyprop.device.firmware import build_device_firmware
from tinyprop.engines import HParams
from tinyprop.engines.device import DeviceEngine
from tinyprop.frontend.tflite_reader import read_tflite
from tinyprop.monitor import Dashboard, EventPump
from tinyprop.monitor.render import fmt_pct
from tinyprop.monitor.runlog import read_runlog
from tinyprop.training.run import RunConfig, training_events

LABELS = [0, 1, 1, 0, 1, 0, 0, 1]


@pytest.fixture(scope="module")
def small_blob() -> tuple[TrainingBlob, list]:
    """The generated MobileNetV1 tail (12x12x16 input), last two layers trained."""
    path = build_tflite("mbv1_tail")
    return make_blob(path, parse_scheme(read_tflite(path), "last:2")), sample_inputs(path, 8, 3)


def test_dashboard_follows_a_host_board_run_and_its_loss(small_blob, tmp_path):
    tb, inputs = small_blob
    log = tmp_path / "live.jsonl"
    engine = DeviceEngine("host", tb, HParams(lr=0.05, seed=7))
    board = engine.device.process.proc
    args = RunConfig(lr=0.05, seed=7, schedule="constant")
    # Far more steps than the test lets it run: the board dies in the middle of the run.
    source = training_events(args, tb, engine, inputs, LABELS, 1_000_000, 0)

    async def drive():
        app = Dashboard(EventPump(source, log_path=log))
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, app, lambda: app.state.steps_seen >= 30)
            live = screen_text(app)
            board.kill()
            await settle(pilot, app, lambda: app.source_ended)
            return app, live, screen_text(app), set(app.screen.classes)

    try:
        app, live, lost, classes = asyncio.run(drive())
    finally:
        engine.close()
    state = app.state
    # While it runs: identity, RUNNING, the board's own counter and memory against its SRAM.
    for shown in ("RUNNING", "board host", "scheme last:2", "of SRAM", "/step", "samples/s"):
        assert shown in live, shown
    assert "DISCONNECTED" not in live
    # After the kill: DISCONNECTED with the link's reason, and the figures it had are kept.
    assert "DISCONNECTED" in lost and "RUNNING" not in lost
    assert "disconnected" in classes  # the panels' borders turn red
    assert "host board" in state.disconnect_text  # the link's name, from the DeviceError
    assert f"step {state.steps_done}/1000000" in lost
    assert f"running {fmt_pct(state.accuracy)}" in lost and f"{state.memory_total:,} B" in lost
    assert state.steps_done > 30 and state.memory["sram"] == state.sram > 0
    # The log: the start, every step received in order, then the disconnect; nothing cut off.
    events = read_runlog(log)
    assert log.read_text().endswith("\n")
    assert events[0]["type"] == "start" and events[0]["counter_unit"] == state.counter_unit
    steps = [e for e in events if e["type"] == "step"]
    assert [e["step"] for e in steps] == list(range(state.steps_done))
    assert steps[-1]["loss"] == state.loss and steps[-1]["counter"] == state.counter
    assert events[-1]["type"] == "disconnect" and events[-1]["text"] == state.disconnect_text
    assert len(events) == state.events


def test_monitor_verb_on_a_host_board_link(small_blob, tmp_path):
    """`tinyprop monitor exec:BOARD` (stdout a pipe, so plain lines): the board's READY as the
    start line, then its loss when it stops, exit status 1, and the log written."""
    tb, _ = small_blob
    board = build_device_firmware("host", tb.blob)
    log = tmp_path / "monitor.jsonl"
    # `timeout` ends the board after a second: the link closes under the monitor.
    url = "exec:timeout 1 " + shlex.quote(str(board))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "host")}
    done = subprocess.run([sys.executable, "-m", "tinyprop.cli", "monitor", url, "--log", str(log)],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("start board host") and lines[-1].startswith("DISCONNECTED ")
    events = read_runlog(log)
    assert [e["type"] for e in events] == ["start", "disconnect"]
    assert events[0]["blob_id"] == f"{int.from_bytes(tb.blob[-4:], 'little'):08x}"
