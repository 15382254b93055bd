"""Static report of a finished (or cut-short) run: one PNG of the run's curves and memory, and
optionally an HTML page around it. Drawn from the same RunState the dashboard shows."""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path

import numpy as np

# A bare Figure renders with Agg and touches no pyplot state: no window, no backend choice.
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from .render import after_warmup, camera_text, class_name, fmt_pct, loss_axis_top
from .runlog import MEMORY_PARTS, CameraFrame, RunState, error_line, stop_line

THOUSANDS = FuncFormatter(lambda value, _: f"{value:,.0f}")  # 1,834,000 rather than 1.834e6
PERCENT = FuncFormatter(lambda value, _: f"{value:.0%}")
COLORS = {"static": "#4c72b0", "arena_peak": "#c44e52", "trainable": "#dd8452",
          "stack_peak": "#55a868"}


STRIP_HEIGHT = 2.6  # inches the strip of sample frames adds below the plots


def draw_report(state: RunState, png_path: str | Path) -> Path:
    """Write the report figure (report_figure) to `png_path`."""
    png_path = Path(png_path)
    png_path.parent.mkdir(parents=True, exist_ok=True)
    report_figure(state).savefig(png_path)
    return png_path


def report_figure(state: RunState) -> Figure:
    """The report: loss, accuracy with eval points, training confusion matrix, memory against
    SRAM, cost per step, run identity; under them, for a camera run, a strip of sample frames."""
    samples = state.sample_frames()
    rows = [4.5, 4.5] + ([STRIP_HEIGHT] if samples else [])  # inches
    fig = Figure(figsize=(16, sum(rows)), dpi=100)
    grid = fig.add_gridspec(len(rows), 3, height_ratios=rows)
    _plot_loss(fig.add_subplot(grid[0, 0]), state)
    _plot_accuracy(fig.add_subplot(grid[0, 1]), state)
    _plot_confusion(fig.add_subplot(grid[0, 2]), state)
    _plot_memory(fig.add_subplot(grid[1, 0]), state)
    _plot_cost(fig, grid[1, 1], state)
    _write_identity(fig.add_subplot(grid[1, 2]), state)
    if samples:
        _plot_frames(fig, grid[2, :], state, samples)
    start = state.start
    fig.suptitle(f"tinyprop run: {start.get('model', '?')} on {start.get('board', '?')}"
                 f" — {state.status.lower()}", fontsize=14)
    fig.tight_layout()
    return fig


def _plot_frames(fig, slot, state: RunState, samples: list[CameraFrame]) -> None:
    """The sample thumbnails side by side, each captioned with its frame index, the label
    given and the prediction (green when right, red when wrong)."""
    cells = slot.subgridspec(1, len(samples), wspace=0.3)
    for i, frame in enumerate(samples):
        ax = fig.add_subplot(cells[0, i])
        gray = frame.pixels.shape[2] == 1
        ax.imshow(frame.pixels[..., 0] if gray else frame.pixels, cmap="gray" if gray else None,
                  vmin=0, vmax=255, interpolation="nearest")
        given = "none" if frame.label is None else class_name(state, frame.label)
        guess = "-" if frame.prediction is None else class_name(state, frame.prediction)
        color = ("black" if frame.label is None or frame.prediction is None
                 else "green" if frame.label == frame.prediction else "red")
        ax.set_title(f"frame {frame.index}\nlabel: {given}\nprediction: {guess}", fontsize=9,
                     color=color)
        ax.set_axis_off()


def _mark_epochs(ax, state: RunState) -> None:
    """A dashed line where each epoch after the first begins."""
    for step, epoch in state.epoch_starts[1:]:
        ax.axvline(step, color="0.45", ls="--", lw=0.8)
        ax.annotate(f"epoch {epoch + 1}", (step, 0), xycoords=("data", "axes fraction"),
                    xytext=(3, 3), textcoords="offset points", fontsize=9, color="0.3",
                    bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none",
                          "alpha": 0.8})


def _plot_loss(ax, state: RunState) -> None:
    losses = np.asarray(state.losses, dtype=float)
    steps = np.asarray(state.step_numbers)
    top = loss_axis_top(state)
    above = losses > top
    ax.scatter(steps[~above], losses[~above], s=4, color="0.6", label="loss of each sample")
    if above.any():
        ax.scatter(steps[above], np.full(above.sum(), top), s=14, marker="^", color="0.4",
                   clip_on=False,
                   label=f"{above.sum()} above the axis (max {np.nanmax(losses):.2f})")
    ax.plot(state.step_numbers, state.loss_ema, color="C0", lw=2,
            label=f"smoothed (EMA α={state.ema_alpha:g})")
    ax.set(title="training loss (cross-entropy, before each update)", xlabel="step",
           ylabel="loss", ylim=(0, top))
    _mark_epochs(ax, state)
    ax.legend(loc="upper right", fontsize=9)
    ax.grid(alpha=0.3)


def _plot_accuracy(ax, state: RunState) -> None:
    ax.plot(state.step_numbers, after_warmup(state.accuracy_running), color="C1",
            label="running (since step 0)")
    ax.plot(state.step_numbers, after_warmup(state.accuracy_windowed), color="C2",
            label=f"last {state.window} steps")
    for split in sorted({str(e.get("split", "eval")) for e in state.evals}):
        points = [e for e in state.evals if str(e.get("split", "eval")) == split
                  and isinstance(e.get("accuracy"), (int, float))]
        ax.plot([e.get("step", 0) for e in points], [e["accuracy"] for e in points], "D",
                ms=8, label=f"eval: {split}")
        for e in points:
            ax.annotate(fmt_pct(e["accuracy"]), (e.get("step", 0), e["accuracy"]),
                        textcoords="offset points", xytext=(0, 8), ha="center")
    ax.set(title="training accuracy (prediction before each update)", xlabel="step",
           ylabel="accuracy", ylim=(0, 1.05))
    ax.yaxis.set_major_formatter(PERCENT)
    _mark_epochs(ax, state)
    ax.legend(loc="lower left", fontsize=9)
    ax.grid(alpha=0.3)


def _plot_confusion(ax, state: RunState) -> None:
    names = state.class_names
    if not names:
        ax.set_axis_off()
        return
    ax.imshow(state.confusion, cmap="Blues", vmin=0)  # from 0, so dark means > max/2
    for i, row in enumerate(state.confusion):
        for j, count in enumerate(row):
            ax.text(j, i, str(count), ha="center", va="center", fontsize=13,
                    color="white" if count > max(map(max, state.confusion)) / 2 else "black")
    per_class = state.per_class_accuracy
    ax.set_xticks(range(len(names)), names)
    ax.set_yticks(range(len(names)), [f"{n}\n{fmt_pct(per_class[n])}" for n in names])
    ax.set(title="training predictions (rows: label)", xlabel="prediction")


def _plot_memory(ax, state: RunState) -> None:
    memory, sram = state.memory, state.sram
    left = 0
    for part in MEMORY_PARTS:
        if memory.get(part) is None:  # the source does not measure it: not a zero
            ax.barh(0, 0, color="none", label=f"{part}: not reported")
            continue
        used = int(memory[part])
        ax.barh(0, used, left=left, height=0.7, color=COLORS[part], label=f"{part} {used:,} B")
        left += used
    if sram:
        ax.axvline(sram, color="k", ls="--", lw=1.5)
        ax.text(sram, -0.5, f"SRAM {sram:,} B ", ha="right", va="bottom")
        ax.text((left + sram) / 2, 0, f"free\n{sram - left:,} B", ha="center", va="center",
                color="0.35")
        ax.set_xlim(0, max(sram, left) * 1.02)
        title = f"SRAM used, measured: {left:,} B ({fmt_pct(left / sram)} of {sram:,} B)"
    else:
        title = f"memory, measured: {left:,} B (no SRAM figure from this engine)"
    ax.set(title=title, xlabel="bytes", yticks=[], ylim=(-0.6, 1.2))
    ax.xaxis.set_major_formatter(THOUSANDS)
    ax.legend(loc="upper left", ncol=2, fontsize=9)


def _plot_cost(fig, slot, state: RunState) -> None:
    """Cost per step: the device's own counter when it has one (instructions under QEMU
    -icount, cycles or µs on a board), and the host's wall clock a step (link included)."""
    counted = state.counter_mean is not None
    cells = slot.subgridspec(2 if counted else 1, 1, hspace=0.1)
    wall = fig.add_subplot(cells[-1])
    if counted:
        device = fig.add_subplot(cells[0], sharex=wall)
        unit = state.counter_unit
        millions = np.asarray(state.counters, dtype=float) / 1e6
        device.plot(state.step_numbers, millions, color="C4", lw=1.5)
        spread = np.nanmax(millions) - np.nanmin(millions)
        device.set(title=f"{unit} per step: mean {state.counter_mean:,.0f}, "
                   f"spread {spread * 1e6:,.0f}", ylabel=f"M {unit}",
                   ylim=(0, 1.2 * np.nanmax(millions)))  # from 0: the cost is flat, say so
        device.tick_params(labelbottom=False)
        device.grid(alpha=0.3)
        _mark_epochs(device, state)
    times = np.asarray(state.step_times, dtype=float)
    if times.size > 1:
        # Mean over the last `window` steps (fewer at the start): one slow step is noise.
        lag = np.minimum(np.arange(times.size), state.window)
        lag[0] = 1
        ms = 1000 * (times - times[np.arange(times.size) - lag]) / lag
        ms[0] = np.nan
        wall.plot(state.step_numbers, ms, color="C5", lw=1.5)
        wall.set_ylim(0, 1.2 * np.nanmax(ms))
    wall.set(xlabel="step", ylabel=f"host ms per step\n(mean of last {state.window})")
    if not counted:
        wall.set_title("cost per step (this engine has no device counter)")
    wall.grid(alpha=0.3)
    _mark_epochs(wall, state)


def _write_identity(ax, state: RunState) -> None:
    ax.set_axis_off()
    lines = [f"{k}: {v}" for k, v in identity_rows(state)]
    ax.text(0, 1, "\n".join(lines), va="top", family="monospace", fontsize=10,
            transform=ax.transAxes)


def identity_rows(state: RunState) -> list[tuple[str, str]]:
    """(name, value) rows describing the run: identity, totals, summary, last error."""
    start, summary = state.start, state.summary or {}
    rows = [(k, str(start[k])) for k in ("app", "board", "model", "blob_id", "scheme", "lr", "seed",
                                         "steps_total") if k in start]
    if camera_text(state):
        rows.append(("camera", camera_text(state)))
    rows += [("steps seen", f"{state.steps_seen} ({state.skipped} skipped)"),
             ("accuracy (train)", fmt_pct(state.accuracy))]
    if state.has_frames:
        rows += [("frames seen", f"{state.frames_seen} ({state.frames_labelled} labelled)"),
                 ("accuracy (labelled frames)", fmt_pct(state.frame_accuracy))]
    if state.memory:
        of_sram = f" of {state.sram:,} B" if state.sram else ""
        rows.append(("memory used", f"{state.memory_total:,} B{of_sram}"))
    if state.counter_mean is not None:
        rows.append((f"{state.counter_unit}/step", f"{state.counter_mean:,.0f} (mean)"))
    cut = f": {state.disconnect_text}" if state.disconnected else \
        f": {stop_line(state.stopped)}" if state.stopped is not None else ""
    rows += [("status", state.status + cut)]
    for key, value in summary.items():
        if key not in ("type", "time"):
            shown = f"{value:.4g}" if isinstance(value, float) and math.isfinite(value) else value
            rows.append((key, str(shown)))
    if state.last_error:
        rows.append(("last error", error_line(state.last_error)))
    return rows


def write_html(state: RunState, png_path: Path, html_path: str | Path) -> Path:
    """A self-contained page: the report PNG inline, the identity table and the evals."""
    html_path = Path(html_path)
    image = base64.b64encode(png_path.read_bytes()).decode()
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
                   for k, v in identity_rows(state))
    evals = "".join(
        f"<tr><td>{html.escape(str(e.get('split', '')))}</td><td>{e.get('step', '')}</td>"
        f"<td>{fmt_pct(e.get('accuracy'))}</td><td>{html.escape(str(e.get('per_class', '')))}</td>"
        "</tr>" for e in state.evals)
    title = html.escape(f"tinyprop run: {state.start.get('model', '?')}")
    html_path.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
        "<style>body{font-family:sans-serif;max-width:1600px;margin:auto}"
        "th,td{text-align:left;padding:2px 12px}</style></head><body>"
        f"<h1>{title}</h1><img alt='run report' style='width:100%' "
        f"src='data:image/png;base64,{image}'>"
        f"<h2>Run</h2><table>{rows}</table>"
        "<h2>Evaluations</h2><table><tr><th>split</th><th>step</th><th>accuracy</th>"
        f"<th>per class</th></tr>{evals}</table></body></html>\n",
        encoding="utf-8",
    )
    return html_path
