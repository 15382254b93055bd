"""Killing QEMU under `tinyprop train --board qemu-m4 --checkpoint-every N`: the CLI says so in one
line on stderr and exits non-zero, and `--resume` finishes the run with parameters equal, byte for
byte, to an uninterrupted reference run (stochastic rounding is keyed by the step). Ctrl-C (a
real SIGINT to the CLI's process group): a logged stop that keeps what was trained, and a resume
that refuses another run's flags and logs each step once."""

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


# Ctrl-C as a user does it (issue 30, item 5): SIGINT to the process group, as a terminal sends
# it, to `tinyprop train` running the host board (a real process on pipes) or qemu-m4.

def _steps(log: Path) -> list[int]:
    return [json.loads(line)["step"] for line in log.read_text().splitlines()
            if '"type":"step"' in line]


def _interrupt(cmd: list[str], log: Path, after_step: int) -> tuple[int, str]:
    """Run the CLI in a session of its own, Ctrl-C it (its process group) once the log holds
    `after_step`; (exit status, stderr)."""
    proc = subprocess.Popen([sys.executable, "-m", "tinyprop.cli", *cmd],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while _last_step(log) < after_step and proc.poll() is None:
            assert time.monotonic() < deadline, "the run never reached the step to stop at"
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


def _ctrl_c_then_resume(board: str, tpb: Path, data: Path, tmp_path: Path, steps: int,
                        stop_at: int, capsys) -> None:
    """Ctrl-C: a clean logged stop (exit 130) that keeps what was trained (export works), a
    resume that refuses another run's flags, then continues the log without a repeated step, to
    the parameters of an uninterrupted run (the C core in this process: the same bits)."""
    from tinyprop.monitor.runlog import RunState, read_runlog

    log, ckpt = tmp_path / "run.jsonl", tmp_path / "run.ckpt"
    train = ["train", str(tpb), "--data", str(data), "--board", board, "--steps", str(steps),
             "--checkpoint", str(ckpt), "--plain", "--log", str(log)]
    status, err = _interrupt(train, log, stop_at)
    assert status == 130, err
    done = len(_steps(log))
    assert err.strip().splitlines() == [
        f"tinyprop train: interrupted after {done} of {steps} steps; {ckpt} holds them: continue "
        f"with --resume, or write the fine-tuned model with tinyprop export {tpb} -o "
        f"TUNED.tflite --checkpoint {ckpt}"]
    events = read_runlog(log)
    assert [e["type"] for e in events].count("disconnect") == 0
    assert events[-1]["type"] == "stop" and events[-1]["step"] == done
    assert events[-1]["reason"] == "interrupted"
    state = RunState.from_events(events)
    assert state.status == "STOPPED" and not state.disconnected
    assert json.loads(ckpt.read_bytes().partition(b"\n")[0])["step"] == done
    assert main(["export", str(tpb), "-o", str(tmp_path / "stopped.tflite"),
                 "--checkpoint", str(ckpt)]) == 0

    capsys.readouterr()
    for flag, value, recorded in (("--lr", "0.01", "0.005"), ("--seed", "3", "0"),
                                  ("--steps", str(steps + 10), str(steps))):
        args = [*train, "--resume"]
        if flag in args:
            args[args.index(flag) + 1] = value
        else:
            args += [flag, value]
        assert main(args) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and flag in lines[0] and recorded in lines[0], lines
        assert "drop --resume" in lines[0]

    resumed, reference = tmp_path / "resumed.tflite", tmp_path / "reference.tflite"
    assert main([*train, "--resume", "--out", str(resumed)]) == 0
    assert main(["train", str(tpb), "--data", str(data), "--board", "host", "--steps",
                 str(steps), "--plain", "--checkpoint", str(tmp_path / "ref.ckpt"),
                 "--out", str(reference)]) == 0
    assert resumed.read_bytes() == reference.read_bytes()
    assert _steps(log) == list(range(steps))  # each step once: the report counts `steps`
    events = read_runlog(log)
    times = [e["time"] for e in events]
    assert times == sorted(times)  # the resumed log runs on from the stop: rates stay sane
    state = RunState.from_events(events)
    assert state.steps_seen == steps and state.status == "FINISHED"
    gaps = [b - a for a, b in zip(state.step_times, state.step_times[1:], strict=False)]
    assert min(gaps) >= 0 and state.ms_per_step > 0


def test_ctrl_c_on_the_host_board_stops_cleanly_and_resumes(vww_model_path, vww_data_dir,
                                                            tmp_path, capsys):
    tpb = tmp_path / "vww.tpb"
    assert main(["convert", str(vww_model_path), "-o", str(tpb), "--scheme", "last:2"]) == 0
    board = str(Path(__file__).resolve().parents[1] / "boards" / "host")
    _ctrl_c_then_resume(board, tpb, vww_data_dir, tmp_path, 16, 5, capsys)


@pytest.mark.slow  # QEMU training runs
def test_ctrl_c_on_qemu_stops_cleanly_and_resumes(vww_model_path, vww_data_dir, tmp_path,
                                                  capsys):
    tpb = tmp_path / "vww.tpb"
    assert main(["convert", str(vww_model_path), "-o", str(tpb), "--scheme", "last:2"]) == 0
    _ctrl_c_then_resume("qemu-m4", tpb, vww_data_dir, tmp_path, 20, 5, capsys)
