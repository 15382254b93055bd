"""The run log: training events as JSON lines, and `RunState`, what a display folds them into.

The schema is documented in docs/runlog.md. Events are plain dicts with a `type` and a `time`
(seconds since the run started, host clock); unknown types and fields are kept and ignored, so
newer producers never break older readers.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from typing_extensions import Self  # a dependency of textual; typing.Self is 3.11+

from ..errors import TinypropError

EVENT_TYPES = ("start", "step", "sample_eval", "frame", "eval", "log", "error", "disconnect",
               "stop", "summary")
MEMORY_PARTS = ("static", "arena_peak", "trainable", "stack_peak")
SAMPLE_FRAMES = 8  # frames a report's strip shows


def _json_default(value: Any) -> Any:
    # NumPy scalars and arrays reach here from the trainer; JSON has no type for them.
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"run log: {type(value).__name__} is not JSON serializable")


class RunLog:
    """Appends events to a JSONL file, one flushed line each, so a killed writer leaves a file
    that is complete up to its last event. Stamps `time` on events that lack one: seconds since
    this log was opened, after the last `time` the file holds (`resumed_at`), so a resumed
    run's log runs on from where it stopped (the pause between the two is not the run's)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.resumed_at = last_time(self.path)
        self._file = self.path.open("a", encoding="utf-8")
        self._t0 = time.monotonic() - self.resumed_at

    def write(self, event: dict) -> dict:
        """Append one event; returns it as written (with `time` filled in)."""
        if "time" not in event:
            event = {**event, "time": round(time.monotonic() - self._t0, 6)}
        # a skipped step's loss may be NaN or inf, which JSON has no spelling for: null, as the
        # device path writes it
        event = {k: None if isinstance(v, float) and not math.isfinite(v) else v
                 for k, v in event.items()}
        self._file.write(json.dumps(event, default=_json_default, separators=(",", ":")) + "\n")
        self._file.flush()
        return event

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def last_time(path: Path) -> float:
    """The latest `time` of the events in the run log at `path` (0 if none, or no file)."""
    if not path.exists():
        return 0.0
    times = [e["time"] for e in read_runlog(path) if isinstance(e.get("time"), (int, float))]
    return float(max(times, default=0.0))


def drop_steps_from(path: Path, step: int) -> int:
    """Remove the `step` events from `step` on from the run log at `path` (a run resumed from
    a checkpoint at `step` trains them again); returns how many went. Other events stay."""
    if not path.exists():
        return 0
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = []
    for line in lines:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:  # a truncated last line: gone with the steps after it
            continue
        if isinstance(event, dict) and event.get("type") == "step" and \
                isinstance(event.get("step"), int) and event["step"] >= step:
            continue
        kept.append(line if line.endswith("\n") else line + "\n")
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(kept), encoding="utf-8")
    tmp.replace(path)
    return len(lines) - len(kept)


def read_runlog(path: str | Path) -> list[dict]:
    """All events of a JSONL run log. A truncated last line (writer killed mid-line) is dropped;
    a bad line anywhere else is an error, since the file was then damaged, not cut short."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise TinypropError(
            f"{path}: cannot read the run log ({exc.strerror}); give the .jsonl file written by "
            "`tinyprop train`"
        ) from None
    lines = text.split("\n")
    events = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):  # no newline after it: the writer died mid-line
                break
            raise TinypropError(
                f"{path}:{number}: not a JSON object; a run log has one JSON event a line "
                "(see docs/runlog.md)"
            ) from None
        if not isinstance(event, dict) or "type" not in event:
            raise TinypropError(
                f"{path}:{number}: an event must be a JSON object with a \"type\"; "
                "see docs/runlog.md"
            )
        events.append(event)
    return events


FRAME_CHANNELS = (1, 3)  # gray, RGB


def frame_event(pixels: np.ndarray, frame: int, label: int | None,
                prediction: int | None) -> dict:
    """The `frame` event of a camera frame's thumbnail: `pixels` is what the model sees, uint8
    H x W (gray) or H x W x C with C 1 or 3; `label` the class given (None: no label),
    `prediction` the model's. RunLog.write stamps its `time`."""
    given = np.asarray(pixels)
    pixels = given[..., None] if given.ndim == 2 else given
    if (pixels.dtype != np.uint8 or pixels.ndim != 3 or pixels.shape[2] not in FRAME_CHANNELS
            or not pixels.size):
        raise TinypropError(
            f"frame {frame}: thumbnail pixels are {given.dtype} {tuple(given.shape)}; give a "
            "uint8 H x W (gray) or H x W x 3 (RGB) array"
        )
    height, width, channels = pixels.shape
    return {"type": "frame", "frame": int(frame), "width": width, "height": height,
            "channels": channels,
            "pixels": base64.b64encode(np.ascontiguousarray(pixels).tobytes()).decode("ascii"),
            "label": None if label is None else int(label),
            "prediction": None if prediction is None else int(prediction)}


def frame_pixels(event: dict) -> np.ndarray:
    """The thumbnail of a `frame` event as uint8 H x W x C (C 1 or 3)."""
    where = f"frame event {event.get('frame', '?')}"
    size = [event.get(key) for key in ("height", "width", "channels")]
    if not all(isinstance(n, int) and n > 0 for n in size) or size[2] not in FRAME_CHANNELS:
        raise TinypropError(f"{where}: height, width and channels must be positive integers, "
                            f"channels 1 or 3, not {size}; see docs/runlog.md")
    try:
        raw = base64.b64decode(str(event.get("pixels", "")), validate=True)
    except binascii.Error:
        raise TinypropError(f"{where}: pixels are not base64; see docs/runlog.md") from None
    expected = size[0] * size[1] * size[2]
    if len(raw) != expected:
        raise TinypropError(f"{where}: {len(raw)} pixel bytes, {size[0]} x {size[1]} x {size[2]} "
                            f"= {expected} expected; see docs/runlog.md")
    return np.frombuffer(raw, dtype=np.uint8).reshape(size)


@dataclass(frozen=True)
class CameraFrame:
    """A camera frame's thumbnail as a `frame` event carries it."""

    index: int
    pixels: np.ndarray  # uint8 H x W x C, C 1 (gray) or 3 (RGB)
    label: int | None
    prediction: int | None

    @classmethod
    def from_event(cls, event: dict) -> CameraFrame:
        index, label, prediction = event.get("frame"), event.get("label"), event.get("prediction")
        if not isinstance(index, int):
            raise TinypropError(f"frame event: `frame` must be the frame's 0-based index, not "
                                f"{index!r}; see docs/runlog.md")
        return cls(index, frame_pixels(event),
                   label if isinstance(label, int) else None,
                   prediction if isinstance(prediction, int) else None)


@dataclass
class RunState:
    """Everything a display shows about a run, folded from its events one at a time.

    The confusion matrix counts training predictions, rows = true label, columns = prediction
    (the same layout as `eval` events). A camera run (`tinyprop learn`) also has frames: each
    `step` or `sample_eval` with a `frame` index is one (a `replay` step is not: it trains again
    on an earlier frame), `thumbnail` is the newest `frame` event and `frame_accuracy` the
    share of labelled frames the model predicted right before training on them. `window` is
    the number of recent steps behind the windowed accuracy and the samples/s rate;
    `ema_alpha` is the weight of a new loss in the smoothed loss.
    """

    window: int = 50
    ema_alpha: float = 0.05
    log_lines: int = 8

    start: dict = field(default_factory=dict)
    classes: list[str] = field(default_factory=list)
    steps_total: int | None = None
    sram: int | None = None

    step: int | None = None  # index of the last step event (0-based)
    steps_seen: int = 0
    skipped: int = 0
    step_numbers: list[int] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    loss_ema: list[float] = field(default_factory=list)
    accuracy_running: list[float] = field(default_factory=list)
    accuracy_windowed: list[float] = field(default_factory=list)
    counters: list[float] = field(default_factory=list)  # NaN where a step had none
    step_times: list[float] = field(default_factory=list)  # host `time` of each step shown
    epoch_starts: list[tuple[int, int]] = field(default_factory=list)  # (first step, epoch)
    correct: int = 0
    scored: int = 0  # steps with a label and a prediction, skipped ones excluded
    confusion: list[list[int]] = field(default_factory=list)
    memory: dict = field(default_factory=dict)

    frames_seen: int = 0  # camera frames predicted (non-replay steps and sample_evals)
    frames_labelled: int = 0  # of them, trained on with a label and a prediction (not skipped)
    frames_correct: int = 0
    frame_index: int | None = None  # the newest camera frame's index
    thumbnail: CameraFrame | None = None  # the newest `frame` event
    frame_samples: list[CameraFrame] = field(default_factory=list)  # spread over the run

    evals: list[dict] = field(default_factory=list)
    logs: deque = field(default_factory=deque)
    errors: list[dict] = field(default_factory=list)
    summary: dict | None = None
    disconnected: bool = False
    disconnect_text: str = ""
    stopped: dict | None = None  # the `stop` event: the user stopped the run
    time: float = 0.0  # `time` of the latest event
    events: int = 0

    def __post_init__(self) -> None:
        self._recent: deque = deque(maxlen=self.window)  # (time, correct or None) of recent steps
        self.logs = deque(self.logs, maxlen=self.log_lines)
        # frame_samples keeps every `_sample_stride`-th thumbnail, halving itself (and doubling
        # the stride) when it grows past twice SAMPLE_FRAMES: evenly spread, in bounded memory.
        self._sample_stride = 1
        self._thumbnails = 0

    @classmethod
    def from_events(cls, events: Iterable[dict], **options: Any) -> RunState:
        state = cls(**options)
        for event in events:
            state.fold(event)
        return state

    def fold(self, event: dict) -> None:
        """Take one event into the state. Unknown types and fields are ignored."""
        self.events += 1
        if isinstance(event.get("time"), (int, float)):
            self.time = max(self.time, float(event["time"]))
        handler = getattr(self, "_fold_" + str(event.get("type")), None)
        if handler is not None and event.get("type") in EVENT_TYPES:
            handler(event)

    def end_of_source(self) -> None:
        """The event source ended: without a summary or a stop, the run did not finish, the link
        was lost."""
        if self.summary is None and self.stopped is None and not self.disconnected:
            self._fold_disconnect({"text": "event source ended before the run's summary"})

    def _fold_start(self, event: dict) -> None:
        self.start = event
        self.classes = [str(c) for c in event.get("classes") or []]
        self.steps_total = event.get("steps_total")
        self.sram = event.get("sram")
        self._grow_confusion(len(self.classes))
        self.disconnected = False  # a new start on the same link: the device is back
        self.stopped = None  # a resumed run

    def _fold_step(self, event: dict) -> None:
        self.steps_seen += 1
        self.step = int(event.get("step", self.steps_seen - 1))
        epoch = event.get("epoch")
        if isinstance(epoch, int) and (not self.epoch_starts or self.epoch_starts[-1][1] != epoch):
            self.epoch_starts.append((self.step, epoch))
        if event.get("memory"):
            self.memory = event["memory"]
            self.sram = self.sram or self.memory.get("sram")
        if not event.get("replay"):
            self._count_frame(event)
        if event.get("skipped"):
            self.skipped += 1
            self._recent.append((self.time, None))
            return
        self.step_numbers.append(self.step)
        self.step_times.append(self.time)
        loss = float(event.get("loss", math.nan))
        self.losses.append(loss)
        previous = self.loss_ema[-1] if self.loss_ema else loss
        self.loss_ema.append(previous + self.ema_alpha * (loss - previous))
        counter = event.get("counter")
        self.counters.append(math.nan if counter is None else float(counter))
        label, prediction = event.get("label"), event.get("prediction")
        correct = prediction_correct(event)
        self._recent.append((self.time, correct))
        if correct is not None:
            self.scored += 1
            self.correct += correct
        self._count_confusion(label, prediction)
        self.accuracy_running.append(self.accuracy)
        self.accuracy_windowed.append(self.accuracy_window)

    def _count_frame(self, event: dict) -> None:
        """A `step` (not replay) or `sample_eval` that carries a camera frame's index."""
        if not isinstance(event.get("frame"), int):
            return
        self.frames_seen += 1
        self.frame_index = event["frame"]
        correct = prediction_correct(event)
        if event.get("type") == "step" and not event.get("skipped") and correct is not None:
            self.frames_labelled += 1
            self.frames_correct += correct

    def _fold_sample_eval(self, event: dict) -> None:
        self._count_frame(event)

    def _fold_frame(self, event: dict) -> None:
        try:
            frame = CameraFrame.from_event(event)
        except TinypropError as exc:  # a reader never fails on an event: say so, go on
            self.logs.append(f"{self.time:.1f}s {exc}")
            return
        self.thumbnail = frame
        if self._thumbnails % self._sample_stride == 0:
            self.frame_samples.append(frame)
            if len(self.frame_samples) > 2 * SAMPLE_FRAMES:
                self.frame_samples = self.frame_samples[::2]
                self._sample_stride *= 2
        self._thumbnails += 1

    def _count_confusion(self, label: Any, prediction: Any) -> None:
        if not (isinstance(label, int) and isinstance(prediction, int)):
            return
        if label < 0 or prediction < 0:
            return
        self._grow_confusion(max(label, prediction) + 1)
        self.confusion[label][prediction] += 1

    def _grow_confusion(self, n: int) -> None:
        """At least n x n, keeping the counts (no start event, or a class beyond its list)."""
        if n <= len(self.confusion):
            return
        for row in self.confusion:
            row.extend([0] * (n - len(row)))
        self.confusion.extend([0] * n for _ in range(n - len(self.confusion)))

    def _fold_eval(self, event: dict) -> None:
        self.evals.append(event)

    def _fold_log(self, event: dict) -> None:
        self.logs.append(f"{self.time:.1f}s {event.get('text', '')}")

    def _fold_error(self, event: dict) -> None:
        self.errors.append(event)
        self.logs.append(f"{self.time:.1f}s ERROR {error_line(event)}")

    def _fold_disconnect(self, event: dict) -> None:
        self.disconnected = True
        self.disconnect_text = str(event.get("text", ""))
        self.logs.append(f"{self.time:.1f}s DISCONNECTED {self.disconnect_text}".rstrip())

    def _fold_stop(self, event: dict) -> None:
        self.stopped = event
        self.logs.append(f"{self.time:.1f}s STOPPED {stop_line(event)}")

    def _fold_summary(self, event: dict) -> None:
        self.summary = event

    # What displays show, derived on demand.

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.scored if self.scored else None

    @property
    def accuracy_window(self) -> float | None:
        marks = [c for _, c in self._recent if c is not None]
        return sum(marks) / len(marks) if marks else None

    @property
    def frame_accuracy(self) -> float | None:
        """Share of labelled frames predicted right (before training on them)."""
        return self.frames_correct / self.frames_labelled if self.frames_labelled else None

    @property
    def has_frames(self) -> bool:
        return self.frames_seen > 0 or self.thumbnail is not None

    def sample_frames(self, count: int = SAMPLE_FRAMES) -> list[CameraFrame]:
        """Up to `count` thumbnails evenly spread over the run, the newest last."""
        kept = list(self.frame_samples)
        if self.thumbnail is not None and (not kept or kept[-1] is not self.thumbnail):
            kept.append(self.thumbnail)
        if len(kept) <= count:
            return kept
        return [kept[round(i * (len(kept) - 1) / (count - 1))] for i in range(count)]

    @property
    def loss(self) -> float | None:
        return self.losses[-1] if self.losses else None

    @property
    def loss_smoothed(self) -> float | None:
        return self.loss_ema[-1] if self.loss_ema else None

    @property
    def steps_done(self) -> int:
        return 0 if self.step is None else self.step + 1

    @property
    def progress(self) -> float | None:
        if not self.steps_total:
            return None
        return min(1.0, self.steps_done / self.steps_total)

    @property
    def samples_per_s(self) -> float | None:
        """Steps a second over the recent window (skipped samples count: they cost link time)."""
        if len(self._recent) < 2:
            return None
        span = self._recent[-1][0] - self._recent[0][0]
        return (len(self._recent) - 1) / span if span > 0 else None

    @property
    def ms_per_step(self) -> float | None:
        """Host time a step over the recent window: the end-to-end cost, link included."""
        rate = self.samples_per_s
        return 1000 / rate if rate else None

    @property
    def eta_s(self) -> float | None:
        rate = self.samples_per_s
        if not self.steps_total or not rate or self.summary is not None or self.stopped:
            return None
        return max(0, self.steps_total - self.steps_done) / rate

    @property
    def counter_unit(self) -> str:
        return str(self.start.get("counter_unit") or "counter")

    @property
    def counter(self) -> float | None:
        return next((c for c in reversed(self.counters) if math.isfinite(c)), None)

    @property
    def counter_mean(self) -> float | None:
        known = [c for c in self.counters if math.isfinite(c)]
        return sum(known) / len(known) if known else None

    @property
    def per_class_accuracy(self) -> dict[str, float | None]:
        names = self.class_names
        return {
            names[i]: (row[i] / sum(row) if sum(row) else None)
            for i, row in enumerate(self.confusion)
        }

    @property
    def class_names(self) -> list[str]:
        return self.classes + [f"class {i}" for i in range(len(self.classes), len(self.confusion))]

    @property
    def memory_total(self) -> int:
        return sum(int(self.memory.get(part) or 0) for part in MEMORY_PARTS)

    @property
    def status(self) -> str:
        if self.disconnected:
            return "DISCONNECTED"
        if self.stopped is not None:
            return "STOPPED"
        if self.summary is not None:
            return "FINISHED"
        return "RUNNING" if self.events else "WAITING"

    @property
    def last_error(self) -> dict | None:
        return self.errors[-1] if self.errors else None


def prediction_correct(event: dict) -> bool | None:
    """Whether a step's prediction was right: its `correct`, else label == prediction; None
    when it has no label or no prediction."""
    label, prediction, correct = event.get("label"), event.get("prediction"), event.get("correct")
    if correct is None and label is not None and prediction is not None:
        correct = label == prediction
    return None if correct is None else bool(correct)


def stop_line(event: dict) -> str:
    """A `stop` event as one line."""
    return str(event.get("text") or f"{event.get('reason', 'stopped')} at step "
               f"{event.get('step', '?')}")


def error_line(event: dict) -> str:
    """An error event as one line: `WRONG_SAMPLE_SIZE (7): text`."""
    name = event.get("name") or "error"
    code = event.get("code")
    head = f"{name} ({code})" if code is not None else str(name)
    text = event.get("text")
    return f"{head}: {text}" if text else head
