"""The monitor: the Textual dashboard driven headless by its pilot, the pump between a live
source and the UI, plain output and the `tinyprop monitor` verb."""

from __future__ import annotations

import asyncio
import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from rich.segment import Segment
from test_runlog import CLASSES, camera_image, camera_run, engine_run, synth_run, write_run
from tinyprop.errors import DeviceError, TinypropError
from tinyprop.monitor import Dashboard, EventPump, plain_lines, replay_source
from tinyprop.monitor.render import (
    HalfBlockImage,
    fit_pixels,
    fmt_pct,
    loss_axis_top,
)
from tinyprop.monitor.runlog import RunState, read_runlog

TINYPROP = [sys.executable, "-m", "tinyprop.cli"]


def screen_text(app: Dashboard) -> str:
    """What the terminal shows, as plain text lines."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def settle(pilot, app: Dashboard, until, timeout: float = 10.0) -> None:
    """Let the UI run until `until()` holds, then one more redraw so the screen shows it."""
    deadline = time.monotonic() + timeout
    while not until():
        assert time.monotonic() < deadline, "dashboard did not get there in time"
        await pilot.pause(0.05)
    await pilot.pause(0.3)


def run_dashboard_headless(source, size=(120, 40), screenshot: Path | None = None):
    async def drive():
        app = Dashboard(EventPump(source))
        async with app.run_test(size=size) as pilot:
            await settle(pilot, app, lambda: app.source_ended)
            if screenshot is not None:
                app.save_screenshot(screenshot.name, path=str(screenshot.parent))
            return app, screen_text(app), set(app.screen.classes)

    return asyncio.run(drive())


@pytest.fixture
def recorded(tmp_path) -> tuple[Path, list[dict]]:
    events = synth_run(552)
    path = tmp_path / "run.jsonl"
    write_run(path, events)
    return path, events


def test_dashboard_replays_a_recorded_run(recorded):
    path, events = recorded
    app, screen, _ = run_dashboard_headless(replay_source(path))
    expected = RunState.from_events(events)
    assert app.state.events == len(events)
    for shown in ("FINISHED", "board qemu-m4", "vww_96_int8.tflite", "auto@256KB",
                  "step 552/552", "100.0%", "eval holdout@552 80.0%", "61,234 B",
                  "of SRAM 262,144 B", "instructions/step", "skipped 3",
                  "ERROR WRONG_SAMPLE_SIZE (7)", "epoch checkpoint",
                  f"loss {expected.loss:.3f}", f"smoothed {expected.loss_smoothed:.3f}",
                  f"running {fmt_pct(expected.accuracy)}",
                  f"last 50 {fmt_pct(expected.accuracy_window)}",
                  f"samples/s {expected.samples_per_s:.2f}", f"{expected.counter:,.0f}",
                  f"ms/step {expected.ms_per_step:.1f}",
                  f"{expected.memory_total:,} B"):
        assert shown in screen, shown
    for name, accuracy in expected.per_class_accuracy.items():
        assert f"{name}" in screen and fmt_pct(accuracy) in screen
    (row_non, row_person) = expected.confusion
    confusion_rows = [line for line in screen.splitlines() if "│ non_person " in line
                      or "│ person " in line]
    assert any(line.split()[-3:-1] == [str(v) for v in row_non] for line in confusion_rows)
    assert any(line.split()[-3:-1] == [str(v) for v in row_person] for line in confusion_rows)
    assert "DISCONNECTED" not in screen
    assert "▀" not in screen and "camera" not in screen  # a run without frames: no camera panel
    # The loss chart is drawn (braille dots) from 0 to just above nearly all the losses.
    assert any(0x2801 <= ord(c) <= 0x28FF for c in screen)
    top = loss_axis_top(expected)
    assert f"{top:.2f}┤" in screen and "0.00┤" in screen
    outlier = RunState.from_events([{"type": "step", "step": i, "loss": 4.0 if i == 50 else 0.5}
                                    for i in range(100)])
    # One 4.0 does not squash the rest; the smoothed curve it lifts stays inside.
    assert loss_axis_top(outlier) == pytest.approx(1.1 * max(outlier.loss_ema))
    assert loss_axis_top(outlier) < 1.0


def test_dashboard_of_an_engine_run_without_device_figures():
    """The in-process engines report no counter, no SRAM and two memory parts: the dashboard
    shows the host clock and what was measured, and says what was not, instead of zeros."""
    events = engine_run(200)
    _, screen, _ = run_dashboard_headless(iter(events))
    state = RunState.from_events(events)
    assert "SRAM not reported by this engine" in screen and screen.count("not reported") == 3
    assert "55,296 B" in screen and "122,376 B" in screen and " 0 B" not in screen
    assert f"ms/step {state.ms_per_step:.1f} (host clock)" in screen
    assert "/step " not in screen.replace("ms/step ", "")  # no device counter line


def test_dashboard_fits_a_small_terminal(recorded):
    path, _ = recorded
    _, screen, _ = run_dashboard_headless(replay_source(path), size=(80, 24))
    assert "FINISHED" in screen and "step 552/552" in screen


def test_disconnect_is_shown_and_keeps_the_data(tmp_path):
    events = synth_run(552, end="none")[:300]
    events.append({"type": "disconnect", "time": events[-1]["time"] + 0.1,
                   "text": "socket://127.0.0.1:4444 closed"})
    svg = tmp_path / "shot.svg"
    _, screen, classes = run_dashboard_headless(iter(events), screenshot=svg)
    state = RunState.from_events(events)
    assert "DISCONNECTED" in screen and "socket://127.0.0.1:4444 closed" in screen
    assert "FINISHED" not in screen and "RUNNING" not in screen
    assert f"step {state.steps_done}/552" in screen and f"loss {state.loss:.3f}" in screen
    assert f"running {fmt_pct(state.accuracy)}" in screen and "61,234 B" in screen
    assert "disconnected" in classes  # the panels' borders turn red
    assert "DISCONNECTED" in svg.read_text()


def test_source_ending_without_summary_is_a_lost_link():
    events = [e for e in synth_run(100, eval_every=50) if e["type"] != "summary"]
    _, screen, _ = run_dashboard_headless(iter(events))
    assert "DISCONNECTED" in screen and "ended before the run's summary" in screen
    assert "step 100/100" in screen


def socket_source(port: int):
    """A live link as the device side will be: JSON lines over a TCP socket on 127.0.0.1."""
    with socket.create_connection(("127.0.0.1", port)) as conn, conn.makefile("r") as lines:
        for line in lines:
            yield json.loads(line)


def test_fast_live_producer_is_never_held_up_by_the_ui():
    """A producer that sends far faster than the UI redraws finishes at its own pace, and the
    dashboard folds every event; redraws are what gets dropped."""
    n_steps = 20_000
    events = synth_run(n_steps, eval_every=5_000)
    payload = [json.dumps(e) + "\n" for e in events]
    assert sum(map(len, payload)) > 4_000_000  # far beyond socket buffers: a stalled reader blocks
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    produced = {}

    def produce():
        conn, _ = server.accept()
        with conn:
            started = time.monotonic()
            for line in payload:
                conn.sendall(line.encode())
            produced["seconds"] = time.monotonic() - started

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()

    async def drive():
        app = Dashboard(EventPump(socket_source(port)))
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, app, lambda: app.source_ended, timeout=30)
            return app, screen_text(app)

    app, screen = asyncio.run(drive())
    producer.join(5)
    server.close()
    # Producing does not wait on the UI: a redraw every event would take minutes.
    assert produced["seconds"] < 5
    assert app.state.events == len(events) and app.state.steps_seen == n_steps
    assert app.redraws < len(events) / 50
    assert f"step {n_steps}/{n_steps}" in screen and "FINISHED" in screen


def test_pump_reports_a_failing_source_and_writes_the_log(tmp_path):
    def flaky():
        yield from synth_run(20, eval_every=10, end="none")
        raise ConnectionResetError("link dropped")

    log = tmp_path / "live.jsonl"
    out = io.StringIO()
    state = plain_lines(flaky(), out, log_path=log)
    assert state.disconnected and "ConnectionResetError: link dropped" in state.disconnect_text
    written = read_runlog(log)
    assert written[:-1] == synth_run(20, eval_every=10, end="none")
    assert written[-1]["type"] == "disconnect" and "time" in written[-1]
    assert out.getvalue().rstrip().endswith("DISCONNECTED ConnectionResetError: link dropped")


def test_plain_lines_prints_a_line_a_step(recorded):
    path, events = recorded
    out = io.StringIO()
    state = plain_lines(replay_source(path), out)
    lines = out.getvalue().splitlines()
    steps = [e for e in events if e["type"] == "step"]
    assert len([line for line in lines if line.startswith("step ")]) == len(steps)
    assert state.status == "FINISHED"
    assert lines[0].startswith("start board qemu-m4  model vww_96_int8.tflite")
    step12 = next(line for line in lines if line.startswith("step 12/552 "))
    assert f"loss {steps[12]['loss']:.3f}" in step12 and f"{steps[12]['counter']:,}" in step12
    assert "step 40/552 skipped" in lines
    assert any(line.startswith("ERROR WRONG_SAMPLE_SIZE (7): sample 41") for line in lines)
    assert "eval holdout @step 276: accuracy 70.0% (non_person 78.0%, person 60.0%)" in lines
    assert lines[-1].startswith("summary steps 552  loss_mean_last_50 ")


def test_replay_speed_paces_by_recorded_time():
    events = [{"type": "log", "time": t / 10, "text": str(t)} for t in range(11)]
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"tinyprop-speed-{os.getpid()}.jsonl"
    write_run(path, events)
    try:
        started = time.monotonic()
        assert list(replay_source(path, speed=5.0)) == events  # 1 s recorded -> 0.2 s
        assert 0.19 <= time.monotonic() - started < 1.0
        with pytest.raises(TinypropError, match="--speed 0"):
            replay_source(path, speed=0)
    finally:
        path.unlink()


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "host")}
    return subprocess.run([*TINYPROP, *args], capture_output=True, text=True, env=env,
                          timeout=60, check=False)


def test_monitor_verb_plain_when_piped_and_exit_codes(recorded, tmp_path):
    path, events = recorded
    done = run_cli("monitor", str(path))  # stdout is a pipe: plain lines, no dashboard
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\nstep ") == len([e for e in events if e["type"] == "step"])
    cut = tmp_path / "cut.jsonl"
    write_run(cut, synth_run(30, eval_every=15, end="disconnect"))
    lost = run_cli("monitor", "--plain", str(cut))
    assert lost.returncode == 1 and "DISCONNECTED socket://127.0.0.1:4444 closed" in lost.stdout
    live = run_cli("monitor", "socket://127.0.0.1:4444")
    # nothing listens there: a one-line error naming the link, exit 2
    assert live.returncode == 2 and "socket://127.0.0.1:4444" in live.stderr
    missing = run_cli("monitor", str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2 and "cannot read the run log" in missing.stderr
    same = run_cli("monitor", str(path), "--log", str(path))
    assert same.returncode == 2 and "is the run being replayed" in same.stderr


def test_pump_stamps_time_without_a_log_and_keeps_our_error_text():
    """Rates and ETA need `time` even when nothing is logged (`tinyprop train` without --log);
    a tinyprop error already says what happened, so it is not prefixed with its class."""
    def source():
        for i in range(3):
            time.sleep(0.02)
            yield {"type": "step", "step": i, "loss": 0.5}
        raise DeviceError("device on socket://127.0.0.1:9 closed the link")

    events = list(EventPump(source()).start())
    times = [e["time"] for e in events]
    assert times == sorted(times) and times[2] - times[0] >= 0.03
    assert events[-1] == {"type": "disconnect", "time": times[-1],
                          "text": "device on socket://127.0.0.1:9 closed the link"}
    assert RunState.from_events(events).samples_per_s > 0


def cell_colours(segments) -> list[tuple]:
    """(foreground RGB, background RGB or None) of each '▀' cell of rendered segments."""
    return [(tuple(seg.style.color.get_truecolor()),
             None if seg.style.bgcolor is None else tuple(seg.style.bgcolor.get_truecolor()))
            for seg in segments for char in seg.text if char == "▀"]


def test_halfblock_renderer_pixel_by_pixel():
    """Each cell is '▀': the upper pixel its foreground, the lower its background; an odd last
    row has no lower pixel; a gray pixel is R = G = B."""
    rgb = np.array([[(255, 0, 0), (0, 255, 0)],
                    [(0, 0, 255), (10, 20, 30)],
                    [(1, 2, 3), (4, 5, 6)]], dtype=np.uint8)
    console = Console(file=io.StringIO(), color_system="truecolor", width=80)
    lines = list(Segment.split_lines(console.render(HalfBlockImage(rgb))))
    assert ["".join(seg.text for seg in line) for line in lines] == ["▀▀", "▀▀"]
    assert cell_colours(lines[0]) == [((255, 0, 0), (0, 0, 255)), ((0, 255, 0), (10, 20, 30))]
    assert cell_colours(lines[1]) == [((1, 2, 3), None), ((4, 5, 6), None)]
    gray = np.array([[[7], [90]], [[200], [255]]], dtype=np.uint8)
    (line,) = Segment.split_lines(console.render(HalfBlockImage(gray)))
    assert cell_colours(line) == [((7, 7, 7), (200, 200, 200)), ((90, 90, 90), (255, 255, 255))]


def test_fit_pixels_averages_boxes_and_keeps_the_aspect():
    square = np.arange(16, dtype=np.uint8).reshape(4, 4, 1)
    # Each output pixel is the rounded mean of its 2 x 2 box: (0+1+4+5)/4 = 2.5 -> 3, ...
    assert fit_pixels(square, 2, 2)[..., 0].tolist() == [[3, 5], [11, 13]]
    assert fit_pixels(square, 100, 100) is square  # never enlarged
    assert fit_pixels(np.zeros((48, 96, 3), np.uint8), 20, 20).shape == (10, 20, 3)
    assert fit_pixels(np.zeros((96, 48, 1), np.uint8), 40, 24).shape == (24, 12, 1)


def screen_cells(app: Dashboard) -> list[list[tuple]]:
    """(foreground, background) of every '▀' cell on the screen, row by row (rows without one
    left out): the camera panel's pixels as the terminal shows them."""
    rows = [cell_colours(strip) for strip in app.screen._compositor.render_strips()]
    return [row for row in rows if row]


def test_dashboard_shows_the_newest_camera_frame():
    """A camera run: the newest thumbnail drawn pixel for pixel in half blocks, beside its frame
    index, the label given, the prediction and the accuracy on labelled frames."""
    events = camera_run(120)
    state = RunState.from_events(events)

    async def drive():
        app = Dashboard(EventPump(iter(events)))
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, app, lambda: app.source_ended)
            camera = app.query_one("#camera")
            return screen_text(app), screen_cells(app), camera.content_size

    screen, cells, size = asyncio.run(drive())
    for shown in ("app learn", "camera 176x144 gray8", "frame 119", "label given none",
                  f"prediction  {CLASSES[events[-1]['prediction']]}",
                  "accuracy on labelled frames", f"{fmt_pct(state.frame_accuracy)} (n 40)",
                  "frames seen 120", "loss", "training accuracy", "61,234 B"):
        assert shown in screen, shown
    info_width = len("accuracy on labelled frames")  # its widest line
    image = fit_pixels(camera_image(119), size.width - info_width - 2, 2 * size.height)
    assert image.shape[0] >= 20 and image.shape[0] % 2 == 0  # a picture, not a dot
    expected = [[(tuple(image[2 * r, c]), tuple(image[2 * r + 1, c]))
                 for c in range(image.shape[1])] for r in range(image.shape[0] // 2)]
    assert cells == expected


def test_camera_panel_in_a_small_terminal_keeps_its_text():
    """Too narrow for a picture beside the text: the text alone, not a smear of a few cells."""
    _, screen, _ = run_dashboard_headless(iter(camera_run(30)), size=(80, 24))
    assert "frame 29" in screen and "accuracy on labelled frames" in screen
    assert "▀" not in screen


def test_dashboard_of_a_labelled_frame_says_right_or_wrong():
    events = camera_run(10, labelled_every=1, replays=0)
    last = events[-1]
    _, screen, _ = run_dashboard_headless(iter(events))
    assert f"label given {CLASSES[last['label']]}" in screen
    mark = "right" if last["label"] == last["prediction"] else "wrong"
    assert f"prediction  {CLASSES[last['prediction']]} {mark}" in screen


def test_camera_frames_every_tenth_of_a_second_flood_without_holding_up_the_source():
    """3,000 camera frames (a frame every 0.1 s is 5 minutes of camera) arriving at once: every
    event is folded, redraws are what gets dropped, and the screen ends on the last frame."""
    events = camera_run(3000)

    async def drive():
        app = Dashboard(EventPump(iter(events)))
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, app, lambda: app.source_ended, timeout=60)
            return app, screen_text(app)

    app, screen = asyncio.run(drive())
    assert app.state.events == len(events) and app.state.frames_seen == 3000
    assert app.redraws < len(events) / 50
    assert "frame 2999" in screen and "frames seen 3000" in screen and "(n 1000)" in screen


def test_plain_lines_of_a_camera_run():
    """No pixels: a line for each labelled frame and every tenth unlabelled one; replay steps
    and thumbnails print nothing."""
    events = camera_run(60)
    out = io.StringIO()
    plain_lines(iter(events), out)
    lines = out.getvalue().splitlines()
    frames = [line for line in lines if line.startswith("frame ")]
    expected = [i for i in range(60) if i % 3 == 0 or i % 10 == 0]
    assert [int(line.split()[1]) for line in frames] == expected
    assert not any(line.startswith("step ") for line in lines)
    assert max(map(len, frames)) < 100 and events[-1]["pixels"][:40] not in out.getvalue()
    first = next(e for e in events if e["type"] == "step")
    name = CLASSES[first["label"]]
    assert frames[0] == (f"frame 0 label {name} pred {CLASSES[first['prediction']]} "
                         f"{'ok' if first['correct'] else 'MISS'} loss {first['loss']:.3f}  "
                         f"labelled frames 1 acc {fmt_pct(float(first['correct']))}")
    assert frames[2].startswith("frame 6 label ")
    assert frames[4].startswith("frame 10 no label pred ")
    assert lines[-1].startswith("DISCONNECTED")  # camera_run ends without a summary


def test_keys_the_run_takes_reach_it_and_q_still_quits():
    """tinyprop learn --labels keys: the dashboard offers every key to the run (a class's index
    labels the latest frame); keys it does not take keep their meaning."""
    from tinyprop.commands.learn import key_label

    given = []
    session = type("Session", (), {"give_label": lambda self, k: given.append(k)})()

    async def drive():
        app = Dashboard(EventPump(iter([{"type": "start", "board": "qemu-m4"}])),
                        on_key=key_label(session, ("non_person", "person")))
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot, app, lambda: app.source_ended)
            await pilot.press("1", "0", "7", "x")
            await pilot.pause(0.1)
            await pilot.press("q")
            await pilot.pause(0.1)
            return app.is_running

    assert asyncio.run(drive()) is False
    assert given == [1, 0]  # 7 is no class of two
