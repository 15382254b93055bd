"""Killing QEMU under `tinyprop train --board qemu-m4 --checkpoint-every N`: the CLI says so in one
line on stderr and exits non-zero, and `--resume` finishes the run with parameters equal, byte for
byte, to an uninterrupted reference run (stochastic rounding is keyed by the step)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tinyprop.cli import main
from tinyprop.compile.blob import read_blob

STEPS, EVERY = 30, 10
KILL_AFTER_STEP = 14  # past the first checkpoint: the steps after it are lost


def _qemu_child(pid: int) -> int | None:
    """The qemu-system-arm process the CLI started, if it runs yet."""
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        for child in children.read_text().split():
            comm = Path(f"/proc/{child}/comm")
            if comm.exists() and comm.read_text().strip() == "qemu-system-arm":
                return int(child)
    return None


def _last_step(log: Path) -> int:
    steps = [json.loads(line)["step"] for line in log.read_text().splitlines()
             if line.endswith("}") and '"type":"step"' in line] if log.exists() else []
    return max(steps, default=-1)


def _train(tpb: Path, data: Path, board: str, ckpt: Path, *extra: str) -> list[str]:
    return ["train", str(tpb), "--data", str(data), "--board", board, "--steps", str(STEPS),
            "--checkpoint-every", str(EVERY), "--checkpoint", str(ckpt), "--plain", *extra]


@pytest.mark.slow  # QEMU training runs
def test_killed_qemu_then_resume_equals_an_uninterrupted_run(vww_model_path, vww_data_dir,
                                                             tmp_path, capsys):
    tpb, log, ckpt = tmp_path / "vww.tpb", tmp_path / "run.jsonl", tmp_path / "run.ckpt"
    assert main(["convert", str(vww_model_path), "-o", str(tpb), "--scheme", "last:2"]) == 0
    cmd = [sys.executable, "-m", "tinyprop.cli",
           *_train(tpb, vww_data_dir, "qemu-m4", ckpt, "--log", str(log))]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while _last_step(log) < KILL_AFTER_STEP and proc.poll() is None:
            assert time.monotonic() < deadline, "the run never reached the step to kill at"
            time.sleep(0.05)
        qemu = _qemu_child(proc.pid)
        assert qemu is not None, "QEMU is not running under tinyprop train"
        os.kill(qemu, signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "qemu-m4 stopped after" in lines[0] and "killed by signal 9" in lines[0]
    saved = json.loads(ckpt.read_bytes().partition(b"\n")[0])["step"]
    assert EVERY <= saved < STEPS and saved % EVERY == 0
    assert f"{ckpt} holds step {saved}: continue with --resume" in lines[0]

    resumed, reference = tmp_path / "resumed.tflite", tmp_path / "reference.tflite"
    assert main(_train(tpb, vww_data_dir, "qemu-m4", ckpt, "--resume", "--log", str(log),
                       "--out", str(resumed))) == 0
    ref_ckpt = tmp_path / "ref.ckpt"
    assert main(_train(tpb, vww_data_dir, "reference", ref_ckpt, "--out", str(reference))) == 0
    capsys.readouterr()
    # the last checkpoints hold the final params of both runs (STEPS is a multiple of EVERY)
    assert ckpt.read_bytes() == ref_ckpt.read_bytes()
    assert resumed.read_bytes() == reference.read_bytes()
    events = [json.loads(line) for line in log.read_text().splitlines()]
    steps = [e["step"] for e in events if e["type"] == "step"]
    # the plan the log states is the blob's, the DSP kernels' scratch included, and the board's
    # arena high-water mark reaches it
    plan = read_blob(tpb.read_bytes()).train_arena_bytes
    assert {e["memory_plan"]["arena_peak"] for e in events if e["type"] == "start"} == {plan}
    assert max(e["memory"]["arena_peak"] for e in events if e["type"] == "step") == plan
    assert steps[-(STEPS - saved):] == list(range(saved, STEPS))  # resumed at the checkpoint
