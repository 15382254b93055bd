"""Run log writing/reading and the RunState fold. `synth_run` (a realistic recorded run) is
also the fixture of test_monitor.py, test_report.py and docs/make_screenshots.py."""

from __future__ import annotations

import base64
import math
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from tinyprop.errors import TinypropError
from tinyprop.monitor.runlog import RunLog, RunState, frame_event, frame_pixels, read_runlog

CLASSES = ["non_person", "person"]


def synth_run(steps: int = 552, seed: int = 0, eval_every: int = 276,
              end: str = "summary") -> list[dict]:
    """Events of a plausible VWW fine-tuning run on qemu-m4: loss falling from ~0.7 with noise,
    accuracy rising from ~55 % to ~85 %, ~1.83M instructions a step, ~3 samples/s, a few
    skipped samples and one device error, evals on the holdout. `end` is "summary",
    "disconnect" or "none" (the source just stops)."""
    rng = random.Random(seed)
    sram = 262144
    memory = {"static": 5120, "arena_peak": 61234, "trainable": 9000, "stack_peak": 1400,
              "sram": sram}
    events: list[dict] = [{
        "type": "start", "time": 0.0, "board": "qemu-m4", "counter_unit": "instructions",
        "sram": sram, "model": "vww_96_int8.tflite", "blob_id": "8c1f9a02d4e6b7c3",
        "classes": CLASSES, "steps_total": steps, "scheme": "auto@256KB", "lr": 0.01,
        "seed": seed, "firmware": "0.1.0",  # an unknown field: kept, ignored
    }]
    t, correct_total, losses = 0.4, 0, []
    for step in range(steps):
        t += rng.uniform(0.28, 0.38)
        if step in (40, 41, 300):
            events.append({"type": "step", "step": step, "epoch": step // 276, "time": round(t, 3),
                           "skipped": True, "memory": memory})
            continue
        p_correct = 0.55 + 0.30 * (1 - math.exp(-step / 120))
        label = rng.randrange(2)
        correct = rng.random() < p_correct
        prediction = label if correct else 1 - label
        loss = max(0.02, (0.72 - 0.45 * (1 - math.exp(-step / 150))) * rng.uniform(0.5, 1.5))
        correct_total += correct
        losses.append(loss)
        events.append({
            "type": "step", "step": step, "epoch": step // 276, "time": round(t, 3),
            "loss": round(loss, 4), "label": label, "prediction": prediction,
            "correct": correct, "skipped": False,
            "counter": 1834000 + rng.randrange(-2000, 2000),
            "memory": {**memory, "stack_peak": 1400 + rng.randrange(0, 64)},
            "lr": 0.01,  # unknown field
        })
        if step == 42:
            events.append({"type": "log", "time": round(t, 3), "text": "label 7 out of range"})
        if step == 39:
            events.append({"type": "error", "time": round(t, 3), "code": 7,
                           "name": "WRONG_SAMPLE_SIZE", "text": "sample 41 has 27000 bytes"})
        if (step + 1) % eval_every == 0:
            accuracy = 0.6 + 0.2 * (step + 1) / steps
            events.append({
                "type": "eval", "time": round(t + 0.2, 3), "split": "holdout", "step": step + 1,
                "accuracy": round(accuracy, 3),
                "per_class": {"non_person": round(accuracy + 0.08, 3),
                              "person": round(accuracy - 0.1, 3)},
                "confusion": [[61, 7], [16, 37]],
            })
            t += 0.5
        if step == steps // 3:
            events.append({"type": "log", "time": round(t, 3), "text": "epoch checkpoint"})
    if end == "summary":
        scored = len(losses)
        events.append({
            "type": "summary", "time": round(t + 0.1, 3), "steps": steps,
            "loss_mean_last_50": round(sum(losses[-50:]) / len(losses[-50:]), 4),
            "accuracy_train": round(correct_total / scored, 4), "elapsed_s": round(t, 2),
            "samples_per_s": round(steps / t, 3),
        })
    elif end == "disconnect":
        events.append({"type": "disconnect", "time": round(t + 0.1, 3),
                       "text": "socket://127.0.0.1:4444 closed"})
    return events


def write_run(path, events: list[dict]) -> None:
    with RunLog(path) as log:
        for event in events:
            log.write(event)


def test_round_trip_keeps_unknown_fields(tmp_path):
    events = synth_run(60, eval_every=30)
    write_run(tmp_path / "run.jsonl", events)
    assert read_runlog(tmp_path / "run.jsonl") == events
    assert read_runlog(tmp_path / "run.jsonl")[0]["firmware"] == "0.1.0"


def test_writer_stamps_time_and_numpy_values(tmp_path):
    with RunLog(tmp_path / "run.jsonl") as log:
        written = log.write({"type": "log", "text": "hi", "values": np.arange(3, dtype=np.int8),
                             "loss": np.float32(0.5)})
    (back,) = read_runlog(tmp_path / "run.jsonl")
    assert back["time"] == written["time"] and 0 <= back["time"] < 5
    assert back["values"] == [0, 1, 2] and back["loss"] == 0.5


def test_killed_writer_leaves_every_complete_line(tmp_path):
    """A real writer process is killed while it writes; the log reads up to its last full line."""
    path = tmp_path / "run.jsonl"
    script = textwrap.dedent(f"""
        import os, signal, sys
        from tinyprop.monitor.runlog import RunLog
        log = RunLog({str(path)!r})
        for i in range(200):
            log.write({{"type": "step", "step": i, "time": i * 0.1, "loss": 0.5}})
        # Half a line without a newline, as a write cut short by the kill leaves it.
        log._file.write('{{"type": "step", "step": 200, "lo'); log._file.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], check=False)
    assert proc.returncode == -9
    events = read_runlog(path)
    assert [e["step"] for e in events] == list(range(200))


def test_damaged_line_in_the_middle_is_an_error(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text('{"type": "log", "text": "a"}\n{"type": "lo\n{"type": "log", "text": "b"}\n')
    with pytest.raises(TinypropError, match=r"run.jsonl:2: not a JSON object"):
        read_runlog(path)
    path.write_text('[1, 2]\n')
    with pytest.raises(TinypropError, match=r"run.jsonl:1: an event must be a JSON object"):
        read_runlog(path)
    with pytest.raises(TinypropError, match="cannot read the run log"):
        read_runlog(tmp_path / "missing.jsonl")


def test_runstate_folds_a_run():
    events = synth_run(552)
    state = RunState.from_events(events)
    steps = [e for e in events if e["type"] == "step"]
    scored = [e for e in steps if not e["skipped"]]
    assert state.steps_seen == 552 and state.skipped == 3 and state.steps_done == 552
    assert state.progress == 1.0 and state.status == "FINISHED" and state.eta_s is None
    assert state.scored == len(scored) == len(state.losses) == len(state.loss_ema)
    assert state.accuracy == pytest.approx(sum(e["correct"] for e in scored) / len(scored))
    assert state.accuracy == pytest.approx(events[-1]["accuracy_train"], abs=1e-4)
    last50 = [e["correct"] for e in steps[-50:] if not e["skipped"]]
    assert state.accuracy_window == pytest.approx(sum(last50) / len(last50))
    # Confusion rows are labels, columns predictions; per-class accuracy is the diagonal share.
    for label, name in enumerate(CLASSES):
        row = [sum(1 for e in scored if e["label"] == label and e["prediction"] == p)
               for p in range(2)]
        assert state.confusion[label] == row
        assert state.per_class_accuracy[name] == pytest.approx(row[label] / sum(row))
    assert state.counter == scored[-1]["counter"] and len(state.counters) == len(scored)
    assert state.memory == scored[-1]["memory"] and state.sram == 262144
    assert state.memory_total == 5120 + 61234 + 9000 + scored[-1]["memory"]["stack_peak"]
    assert len(state.evals) == 2 and state.evals[-1]["step"] == 552
    assert state.last_error["name"] == "WRONG_SAMPLE_SIZE"
    assert any("ERROR WRONG_SAMPLE_SIZE (7)" in line for line in state.logs)
    # The EMA is smoother than the loss itself and ends near the late mean.
    assert abs(state.loss_smoothed - sum(state.losses[-50:]) / 50) < 0.1
    window_times = [e["time"] for e in steps[-50:]]
    assert state.samples_per_s == pytest.approx(49 / (window_times[-1] - window_times[0]))


def test_runstate_midway_eta_and_endings():
    events = synth_run(200, eval_every=100)
    half = [e for e in events if e["type"] != "summary"][:120]
    state = RunState.from_events(half)
    assert state.status == "RUNNING" and 0 < state.progress < 1
    remaining = 200 - state.steps_done
    assert state.eta_s == pytest.approx(remaining / state.samples_per_s)
    state.end_of_source()  # the source ended without a summary: the link was lost
    assert state.status == "DISCONNECTED" and state.losses  # data kept
    cut = RunState.from_events(synth_run(50, eval_every=25, end="disconnect"))
    assert cut.status == "DISCONNECTED" and "closed" in cut.disconnect_text


def test_runstate_tolerates_unknown_and_partial_events():
    state = RunState.from_events([
        {"type": "mystery", "time": 1.0, "x": 1},
        {"type": "step", "step": 0, "time": 2.0, "loss": 0.5, "label": 2, "prediction": 0},
        {"type": "step", "time": 3.0, "loss": 0.4},
    ])
    assert state.events == 3 and state.time == 3.0 and state.steps_done == 2
    assert state.accuracy == 0.0 and state.confusion[2][0] == 1 and len(state.confusion) == 3
    assert state.class_names == ["class 0", "class 1", "class 2"]
    assert state.progress is None and state.status == "RUNNING"
    assert state.counter is None and state.counter_mean is None  # no step had a counter


def test_device_restart_clears_disconnect_and_keeps_data():
    events = synth_run(60, eval_every=30, end="disconnect")
    state = RunState.from_events(events)
    confusion = [row[:] for row in state.confusion]
    assert state.status == "DISCONNECTED"
    state.fold(events[0])  # the device is back and says hello again
    assert state.status == "RUNNING" and state.confusion == confusion and state.losses


def test_runstate_epochs_step_times_and_units():
    events = synth_run(600, eval_every=300)
    state = RunState.from_events(events)
    assert state.epoch_starts == [(0, 0), (276, 1), (552, 2)]  # synth_run: 276 steps an epoch
    scored = [e for e in events if e["type"] == "step" and not e["skipped"]]
    assert state.step_times == [e["time"] for e in scored]
    assert state.ms_per_step == pytest.approx(1000 / state.samples_per_s)
    assert state.counter_unit == "instructions"
    assert RunState().counter_unit == "counter" and RunState().ms_per_step is None


def engine_run(steps: int = 200) -> list[dict]:
    """synth_run as the in-process engines log it (`tinyprop train --board host|reference`): no
    device counter, no SRAM figure, only the arena and trainable bytes measured."""
    events = []
    for event in synth_run(steps, eval_every=steps):
        event = {k: v for k, v in event.items() if k not in ("counter", "counter_unit", "sram")}
        if "memory" in event:
            event["memory"] = {"arena_peak": 55296, "trainable": 67080}
        events.append(event)
    return events


def test_non_finite_losses_are_written_as_null(tmp_path):
    path = tmp_path / "run.jsonl"
    with RunLog(path) as log:
        log.write({"type": "step", "step": 0, "loss": float("nan"), "skipped": True})
        log.write({"type": "step", "step": 1, "loss": float("inf"), "skipped": True})
    lines = path.read_text().splitlines()
    assert all('"loss":null' in line for line in lines)  # strict JSON: no NaN, no Infinity
    assert [e["loss"] for e in read_runlog(path)] == [None, None]


def camera_image(frame: int, size: int = 48) -> np.ndarray:
    """A known RGB picture for frame `frame`: red rises down the rows, green across the
    columns, blue is the frame index."""
    rows, cols = np.mgrid[0:size, 0:size]
    return np.stack([rows * 255 // (size - 1), cols * 255 // (size - 1),
                     np.full((size, size), frame % 256)], axis=-1).astype(np.uint8)


def camera_run(frames: int = 120, labelled_every: int = 3, replays: int = 1,
               seed: int = 0) -> list[dict]:
    """Events of a `tinyprop learn` run as docs/runlog.md defines them: a frame every 0.1 s,
    each with its thumbnail; every `labelled_every`-th frame labelled and trained on, then
    `replays` replay steps on earlier labelled frames; the others predicted only. Predictions
    start at chance and improve."""
    rng = random.Random(seed)
    events: list[dict] = [{
        "type": "start", "time": 0.0, "app": "learn", "board": "qemu-m4",
        "counter_unit": "instructions", "sram": 262144, "model": "vww_96_int8.tflite",
        "blob_id": "8c1f9a02", "classes": CLASSES, "scheme": "last:2", "lr": 0.01, "seed": seed,
        "camera": {"width": 176, "height": 144, "format": "gray8"},
    }]
    step, labelled_frames = 0, []
    for frame in range(frames):
        t = round(0.5 + 0.1 * frame, 3)
        label = rng.randrange(2)
        right = rng.random() < 0.5 + 0.4 * frame / frames
        prediction = label if right else 1 - label
        memory = {"static": 5120, "arena_peak": 61234, "trainable": 9000, "stack_peak": 1400,
                  "sram": 262144}
        if frame % labelled_every == 0:
            events.append({"type": "step", "step": step, "frame": frame, "time": t,
                           "loss": round(rng.uniform(0.1, 0.9), 4), "label": label,
                           "prediction": prediction, "correct": right, "skipped": False,
                           "counter": 45_000_000, "memory": memory})
            step += 1
            for earlier in labelled_frames[-replays:] if replays else []:
                events.append({"type": "step", "step": step, "frame": earlier, "replay": True,
                               "time": t, "loss": 0.3, "label": 0, "prediction": 1,
                               "correct": False, "skipped": False, "counter": 45_000_000,
                               "memory": memory})
                step += 1
            labelled_frames.append(frame)
            shown = label
        else:
            events.append({"type": "sample_eval", "step": step, "frame": frame, "time": t,
                           "label": None, "prediction": prediction, "correct": None,
                           "skipped": False, "counter": 15_000_000, "memory": memory})
            shown = None
        events.append({**frame_event(camera_image(frame), frame, shown, prediction), "time": t})
    return events


def test_frame_event_round_trip(tmp_path):
    """A thumbnail goes through the run log as written and comes back pixel for pixel."""
    gray = np.arange(6 * 5, dtype=np.uint8).reshape(6, 5) * 8
    rgb = camera_image(7, size=9)
    with RunLog(tmp_path / "run.jsonl") as log:
        log.write(frame_event(gray, 3, None, 1))
        log.write(frame_event(rgb, 7, 1, 0))
    first, second = read_runlog(tmp_path / "run.jsonl")
    assert {k: first[k] for k in ("type", "frame", "width", "height", "channels", "label",
                                  "prediction")} == {"type": "frame", "frame": 3, "width": 5,
                                                     "height": 6, "channels": 1, "label": None,
                                                     "prediction": 1}
    assert first["pixels"] == base64.b64encode(gray.tobytes()).decode()  # rows packed
    assert np.array_equal(frame_pixels(first), gray[..., None])
    assert (second["width"], second["height"], second["channels"]) == (9, 9, 3)
    assert np.array_equal(frame_pixels(second), rgb) and frame_pixels(second)[8, 0, 0] == 255
    assert frame_pixels(frame_event(gray[..., None], 0, 0, 0)).shape == (6, 5, 1)


@pytest.mark.parametrize(("pixels", "message"), [
    (np.zeros((4, 4), np.float32), r"frame 5: thumbnail pixels are float32 \(4, 4\); give a uint8"),
    (np.zeros((4, 4, 4), np.uint8), r"frame 5: thumbnail pixels are uint8 \(4, 4, 4\)"),
    (np.zeros((0, 4), np.uint8), r"frame 5: thumbnail pixels are uint8 \(0, 4\)"),
])
def test_frame_event_refuses_what_is_not_a_thumbnail(pixels, message):
    with pytest.raises(TinypropError, match=message):
        frame_event(pixels, 5, None, 0)


def test_bad_frame_events_name_what_is_wrong():
    good = frame_event(np.zeros((4, 4), np.uint8), 2, None, 0)
    for change, message in [
        ({"pixels": base64.b64encode(bytes(12)).decode()},
         r"frame event 2: 12 pixel bytes, 4 x 4 x 1 = 16"),
        ({"pixels": "not base64!"}, r"frame event 2: pixels are not base64"),
        ({"channels": 4}, r"frame event 2: .*channels 1 or 3, not \[4, 4, 4\]"),
        ({"width": "4"}, r"frame event 2: height, width and channels must be positive"),
    ]:
        with pytest.raises(TinypropError, match=message):
            frame_pixels({**good, **change})
    # A reader never fails on one: the state says so in its log and keeps the last good frame.
    state = RunState.from_events([good, {**good, "frame": 3, "pixels": "AAAA"}])
    assert state.thumbnail.index == 2
    assert any("frame event 3: 3 pixel bytes" in line for line in state.logs)


def test_runstate_counts_frames_and_leaves_replay_steps_out():
    events = camera_run(120, labelled_every=3, replays=1)
    state = RunState.from_events(events)
    steps = [e for e in events if e["type"] == "step"]
    new = [e for e in steps if not e.get("replay")]
    replays = [e for e in steps if e.get("replay")]
    assert len(new) == 40 and len(replays) == 39 and all(not e["correct"] for e in replays)
    assert state.frames_seen == 120 and state.frame_index == 119
    assert state.frames_labelled == 40 and state.frames_correct == sum(e["correct"] for e in new)
    assert state.frame_accuracy == pytest.approx(sum(e["correct"] for e in new) / 40)
    # The replay steps (all wrong here) are training steps: they weigh on the training accuracy,
    # never on the accuracy on labelled frames.
    assert state.steps_seen == 79 and state.scored == 79
    assert state.accuracy == pytest.approx(sum(e["correct"] for e in new) / 79)
    assert state.frame_accuracy > state.accuracy
    last = state.thumbnail
    assert (last.index, last.label, last.prediction) == (119, None, events[-1]["prediction"])
    assert np.array_equal(last.pixels, camera_image(119))
    # The report's samples: 8, spread evenly over the run, the newest last.
    samples = [f.index for f in state.sample_frames()]
    assert len(samples) == 8 and samples[0] == 0 and samples[-1] == 119
    gaps = np.diff(samples)
    assert gaps.min() >= 119 // 7 - 8 and gaps.max() <= 119 // 7 + 8
    assert len(state.frame_samples) <= 16  # bounded, however long the run
    assert len(RunState.from_events(camera_run(600)).frame_samples) <= 16


def test_frame_fields_unknown_to_a_reader_are_ignored_and_runs_without_frames_unchanged():
    events = camera_run(12)
    extra = [{**e, "exposure_us": 500, "roi": [0, 0, 96, 96]} for e in events]
    plain, with_extras = RunState.from_events(events), RunState.from_events(extra)
    assert (with_extras.frames_seen, with_extras.frames_labelled, with_extras.frame_accuracy) == \
        (plain.frames_seen, plain.frames_labelled, plain.frame_accuracy)
    state = RunState.from_events(synth_run(120, eval_every=60))
    assert not state.has_frames and state.thumbnail is None and state.frame_index is None
    assert state.frames_seen == state.frames_labelled == 0 and state.frame_accuracy is None
    assert state.sample_frames() == []
    # A sample_eval without a frame (the device loop's) is no camera frame either.
    device_eval = {"type": "sample_eval", "step": 3, "prediction": 1}
    assert not RunState.from_events([device_eval]).has_frames


def test_a_stopped_run_shows_stopped_not_a_lost_link():
    from tinyprop.monitor.render import event_line, progress_text, status_text

    stop = {"type": "stop", "time": 3.0, "reason": "interrupted", "step": 2,
            "text": "stopped by the user after 2 of 10 steps"}
    state = RunState.from_events([{"type": "start", "steps_total": 10},
                                  {"type": "step", "step": 0, "time": 1.0, "loss": 0.5},
                                  {"type": "step", "step": 1, "time": 2.0, "loss": 0.4}, stop])
    state.end_of_source()  # no summary: the stop says why
    assert state.status == "STOPPED" and not state.disconnected and state.eta_s is None
    assert status_text(state).plain == " STOPPED "
    assert "stopped by the user after 2 of 10 steps" in progress_text(state, 80).plain
    assert "link lost" not in progress_text(state, 80).plain
    assert event_line(state, stop) == "STOPPED stopped by the user after 2 of 10 steps"


def test_a_resumed_log_keeps_each_step_once_and_its_time_runs_on(tmp_path):
    from tinyprop.monitor.runlog import drop_steps_from

    path = tmp_path / "run.jsonl"
    with RunLog(path) as log:
        log.write({"type": "start", "time": 0.0})
        for step in range(5):
            log.write({"type": "step", "step": step, "time": 1.0 + step})
        log.write({"type": "disconnect", "time": 6.5, "text": "board killed"})
    path.write_text(path.read_text() + '{"type":"step","st')  # the writer died mid-line
    assert drop_steps_from(path, 3) == 3  # steps 3, 4 and the cut line
    with RunLog(path) as log:  # the resumed run
        assert log.resumed_at == 6.5
        written = log.write({"type": "start"})
    events = read_runlog(path)
    assert [e.get("step") for e in events if e["type"] == "step"] == [0, 1, 2]
    assert [e["type"] for e in events] == ["start", "step", "step", "step", "disconnect",
                                           "start"]
    assert 6.5 <= written["time"] < 7.5
