"""Remakes the docs' pictures from a real run of the MLPerf Tiny VWW model on the emulated M4:

    docs/report.png                    `tinyprop report` of the run
    docs/monitor.svg, monitor.png      the dashboard replaying the run, held at step 400
    docs/monitor-disconnected.*        the dashboard on a live run whose QEMU is killed at step 150
    docs/monitor-camera.*              the dashboard on a camera run (make_camera_run) held at
                                       its last labelled frame

The run (about 2 minutes at 3-8 steps/s; $TINYPROP_ASSETS defaults to ../shared):

    tinyprop convert $TINYPROP_ASSETS/models/mlperf-tiny-vww/vww_96_int8.tflite \\
        -o build/docs/vww.tpb --scheme last:2
    tinyprop train build/docs/vww.tpb --data $TINYPROP_ASSETS/datasets/vww-mini --board qemu-m4 \\
        --shift night --epochs 2 --lr 0.01 --log build/docs/run.jsonl
    tinyprop report build/docs/run.jsonl -o docs/report.png

Run: .venv/bin/python docs/make_screenshots.py [--reuse] [--only camera]
(--reuse: keep build/docs/run.jsonl and build/docs/camera.jsonl; --only: remake those pictures)
The PNGs of the dashboard are its screen cells drawn with Pillow, for viewers without SVG fonts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import matplotlib
import numpy as np
from PIL import Image, ImageDraw, ImageFont
from tinyprop.data.assets import resolve_dataset, resolve_model
from tinyprop.monitor import Dashboard, EventPump
from tinyprop.monitor.runlog import read_runlog

DOCS = Path(__file__).resolve().parent
BUILD = DOCS.parent / "build" / "docs"
SIZE = (120, 38)
FONT_DIR = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
# Like the tests: the shared assets beside the repo unless told otherwise.
os.environ.setdefault("TINYPROP_ASSETS", str(DOCS.parents[1] / "shared"))
TRAIN = ["--board", "qemu-m4", "--shift", "night", "--lr", "0.01"]
SHOTS = ("report", "monitor", "disconnected", "camera")


def tinyprop(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "tinyprop.cli", *args], check=True)


def convert() -> Path:
    blob = BUILD / "vww.tpb"
    tinyprop("convert", str(resolve_model()), "-o", str(blob), "--scheme", "last:2")
    return blob


def make_run() -> Path:
    """The documented run: convert, then train with the log (plain lines, stdout is a pipe)."""
    blob, log = convert(), BUILD / "run.jsonl"
    log.unlink(missing_ok=True)  # the log appends: start afresh
    tinyprop("train", str(blob), "--data", str(resolve_dataset()), *TRAIN, "--epochs", "2",
             "--log", str(log))
    return log


def held_source(events: list[dict], release: threading.Event):
    """The events, then a wait: the link stays up (RUNNING) until `release` is set."""
    yield from events
    release.wait()


async def shoot(app: Dashboard, name: str, until: Callable[[], bool]) -> None:
    async with app.run_test(size=SIZE) as pilot:
        while not until():
            await pilot.pause(0.05)
        await pilot.pause(0.3)  # one more redraw after the last event
        app.save_screenshot(f"{name}.svg", path=str(DOCS))
        draw_png(app.screen._compositor.render_strips(), DOCS / f"{name}.png")


def shoot_held(events: list[dict], name: str) -> None:
    """The dashboard after `events`, the link held open: a run in progress."""
    release = threading.Event()
    app = Dashboard(EventPump(held_source(events, release)))
    asyncio.run(shoot(app, name, lambda: app.state.events >= len(events)))
    release.set()


def shoot_replay(log: Path, upto: int) -> None:
    """The recorded run up to step `upto`."""
    events = read_runlog(log)
    cut = next(i for i, e in enumerate(events) if e["type"] == "step" and e["step"] == upto)
    shoot_held(events[:cut], "monitor")


def make_camera_run(blob: Path, frames: int = 120, labelled_every: int = 3) -> Path:
    """A `tinyprop learn` run on qemu-m4: vww-mini's training photos under the haze shift,
    shuffled (the split lists one class, then the other), are the frames of a 96x96 gray
    camera (luma replicated into the RGB model's input); every `labelled_every`-th is labelled
    by the script and trained on, with one replay slot; the others are only predicted. Each
    frame's thumbnail is logged."""
    from tinyprop.data.datasets import CLASSES, load_images

    rgb, labels, _ = load_images(resolve_dataset(), "train", shift="haze", size=(96, 96))
    shown = np.random.default_rng(0).permutation(len(rgb))[:frames]
    folder = BUILD / "camera"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    script = []
    for frame, i in enumerate(shown):
        name = f"{frame:03d}.png"
        Image.fromarray(rgb[i]).save(folder / name)
        if frame % labelled_every == 0:
            script.append(f"{name},{CLASSES[labels[i]]}")
    (BUILD / "camera.csv").write_text("\n".join(script) + "\n")
    log_path = BUILD / "camera.jsonl"
    tinyprop("learn", "--blob", str(blob), "--camera", str(folder), "--labels",
             str(BUILD / "camera.csv"), "--format", "96-gray", "--replay", "1", "--lr", "0.01",
             "--thumbs", "1", "--workdir", str(BUILD / "learn"), "--fresh", "--log",
             str(log_path), "--plain")
    return log_path


def shoot_killed(blob: Path, at_step: int) -> None:
    """A live run on qemu-m4 (the same training as the log), QEMU killed at `at_step`."""
    from tinyprop.compile.blobfile import load_blob
    from tinyprop.data.datasets import load_split
    from tinyprop.engines import HParams, open_engine
    from tinyprop.training.run import RunConfig, training_events

    tb = load_blob(blob)
    xs, ys, _ = load_split(resolve_dataset(), "train", tb.graph.input.s, tb.graph.input.zp,
                          shift="night")
    engine = open_engine("qemu-m4", tb, HParams(lr=0.01, seed=0))
    try:
        source = training_events(RunConfig(lr=0.01, seed=0), tb, engine, xs, ys, 2 * len(xs), 0)
        app = Dashboard(EventPump(source))

        def until() -> bool:
            if app.state.steps_done >= at_step:
                engine.device.process.proc.kill()
            return app.source_ended

        asyncio.run(shoot(app, "monitor-disconnected", until))
    finally:
        engine.close()


def draw_png(strips: list, path: Path) -> None:
    """Paint the screen's cells (text, colours, bold) with DejaVu Sans Mono."""
    fonts = {bold: ImageFont.truetype(str(FONT_DIR / f"DejaVuSansMono{'-Bold' if bold else ''}.ttf"), 15)
             for bold in (False, True)}
    cell_w, cell_h = 9, 19
    image = Image.new("RGB", (SIZE[0] * cell_w, SIZE[1] * cell_h), (18, 18, 18))
    draw = ImageDraw.Draw(image)
    for row, strip in enumerate(strips):
        col = 0
        for segment in strip:
            style = segment.style
            fg = style.color.get_truecolor() if style and style.color else (220, 220, 220)
            bg = style.bgcolor.get_truecolor() if style and style.bgcolor else (18, 18, 18)
            for char in segment.text:
                x, y = col * cell_w, row * cell_h
                draw.rectangle([x, y, x + cell_w - 1, y + cell_h - 1], fill=tuple(bg))
                if 0x2800 <= ord(char) <= 0x28FF:  # braille: the font has none, draw the dots
                    draw_braille(draw, ord(char) - 0x2800, x, y, tuple(fg))
                elif char == "▀":  # a camera pixel pair: the upper half is the foreground
                    draw.rectangle([x, y, x + cell_w - 1, y + cell_h // 2 - 1], fill=tuple(fg))
                elif char.strip():
                    draw.text((x, y + 1), char, font=fonts[bool(style and style.bold)],
                              fill=tuple(fg))
                col += 1
    image.save(path)


def draw_braille(draw: ImageDraw.ImageDraw, bits: int, x: int, y: int, fill: tuple) -> None:
    for (col, row), bit in zip(
        [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (0, 3), (1, 3)],
        [1 << i for i in range(8)],
    ):
        if bits & bit:
            dx, dy = x + 2 + col * 4, y + 2 + row * 4
            draw.rectangle([dx, dy, dx + 1, dy + 1], fill=fill)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reuse", action="store_true",
                        help="keep build/docs/run.jsonl and build/docs/camera.jsonl")
    parser.add_argument("--only", choices=SHOTS, action="append",
                        help="remake only these pictures (repeatable; default: all)")
    args = parser.parse_args()
    only = args.only or SHOTS
    log, camera = BUILD / "run.jsonl", BUILD / "camera.jsonl"
    if {"report", "monitor"} & set(only) and not (args.reuse and log.exists()):
        log = make_run()
    blob = BUILD / "vww.tpb"
    if {"disconnected", "camera"} & set(only) and not blob.exists():
        blob = convert()
    if "report" in only:
        tinyprop("report", str(log), "-o", str(DOCS / "report.png"))
    if "monitor" in only:
        shoot_replay(log, upto=400)
    if "disconnected" in only:
        shoot_killed(blob, at_step=150)
    if "camera" in only:
        if not (args.reuse and camera.exists()):
            camera = make_camera_run(blob)
        events = read_runlog(camera)
        # held on the last labelled frame: the panel shows a label given and the prediction
        cut = max(i for i, e in enumerate(events)
                  if e["type"] == "frame" and e["label"] is not None)
        shoot_held(events[: cut + 1], "monitor-camera")


if __name__ == "__main__":
    main()
