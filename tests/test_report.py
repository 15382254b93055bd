"""`tinyprop report`: the run's PNG (and HTML page) drawn with matplotlib from a run log."""

from __future__ import annotations

import numpy as np
from PIL import Image
from test_runlog import engine_run, synth_run, write_run
from tinyprop.cli import main

# Colours the figure must contain: the smoothed loss line (C0) and the arena_peak memory bar.
SMOOTHED_LOSS = (0x1F, 0x77, 0xB4)
ARENA = (0xC4, 0x4E, 0x52)
WALL_CLOCK = (0x8C, 0x56, 0x4B)  # C5: host ms per step


def colour_share(image: Image.Image, rgb: tuple[int, int, int]) -> float:
    pixels = np.asarray(image.convert("RGB"))
    return float(np.all(pixels == rgb, axis=-1).mean())


def test_report_png_and_html(tmp_path, capsys):
    log = tmp_path / "run.jsonl"
    write_run(log, synth_run(552))
    png = tmp_path / "out" / "report.png"
    assert main(["report", str(log), "-o", str(png), "--html"]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert 50_000 < png.stat().st_size < 2_000_000
    with Image.open(png) as image:
        assert image.size == (1600, 900)
        assert colour_share(image, SMOOTHED_LOSS) > 0.001
        assert colour_share(image, ARENA) > 0.005
    page = (tmp_path / "out" / "report.html").read_text()
    assert "data:image/png;base64,iVBOR" in page
    for shown in ("vww_96_int8.tflite", "8c1f9a02d4e6b7c3", "WRONG_SAMPLE_SIZE (7)", "holdout",
                  "80.0%", "552 (3 skipped)", "FINISHED", "of 262,144 B", "instructions/step"):
        assert shown in page, shown
    wrote = [f"wrote {png}", f"wrote {png.with_suffix('.html')}"]
    assert capsys.readouterr().out.splitlines() == wrote


def test_report_of_a_cut_run_defaults_beside_the_log(tmp_path):
    """A run cut short (killed writer, no summary) still gets its report, named after the log."""
    log = tmp_path / "cut.jsonl"
    write_run(log, synth_run(120, eval_every=60, end="none")[:90])
    with log.open("a") as f:
        f.write('{"type": "step", "step": 88, "lo')
    assert main(["report", str(log)]) == 0
    with Image.open(tmp_path / "cut.png") as image:
        assert image.size == (1600, 900) and colour_share(image, SMOOTHED_LOSS) > 0.0005


def test_report_without_steps_is_a_user_error(tmp_path, capsys):
    log = tmp_path / "empty.jsonl"
    write_run(log, synth_run(10)[:1])
    assert main(["report", str(log)]) == 2
    assert "no step events, nothing to plot" in capsys.readouterr().err
    assert not (tmp_path / "empty.png").exists()


def test_report_of_an_engine_run_without_device_figures(tmp_path):
    """No counter, no SRAM, two memory parts: drawn from the host clock and what was measured."""
    log = tmp_path / "host.jsonl"
    write_run(log, engine_run(200))
    png = tmp_path / "host.png"
    assert main(["report", str(log), "-o", str(png), "--html"]) == 0
    with Image.open(png) as image:
        assert colour_share(image, ARENA) > 0.005 and colour_share(image, WALL_CLOCK) > 0.0001
    page = (tmp_path / "host.html").read_text()
    assert "<th>memory used</th><td>122,376 B</td>" in page
    assert "/step</th>" not in page  # no device counter row
