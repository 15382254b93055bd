"""Text renderings of a RunState: braille charts, bars and panels, shared by the dashboard and
the plain line output. Pure functions of the state, so what they show is testable on its own."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from rich.color import Color, ColorTriplet
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from .runlog import (
    MEMORY_PARTS,
    CameraFrame,
    RunState,
    error_line,
    prediction_correct,
    stop_line,
)

# Braille cells are 2 dots wide and 4 high; bit of dot (column, row) in U+2800 + bits.
_DOT_BITS = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))
_BLOCKS = " ▏▎▍▌▋▊▉█"
_SPARKS = "▁▂▃▄▅▆▇█"


def fmt_count(value: float | None, unit: str = "") -> str:
    """1834000 -> '1.83M' (for tight spaces)."""
    if value is None:
        return "-"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.2f}{suffix}{unit}"
    return f"{value:.0f}{unit}"


def class_name(state: RunState, index: object) -> str:
    """A label index as its class name (the index itself when the run names no such class)."""
    names = state.class_names
    return names[index] if isinstance(index, int) and 0 <= index < len(names) else str(index)


def fmt_pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def fmt_duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def fmt_float(value: float | None, digits: int = 3) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def bar(fraction: float, width: int) -> str:
    """A left-aligned bar of eighth-cell resolution, `width` cells, padded with spaces."""
    eighths = round(max(0.0, min(1.0, fraction)) * width * 8)
    full, part = divmod(eighths, 8)
    text = "█" * full + (_BLOCKS[part] if part and full < width else "")
    return text.ljust(width)


def sparkline(values: list[float], width: int) -> str:
    """The last `width` values as block heights between their min and max."""
    values = [v for v in values[-width:] if math.isfinite(v)]
    if not values:
        return ""
    low, high = min(values), max(values)
    span = high - low or 1.0
    return "".join(_SPARKS[round((v - low) / span * (len(_SPARKS) - 1))] for v in values)


def _resample(values: list[float], points: int) -> list[float]:
    """`points` means of equal slices of `values` (all of them if fewer)."""
    if len(values) <= points:
        return list(values)
    out = []
    for i in range(points):
        chunk = values[i * len(values) // points:(i + 1) * len(values) // points]
        out.append(sum(chunk) / len(chunk))
    return out


WARMUP = 10  # scored steps before accuracy curves are drawn: 1 right of 1 is not a rate


def loss_axis_top(state: RunState) -> float:
    """Top of a loss chart. A few very wrong samples (loss 3-4) would squash the curve that
    matters into the bottom fifth, so the axis ends just above the 98th percentile and the
    smoothed loss; charts draw the points beyond it on its edge."""
    finite = sorted(v for v in state.losses if math.isfinite(v))
    if not finite:
        return 1.0
    p98 = finite[min(len(finite) - 1, round(0.98 * (len(finite) - 1)))]
    return 1.1 * max(p98, *(v for v in state.loss_ema if math.isfinite(v)))


def after_warmup(values: list[float]) -> list[float]:
    """`values` with the first WARMUP blanked (NaN), so the x axis still lines up."""
    return [math.nan] * min(WARMUP, len(values)) + values[WARMUP:]


class Series(NamedTuple):
    values: list[float]
    style: str
    line: bool = True  # join consecutive points; False draws scattered dots (noisy raw data)


def braille_chart(
    series: list[Series],
    width: int,
    height: int,
    y_range: tuple[float, float] | None = None,
    y_format: str = "{:.2f}",
) -> Text:
    """Chart of one or more series over a shared x axis (their index),
    `width` x `height` cells including a y-axis label column. Later series draw over earlier."""
    labels_width = 7
    cols, rows = max(1, width - labels_width - 1), max(1, height)
    finite = [v for s in series for v in s.values if math.isfinite(v)]
    if not finite:
        return Text("\n".join(" " * width for _ in range(rows)))
    low, high = y_range or (min(finite), max(finite))
    if high - low < 1e-12:
        low, high = low - 0.5, high + 0.5
    dots = [[0] * cols for _ in range(rows)]
    styles: list[list[str | None]] = [[None] * cols for _ in range(rows)]
    length = max(len(s.values) for s in series)
    for values, style, line in series:
        # Scale each series to the longest one's x axis so they line up. Lines are resampled
        # to one point a dot column; dots keep every value, so the noise stays visible.
        dot_cols = max(1, round(cols * 2 * len(values) / length))
        points = _resample(values, dot_cols) if line else values
        last_y = None
        for i, value in enumerate(points):
            x = i if line else i * dot_cols // len(values)
            if not math.isfinite(value):
                last_y = None
                continue
            frac = (min(max(value, low), high) - low) / (high - low)
            y = round((1 - frac) * (rows * 4 - 1))
            span = (y, y) if last_y is None or not line else (min(y, last_y), max(y, last_y))
            for dy in range(span[0], span[1] + 1):  # join steep moves with a vertical stroke
                row, col = dy // 4, x // 2
                if col < cols:
                    dots[row][col] |= _DOT_BITS[x % 2][dy % 4]
                    styles[row][col] = style
            last_y = y
    text = Text()
    for r in range(rows):
        label = y_format.format(high) if r == 0 else y_format.format(low) if r == rows - 1 else ""
        text.append(label[:labels_width].rjust(labels_width) + "┤", style="dim")
        for c in range(cols):
            text.append(chr(0x2800 + dots[r][c]), style=styles[r][c] or "")
        if r < rows - 1:
            text.append("\n")
    return text


def fit_pixels(pixels: np.ndarray, width: int, height: int) -> np.ndarray:
    """A uint8 H x W x C image shrunk by box averaging (each output pixel the rounded mean of
    the input pixels it covers) to fit `width` x `height` pixels, aspect kept; never enlarged."""
    h, w = pixels.shape[:2]
    if w * height >= h * width:  # the width limits
        out_w = max(1, min(w, width))
        out_h = max(1, h * out_w // w)
    else:
        out_h = max(1, min(h, height))
        out_w = max(1, w * out_h // h)
    if (out_h, out_w) == (h, w):
        return pixels
    rows, cols = np.arange(out_h) * h // out_h, np.arange(out_w) * w // out_w
    sums = np.add.reduceat(np.add.reduceat(pixels.astype(np.uint32), rows, axis=0), cols, axis=1)
    counts = (np.diff(rows, append=h)[:, None] * np.diff(cols, append=w)[None, :])[..., None]
    return ((sums + counts // 2) // counts).astype(np.uint8)


class HalfBlockImage:
    """A uint8 H x W x C image (C 3, or 1 for gray) as ceil(H / 2) lines of W cells: each cell
    is '▀', its foreground the upper pixel and its background the lower one, in true colour.
    A terminal cell is about twice as high as wide, so the pixels come out square. `beside`:
    lines of text drawn to its right. Made of Segments, not a Text of one span a cell: a frame
    is redrawn several times a second."""

    def __init__(self, pixels: np.ndarray, beside: Sequence[Text] = ()) -> None:
        rgb = (pixels if pixels.shape[2] == 3 else np.repeat(pixels, 3, axis=2)).tolist()
        self.width = len(rgb[0])
        self.beside = list(beside)
        self.lines: list[list[Segment]] = []
        for top in range(0, len(rgb), 2):
            lower_row = rgb[top + 1] if top + 1 < len(rgb) else [None] * self.width
            self.lines.append([Segment("▀", _cell_style(*upper, *(lower or (None,) * 3)))
                               for upper, lower in zip(rgb[top], lower_row, strict=True)])

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        blank = [Segment(" " * self.width)]
        for row in range(max(len(self.lines), len(self.beside))):
            yield from self.lines[row] if row < len(self.lines) else blank
            if row < len(self.beside):
                yield Segment("  ")
                yield from self.beside[row].render(console)
            yield Segment.line()


@functools.lru_cache(maxsize=16384)  # neighbouring pixels repeat: a frame reuses most styles
def _cell_style(red: int, green: int, blue: int, lower_red: int | None, lower_green: int | None,
                lower_blue: int | None) -> Style:
    """Foreground the upper pixel, background the lower one (None: an odd last row's)."""
    lower = None if lower_red is None else (lower_red, lower_green, lower_blue)
    return Style(color=Color.from_triplet(ColorTriplet(red, green, blue)),
                 bgcolor=None if lower is None else Color.from_triplet(ColorTriplet(*lower)))


MIN_IMAGE_WIDTH = 8  # pixels; a narrower thumbnail says nothing, the panel shows text only


def camera_panel(state: RunState, width: int, height: int) -> HalfBlockImage | Text:
    """The newest thumbnail in half blocks, beside its frame index, the label given, the
    prediction and the accuracy on labelled frames so far (the text takes what it needs, the
    picture the rest of `width`)."""
    frame = state.thumbnail
    info = _camera_info(state, frame)
    image_width = width - max(line.cell_len for line in info) - 2
    if frame is None or image_width < MIN_IMAGE_WIDTH:
        return Text("\n").join(info)
    return HalfBlockImage(fit_pixels(frame.pixels, image_width, 2 * max(1, height)), info)


def _camera_info(state: RunState, frame: CameraFrame | None) -> list[Text]:
    lines = []
    if frame is None:
        lines.append(Text("no thumbnail yet", style="dim"))
    else:
        lines.append(Text.assemble(("frame ", "dim"), (str(frame.index), "bold")))
        given = "none" if frame.label is None else class_name(state, frame.label)
        lines.append(Text.assemble(("label given ", "dim"), (given, "bold")))
        guess = Text.assemble(("prediction  ", "dim"),
                              ("-" if frame.prediction is None
                               else class_name(state, frame.prediction), "bold"))
        if frame.label is not None and frame.prediction is not None:
            right = frame.label == frame.prediction
            guess.append(" right" if right else " wrong", "bold green" if right else "bold red")
        lines.append(guess)
    if state.frame_index is not None and (frame is None or state.frame_index != frame.index):
        lines.append(Text.assemble(("newest frame ", "dim"), str(state.frame_index)))
    lines += [
        Text(""),
        Text("accuracy on labelled frames", style="dim"),
        Text.assemble((fmt_pct(state.frame_accuracy), "bold yellow"),
                      (f" (n {state.frames_labelled})", "dim")),
        Text(f"frames seen {state.frames_seen}", style="dim"),
    ]
    return lines


def camera_text(state: RunState) -> str:
    """The start event's camera as `176x144 gray8` ("" when the run has none)."""
    camera = state.start.get("camera")
    if not isinstance(camera, dict):
        return ""
    return f"{camera.get('width', '?')}x{camera.get('height', '?')} {camera.get('format', '?')}"


def identity_text(state: RunState) -> Text:
    start = state.start
    text = Text()
    fields = [
        ("app", start.get("app")),
        ("board", start.get("board")),
        ("camera", camera_text(state) or None),
        ("model", start.get("model")),
        ("blob", str(start["blob_id"])[:12] if start.get("blob_id") else None),
        ("scheme", start.get("scheme")),
        ("lr", start.get("lr")),
        ("seed", start.get("seed")),
    ]
    for name, value in fields:
        if value is not None:
            text.append(f"{name} ", style="dim")
            text.append(f"{value}  ", style="bold")
    return text if text else Text("waiting for the run's start event", style="dim")


def status_text(state: RunState) -> Text:
    status = state.status
    style = {"DISCONNECTED": "bold white on red", "FINISHED": "bold black on green",
             "STOPPED": "bold white on blue"}
    return Text(f" {status} ", style=style.get(status, "bold black on yellow"))


def progress_text(state: RunState, width: int) -> Text:
    """Steps done, a bar, and ETA; once the link is lost, why, in place of the ETA."""
    total = state.steps_total
    head = f"step {state.steps_done}/{total}" if total else f"step {state.steps_done}"
    if state.disconnected:
        tail = f" {fmt_pct(state.progress)}  link lost: {state.disconnect_text}"
    elif state.stopped is not None:
        tail = f" {fmt_pct(state.progress)}  {stop_line(state.stopped)}"
    else:
        tail = (f" {fmt_pct(state.progress)}  ETA {fmt_duration(state.eta_s)}"
                f"  elapsed {fmt_duration(state.time)}")
    text = Text(head + " ", style="bold")
    filled = bar(state.progress or 0.0, max(10, width - len(head) - len(tail) - 2))
    text.append(filled.rstrip(), "grey50" if state.disconnected else "green")
    text.append("░" * (len(filled) - len(filled.rstrip())), "grey30")
    text.append(tail, "bold red" if state.disconnected else "")
    return text


def loss_panel(state: RunState, width: int, height: int) -> Text:
    text = Text()
    text.append("loss ", style="dim")
    text.append(fmt_float(state.loss), style="bold")
    text.append("   smoothed ", style="dim")
    text.append(fmt_float(state.loss_smoothed), style="bold cyan")
    text.append(f"   (EMA α={state.ema_alpha:g})\n", style="dim")
    series = [Series(state.losses, "grey50", line=False), Series(state.loss_ema, "bold cyan")]
    text.append_text(braille_chart(series, width, height - 1, y_range=(0.0, loss_axis_top(state))))
    return text


def accuracy_panel(state: RunState, width: int, height: int) -> Text:
    text = Text()
    text.append("running ", style="dim")
    text.append(fmt_pct(state.accuracy), style="bold yellow")
    text.append(f"   last {state.window} ", style="dim")
    text.append(fmt_pct(state.accuracy_window), style="bold green")
    if state.evals:
        last = state.evals[-1]
        text.append(f"   eval {last.get('split', '')}@{last.get('step', '?')} ", style="dim")
        text.append(fmt_pct(last.get("accuracy")), style="bold magenta")
    text.append("\n")
    series = [Series(after_warmup(state.accuracy_running), "yellow"),
              Series(after_warmup(state.accuracy_windowed), "green")]
    chart = braille_chart(series, width, height - 1, y_range=(0.0, 1.0), y_format="{:.0%}")
    text.append_text(chart)
    return text


def classes_panel(state: RunState) -> Text:
    """Per-class accuracy of training predictions and their confusion matrix."""
    names = state.class_names
    text = Text()
    if not names:
        return Text("no predictions yet", style="dim")
    name_width = max(8, *(len(n) for n in names))
    for name, accuracy in state.per_class_accuracy.items():
        text.append(f"{name:<{name_width}} ", style="dim")
        text.append(f"{fmt_pct(accuracy):>6} ", style="bold")
        text.append(bar(accuracy or 0.0, 12) + "\n", style="green")
    cell = max(6, *(len(n[:10]) + 1 for n in names))
    text.append(f"\n{'label↓pred→':<{name_width}}", style="dim")
    text.append("".join(f"{n[:10]:>{cell}}" for n in names) + "\n", style="dim")
    for i, row in enumerate(state.confusion):
        text.append(f"{names[i]:<{name_width}}", style="dim")
        for j, count in enumerate(row):
            style = "bold green" if i == j else "red" if count else ""
            text.append(f"{count:>{cell}}", style=style)
        text.append("\n")
    return text


def memory_panel(state: RunState, width: int) -> Text:
    """Each measured memory part as a bar against the board's SRAM (against their total when
    the source reports no SRAM, e.g. the in-process host engine). Parts the source does not
    measure are shown as not reported, not as zero."""
    memory, sram = state.memory, state.sram
    if not memory:
        return Text("no memory figures yet", style="dim")
    total = state.memory_total
    scale = sram or total or 1
    bar_width = max(6, width - 30)
    text = Text()
    colors = dict(zip(MEMORY_PARTS, ("blue", "magenta", "yellow", "cyan"), strict=True))
    for part in MEMORY_PARTS:
        text.append(f"{part:<10} ", style="dim")
        if memory.get(part) is None:
            text.append(f"{'':<{bar_width}} {'not reported':>10}\n", style="dim")
            continue
        used = int(memory[part])
        text.append(bar(used / scale, bar_width), style=colors[part])
        text.append(f" {used:>8,} B\n")
    text.append(f"{'total':<10} ", style="bold")
    over = sram and total > sram
    text.append(bar(total / scale, bar_width), style="red" if over else "bold green")
    text.append(f" {total:>8,} B\n", style="bold")
    if sram:
        text.append(f"of SRAM {sram:,} B: {fmt_pct(total / sram)} used", style="dim")
    else:
        text.append("SRAM not reported by this engine", style="dim")
    return text


def perf_panel(state: RunState, width: int) -> Text:
    text = Text()
    if state.counter is not None:  # the device's own count; the in-process engines have none
        text.append(f"{state.counter_unit}/step ", style="dim")
        text.append(f"{state.counter:,.0f}", style="bold")
        text.append(f"  mean {fmt_count(state.counter_mean)}\n", style="dim")
        text.append(sparkline(state.counters, max(1, width)) + "\n", style="cyan")
    text.append("samples/s ", style="dim")
    text.append(fmt_float(state.samples_per_s, 2), style="bold")
    text.append("   ms/step ", style="dim")
    text.append(fmt_float(state.ms_per_step, 1), style="bold")
    text.append(" (host clock)\n", style="dim")
    text.append(f"steps {state.steps_seen}  skipped {state.skipped}", style="dim")
    return text


def log_panel(state: RunState, lines: int) -> Text:
    """The newest `lines` log lines; errors and the link's loss in red."""
    text = Text()
    for line in list(state.logs)[-lines:]:
        alarm = " ERROR " in line or " DISCONNECTED" in line
        text.append(line + "\n", style="bold red" if alarm else "")
    if not state.logs:
        text.append("no log lines yet", style="dim")
    return text


def step_line(state: RunState, event: dict) -> str:
    """One readable line for a step event, already folded into `state` (plain output)."""
    total = f"/{state.steps_total}" if state.steps_total else ""
    if event.get("skipped"):
        return f"step {state.step}{total} skipped"
    counter = "" if state.counter is None else f"  {state.counter:,.0f} {state.counter_unit}"
    scored = ""
    if event.get("prediction") is not None:  # an autoencoder's steps predict no class
        mark = "ok  " if event.get("correct") else "MISS"
        scored = (f" {mark} {class_name(state, event.get('label'))}->"
                  f"{class_name(state, event.get('prediction'))} acc "
                  f"{fmt_pct(state.accuracy)} last{state.window} {fmt_pct(state.accuracy_window)}")
    return (
        f"step {state.step}{total} ep {event.get('epoch', '-')} loss {fmt_float(state.loss)}"
        f" (ema {fmt_float(state.loss_smoothed)}){scored}"
        f"{counter}"
        f"  {fmt_float(state.samples_per_s, 2)}/s ETA {fmt_duration(state.eta_s)}"
    )


PLAIN_FRAME_EVERY = 10  # plain output: a line for every labelled frame, else every 10th


def frame_line(state: RunState, event: dict) -> str:
    """One line for a camera frame's `step` or `sample_eval`, already folded (plain output)."""
    head = f"frame {event['frame']} "
    if event.get("label") is None:
        head += "no label"
    else:
        head += f"label {class_name(state, event['label'])}"
        if event.get("skipped"):
            return head + " skipped"
    head += f" pred {class_name(state, event.get('prediction'))}"
    if event.get("type") == "step":
        mark = "ok" if prediction_correct(event) else "MISS"
        head += f" {mark} loss {fmt_float(event.get('loss'))}"
    return (f"{head}  labelled frames {state.frames_labelled} acc "
            f"{fmt_pct(state.frame_accuracy)}")


def event_line(state: RunState, event: dict) -> str | None:
    """One readable line for any event (plain output); None for events not shown: thumbnails,
    replay steps, and unlabelled frames between every PLAIN_FRAME_EVERY-th."""
    kind = event.get("type")
    framed = isinstance(event.get("frame"), int)
    if kind == "step":
        if event.get("replay"):
            return None
        return frame_line(state, event) if framed else step_line(state, event)
    if kind == "sample_eval":
        shown = framed and event["frame"] % PLAIN_FRAME_EVERY == 0
        return frame_line(state, event) if shown else None
    if kind == "start":
        return "start " + identity_text(state).plain.strip() + f"  steps {state.steps_total}"
    if kind == "eval":
        per_class = ", ".join(f"{k} {fmt_pct(v)}"
                              for k, v in (event.get("per_class") or {}).items())
        return (
            f"eval {event.get('split', '')} @step {event.get('step', '?')}: accuracy "
            f"{fmt_pct(event.get('accuracy'))}" + (f" ({per_class})" if per_class else "")
        )
    if kind == "log":
        return f"log {event.get('text', '')}"
    if kind == "error":
        return "ERROR " + error_line(event)
    if kind == "disconnect":
        return f"DISCONNECTED {event.get('text', '')}".rstrip()
    if kind == "stop":
        return f"STOPPED {stop_line(event)}"
    if kind == "summary":
        fields = {k: v for k, v in event.items() if k not in ("type", "time")}
        return "summary " + "  ".join(
            f"{k} {fmt_float(v) if isinstance(v, float) else v}" for k, v in fields.items()
        )
    return None
