"""Regenerates docs/monitor.svg (Textual's own screenshot) and docs/monitor.png (the same
screen drawn with Pillow, for viewers without SVG fonts), plus the DISCONNECTED variants, from
the synthetic run of tests/test_runlog.py. Run: .venv/bin/python docs/make_screenshots.py"""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path

import matplotlib
from PIL import Image, ImageDraw, ImageFont
from tinyprop.monitor import Dashboard, EventPump

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent / "tests"))
from test_runlog import synth_run  # the tests' fixture generator

SIZE = (120, 38)
FONT_DIR = Path(matplotlib.get_data_path()) / "fonts" / "ttf"


def held_source(events: list[dict], release: threading.Event):
    """The events, then a wait: the link stays up (RUNNING) until `release` is set."""
    yield from events
    release.wait()


async def shoot(events: list[dict], name: str, hold: bool) -> None:
    release = threading.Event()
    source = held_source(events, release) if hold else iter(events)
    app = Dashboard(EventPump(source))
    async with app.run_test(size=SIZE) as pilot:
        while app.state.events < len(events) or (not hold and not app.source_ended):
            await pilot.pause(0.05)
        await pilot.pause(0.3)  # one more redraw after the last event
        app.save_screenshot(f"{name}.svg", path=str(DOCS))
        draw_png(app.screen._compositor.render_strips(), DOCS / f"{name}.png")
        release.set()


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
    events = synth_run(552)
    running = [e for e in events if e["type"] != "summary"][:430]
    asyncio.run(shoot(running, "monitor", hold=True))
    cut = [*running, {"type": "disconnect", "time": running[-1]["time"] + 0.2,
                      "text": "socket://127.0.0.1:4444: connection reset by peer"}]
    asyncio.run(shoot(cut, "monitor-disconnected", hold=False))


if __name__ == "__main__":
    main()
