"""`tinyprop demo` end to end on the host board (the C core; the README's run uses qemu-m4):
convert, score the original model on the shifted holdout, train, export, score the fine-tuned
model with TFLite, write the figures, the run log with its evaluations, and the report PNG."""

from __future__ import annotations

import json

import pytest
from tinyprop.cli import main
from tinyprop.monitor.runlog import read_runlog


@pytest.mark.slow  # a 276-step run and TFLite on the holdout
def test_demo_on_the_host_board(vww_model_path, vww_data_dir, tmp_path, capsys):
    out, js = tmp_path / "demo", tmp_path / "demo.json"
    out.mkdir()  # an earlier demo's log in the same folder must not leak into this run's figures
    (out / "run.jsonl").write_text('{"type":"summary","steps":1,"instructions_per_step":1}\n')
    # last:2 needs no calibration, which keeps the test short; the default scheme is auto
    assert main(["demo", "--board", "host", "--scheme", "last:2", "--epochs", "1", "--plain",
                 "--model", str(vww_model_path), "--data", str(vww_data_dir),
                 "--out", str(out), "--json", str(js)]) == 0
    printed = capsys.readouterr().out
    r = json.loads(js.read_text())
    assert r["board"] == "host" and r["shift"] == "haze" and r["train_steps"] == 276
    assert r["accuracy_before"] == round(76 / 121, 4)  # the pretrained model on the hazy holdout
    assert r["accuracy_after"] > r["accuracy_before"]
    # last:2 peaks at the first pointwise op, whose DSP kernel's scratch (968 B, the default
    # target cortex-m4) adds to the activations' 55,296 B there
    assert r["total_sram"] == r["arena_peak"] + r["trainable_bytes"] == 122_376 + 968
    assert f"{r['accuracy_after']:.1%}" in printed and "fine-tuned model" in printed
    assert (out / "vww_tuned.tflite").stat().st_size == vww_model_path.stat().st_size
    assert (out / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    events = read_runlog(out / "run.jsonl")
    assert events[0]["type"] == "start" and [e["steps"] for e in events
                                              if e["type"] == "summary"] == [276]
    evals = [e for e in events if e["type"] == "eval"]
    assert [(e["step"], round(e["accuracy"], 4)) for e in evals] == [
        (0, r["accuracy_before"]), (276, r["accuracy_after"])]
