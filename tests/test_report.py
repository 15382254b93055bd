"""`tinyprop report`: the run's PNG (and HTML page) drawn with matplotlib from a run log."""

from __future__ import annotations

import numpy as np
from PIL import Image
from test_runlog import CLASSES, camera_image, camera_run, engine_run, synth_run, write_run
from tinyprop.cli import main
from tinyprop.monitor.render import fmt_pct
from tinyprop.monitor.report import report_figure
from tinyprop.monitor.runlog import RunState

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


def test_report_of_a_camera_run_adds_a_strip_of_frames(tmp_path):
    """Eight thumbnails spread over the run under the plots, each captioned with its frame,
    label and prediction; a run without frames has none."""
    events = camera_run(120)
    state = RunState.from_events(events)
    figure = report_figure(state)
    strip = [ax for ax in figure.axes if ax.images and ax.get_title().startswith("frame ")]
    assert len(strip) == 8
    assert [int(ax.get_title().split()[1]) for ax in strip] == \
        [f.index for f in state.sample_frames()]
    thumbnails = {e["frame"]: e for e in events if e["type"] == "frame"}
    for ax in strip:
        index = int(ax.get_title().split()[1])
        shown = thumbnails[index]
        given = "none" if shown["label"] is None else CLASSES[shown["label"]]
        assert ax.get_title() == (f"frame {index}\nlabel: {given}\n"
                                  f"prediction: {CLASSES[shown['prediction']]}")
        assert np.array_equal(ax.images[0].get_array(), camera_image(index))
    plain = report_figure(RunState.from_events(synth_run(120, eval_every=60)))
    assert [ax for ax in plain.axes if ax.images] == [plain.axes[2]]  # the confusion matrix only
    # The CLI: the PNG grows by the strip; the page says how the frames went.
    log = tmp_path / "camera.jsonl"
    write_run(log, events)
    assert main(["report", str(log), "--html"]) == 0
    with Image.open(tmp_path / "camera.png") as image:
        assert image.size == (1600, 1160)
        # the newest frame's bottom-left pixel, (255, 0, 119), drawn in the strip
        assert colour_share(image, (255, 0, 119)) > 0
    page = (tmp_path / "camera.html").read_text()
    assert "<th>camera</th><td>176x144 gray8</td>" in page
    assert ("<th>frames seen</th><td>120 (40 labelled)</td>" in page
            and f"<td>{fmt_pct(state.frame_accuracy)}</td>" in page)
