"""The issue #5 acceptance run: 200 training steps of the MLPerf VWW model on the emulated
Cortex-M4 through `tinyprop train --board qemu-m4` export a .tflite equal, byte for byte, to the
NumPy reference run's, and the run log's summary carries the board's measured cost per training
step and per inference. About a minute (QEMU -icount runs ~6 VWW steps a second)."""

from __future__ import annotations

import pytest
from tinyprop.cli import main
from tinyprop.monitor.runlog import read_runlog

STEPS = 200


@pytest.mark.slow
def test_200_vww_steps_on_qemu_m4_export_the_reference_bytes(vww_model_path, vww_data_dir,
                                                               tmp_path):
    tpb = tmp_path / "vww.tpb"
    assert main(["convert", str(vww_model_path), "-o", str(tpb), "--scheme", "last:2"]) == 0
    out, logs = {}, {}
    for board in ("reference", "qemu-m4"):
        out[board], logs[board] = tmp_path / f"{board}.tflite", tmp_path / f"{board}.jsonl"
        assert main(["train", str(tpb), "--data", str(vww_data_dir), "--board", board,
                     "--steps", str(STEPS), "--shift", "night", "--plain",
                     "--log", str(logs[board]), "--out", str(out[board])]) == 0
    tuned = out["qemu-m4"].read_bytes()
    assert tuned == out["reference"].read_bytes()
    assert tuned != vww_model_path.read_bytes()  # 200 steps changed the trained layers

    events = read_runlog(logs["qemu-m4"])
    steps = [e for e in events if e["type"] == "step"]
    summary = events[-1]
    assert [e["step"] for e in steps] == list(range(STEPS))
    assert events[0]["counter_unit"] == summary["counter_unit"] == "instructions"
    assert all(e["counter"] > 0 for e in steps)
    # a training step is a forward pass plus backward and update: dearer than an inference
    # (8.3 M instructions with the DSP kernels: a whole VWW forward pass, not a stub)
    assert summary["instructions_per_step"] > summary["instructions_per_inference"] > 5e6
    ref_summary = read_runlog(logs["reference"])[-1]
    assert "instructions_per_step" not in ref_summary  # the reference counts nothing
