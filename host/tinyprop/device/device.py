"""The host's view of a device running tinyprop firmware (firmware/apps/device/tp_device.c), over a
Link.

    with open_link("socket://127.0.0.1:4321") as link:
        dev = Device(link)
        dev.hello()
        dev.set_hparams(lr=0.01, seed=0)
        event = dev.train(x_int8, label=1)        # a `step` event (docs/runlog.md)
        params = dev.pull_params()                 # the params region, bit for bit

Every failure is a DeviceError that names the link and what the device said. Parameters travel
as a record (tp_device.h): a 24-byte header with the blob id, then the params, so parameters are
never pushed into, or restored for, another model.
"""

from __future__ import annotations

import math
import struct
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..errors import DeviceError, TinypropError
from ..status import Status
from .link import DEFAULT_TIMEOUT, Link, LinkTrouble
from .protocol import (
    LABEL_NONE,
    MAX_CHUNK,
    MAX_PAYLOAD,
    Ack,
    BulkMode,
    BulkOpen,
    BulkSample,
    CounterUnit,
    Eval,
    Hello,
    HparamFlags,
    InputChunk,
    Message,
    Metric,
    MetricFlags,
    Output,
    Params,
    PullParams,
    PushParams,
    Ready,
    Reset,
    SampleFlags,
    SaveParams,
    SetHparams,
    Train,
)

RECORD_MAGIC = 0x52505054  # "TPPR"
RECORD_HEADER = struct.Struct("<IIIIII")  # magic, blob_id, params_len, step, reserved, crc32
# A training step of the VWW model on the emulated M4 is a few seconds of host time; a real
# board at 64 MHz takes longer. Generous, so a slow host never turns into a false error.
STEP_TIMEOUT = 120.0
CHUNK_TRIES = 3  # sends of a chunk before it is sent again smaller (a lossy line)
COUNTER_UNITS = {CounterUnit.INSTRUCTIONS: "instructions", CounterUnit.MICROSECONDS: "us",
                 CounterUnit.CYCLES: "cycles"}


def params_record(params: bytes, blob: int, step: int = 0) -> bytes:
    """The record PUSH_PARAMS and the store carry (tp_device.h): header, then the params."""
    head = RECORD_HEADER.pack(RECORD_MAGIC, blob, len(params), step, 0, 0)[:-4]
    crc = zlib.crc32(params, zlib.crc32(head))
    return head + struct.pack("<I", crc) + bytes(params)


def read_params_record(record: bytes, name: str = "params record") -> tuple[int, int, bytes]:
    """(blob id, step, params) of a record params_record wrote, its magic, length and CRC
    checked."""
    if len(record) < RECORD_HEADER.size:
        raise TinypropError(f"{name}: {len(record)} bytes, shorter than a params record's "
                            f"{RECORD_HEADER.size}-byte header; pull the parameters again")
    magic, blob, n, step, _, crc = RECORD_HEADER.unpack_from(record)
    params = record[RECORD_HEADER.size :]
    if magic != RECORD_MAGIC or n != len(params):
        raise TinypropError(f"{name}: not a params record (magic {magic:08x}, {n} bytes "
                            f"announced, {len(params)} present); pull the parameters again")
    if zlib.crc32(params, zlib.crc32(record[: RECORD_HEADER.size - 4])) != crc:
        raise TinypropError(f"{name}: fails its CRC (corrupted); pull the parameters again")
    return blob, step, bytes(params)


def write_bulk_file(path: str | Path, inputs: np.ndarray, labels) -> int:
    """Write samples for BULK_OPEN: per sample one label byte, then the int8 input bytes.
    Returns the number of samples."""
    inputs = np.asarray(inputs, np.int8).reshape(len(labels), -1)
    records = (bytes([int(label) & 0xFF]) + x.tobytes()
               for x, label in zip(inputs, labels, strict=True))
    Path(path).write_bytes(b"".join(records))
    return len(labels)


def step_event(m: Metric, sram: int) -> dict:
    """A METRIC frame as a run log event: `step` for training, `sample_eval` for evaluation."""
    labelled = m.label != LABEL_NONE
    event = {
        "type": "sample_eval" if m.flags & MetricFlags.EVAL else "step",
        "step": m.step,
        "label": m.label if labelled else None,
        "prediction": m.prediction,
        "correct": bool(m.correct) if labelled else None,
        "skipped": bool(m.flags & MetricFlags.SKIPPED),
        "counter": m.counter,
        "memory": {"static": m.static_bytes, "arena_peak": m.arena_peak,
                   "trainable": m.trainable_bytes, "stack_peak": m.stack_peak, "sram": sram},
    }
    if not m.flags & MetricFlags.EVAL:
        # JSON has no NaN: a non-finite loss (a skipped update) is left out
        event["loss"] = m.loss if math.isfinite(m.loss) else None
    return event


class Device:
    """Requests to one device. `ready` is its last READY (hello() fills it); `process` is the
    board process tinyprop.device.boards started for it, or None for a board it did not start."""

    def __init__(self, link: Link, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.link = link
        self.timeout = timeout
        self.ready: Ready | None = None
        self.process = None

    @property
    def name(self) -> str:
        return self.link.name

    def _require_ready(self) -> Ready:
        return self.ready if self.ready is not None else self.hello()

    def hello(self, timeout: float | None = None) -> Ready:
        """Ask the device who it is (board, SRAM, blob id, counter unit)."""
        self.ready = self.link.request(Hello(), Ready, timeout or self.timeout)
        return self.ready

    @property
    def counter_unit(self) -> str:
        return COUNTER_UNITS.get(self._require_ready().counter_unit, "?")

    def set_hparams(self, lr: float, seed: int = 0, qas: bool = True,
                    momentum: float = 0.0) -> None:
        flags = HparamFlags.QAS if qas else 0
        self.link.request(SetHparams(lr, momentum, seed & 0xFFFFFFFF, flags), Ack, self.timeout)

    def write_input(self, x: np.ndarray) -> None:
        """Send one sample's int8 input tensor in chunks, several in flight (Link.pipeline)."""
        data = np.asarray(x, np.int8).tobytes()
        if self.link.payload == MAX_PAYLOAD:
            size = self._chunk(InputChunk)
            chunks = [InputChunk(off, data[off : off + size])
                      for off in range(0, len(data), size)]
            try:
                if self.link.pipeline(chunks, Ack, self.timeout)[-1].value == len(data):
                    return
            except LinkTrouble:
                pass
        # A chunk was lost on the line (or the line is lossy): the device takes the input in
        # order from offset 0, so all of it again, one chunk at a time, in smaller chunks while
        # chunks go unanswered.
        self._send_chunks(data, InputChunk)

    def _chunk(self, kind: type[InputChunk] | type[PushParams]) -> int:
        """Data bytes of the next chunk: what the line carries well, within the device's
        receive buffer."""
        limit = min(MAX_CHUNK, self._require_ready().max_payload - kind.FIXED.size)
        return self.link.chunk_bytes(kind.FIXED.size, limit)

    def _send_chunks(self, data: bytes, kind: type[InputChunk] | type[PushParams],
                     first: int = 1) -> None:
        """Send `data` as chunks of `kind` (offset, bytes), one at a time (both kinds write
        bytes in place: a repeat changes nothing). The first chunk holds at least `first`
        bytes."""
        def chunk_at(at: int) -> InputChunk | PushParams:
            return kind(at, data[at : at + max(first if at == 0 else 1, self._chunk(kind))])

        off = 0
        while off < len(data):
            off += len(self._answered(lambda at=off: chunk_at(at), Ack)[0].data)

    def _answered(self, make: Callable[[], Message], expect: type[Message]) -> tuple:
        """(request, answer): the request `make` builds for what the line carries now
        (Link.chunk_bytes), built again, smaller, after CHUNK_TRIES sends without an answer,
        until `timeout` seconds pass without one."""
        since = time.monotonic()
        while True:
            msg = make()
            try:
                return msg, self.link.request(msg, expect, self.timeout, tries=CHUNK_TRIES)
            except LinkTrouble as exc:
                if time.monotonic() - since > self.timeout:
                    raise DeviceError(f"device on {self.name} stopped answering after "
                                      f"{self.timeout:g} s: {exc}") from None

    def train(self, x: np.ndarray, label: int) -> dict:
        """One training step on (x, label); returns the `step` event of its METRIC."""
        self.write_input(x)
        return self._sample(Train(label), STEP_TIMEOUT)[1]

    def evaluate(self, x: np.ndarray, label: int | None = None) -> np.ndarray:
        """Run inference on x; returns the model's int8 output tensor."""
        msg = Eval(LABEL_NONE if label is None else label, SampleFlags.OUTPUT)
        return self._evaluate(x, msg)[0]

    def classify(self, x: np.ndarray, label: int | None = None) -> dict:
        """Run inference on x; returns the `sample_eval` event (prediction, counter)."""
        return self._evaluate(x, Eval(LABEL_NONE if label is None else label, 0))[1]

    def _evaluate(self, x: np.ndarray, msg: Eval) -> tuple[np.ndarray | None, dict]:
        """EVAL on x. A sample uses up the input (the arena holds it): an EVAL sent again
        because its answer was lost finds none, so input and EVAL go again."""
        while True:
            self.write_input(x)
            retried = self.link.stats.retried
            try:
                return self._sample(msg, STEP_TIMEOUT)
            except DeviceError as exc:
                if exc.status != Status.TP_ERR_WRONG_SAMPLE_SIZE or \
                        self.link.stats.retried == retried:
                    raise

    def bulk_open(self, path: str) -> int:
        """Open a sample file on the board's side (write_bulk_file's format, path relative to
        the board's working directory); returns its number of samples."""
        return self.link.request(BulkOpen(path), Ack, self.timeout).value

    def train_bulk(self, index: int) -> dict:
        """Train on sample `index` of the open bulk file; returns the `step` event."""
        return self._sample(BulkSample(index, BulkMode.TRAIN), STEP_TIMEOUT)[1]

    def evaluate_bulk(self, index: int) -> dict:
        """Evaluate sample `index` of the open bulk file; returns a `sample_eval` event."""
        return self._sample(BulkSample(index, BulkMode.EVAL), STEP_TIMEOUT)[1]

    def _sample(self, msg, timeout: float) -> tuple[np.ndarray | None, dict]:
        replies = self.link.exchange(msg, Metric, timeout)
        output = next((np.frombuffer(r.data, np.int8) for r in replies if isinstance(r, Output)),
                      None)
        return output, step_event(replies[-1], self._require_ready().sram_bytes)

    def pull_record(self) -> bytes:
        """The device's params record (header + params), checked against its blob id."""
        ready = self._require_ready()
        record = bytearray()
        total = RECORD_HEADER.size

        def pull_at(at: int) -> PullParams:
            return PullParams(at, self.link.chunk_bytes(Params.FIXED.size, PullParams.max_len))

        while len(record) < total:
            at = len(record)
            _, got = self._answered(lambda at=at: pull_at(at), Params)
            if got.offset != len(record) or not got.data:
                raise DeviceError(
                    f"device on {self.name} answered PULL_PARAMS at {len(record)} with "
                    f"{len(got.data)} bytes at {got.offset}: re-flash the board's firmware"
                )
            record += got.data
            if len(record) >= RECORD_HEADER.size:
                magic, rid, n, *_ = RECORD_HEADER.unpack_from(record)
                if magic != RECORD_MAGIC or rid != ready.blob_id:
                    raise DeviceError(
                        f"device on {self.name} sent a params record for blob {rid:08x} "
                        f"(magic {magic:08x}), it runs {ready.blob_id:08x}: re-flash the board"
                    )
                total = RECORD_HEADER.size + n
        record = bytes(record[:total])
        crc = RECORD_HEADER.unpack_from(record)[5]
        head = record[: RECORD_HEADER.size - 4]
        if zlib.crc32(record[RECORD_HEADER.size :], zlib.crc32(head)) != crc:
            raise DeviceError(f"device on {self.name}: pulled params fail their CRC; pull again")
        return record

    def pull_params(self) -> bytes:
        """The trainable parameters (the params region, as TrainProgram.pack_params lays out)."""
        return self.pull_record()[RECORD_HEADER.size :]

    def push_params(self, params: bytes, step: int = 0) -> None:
        """Write the trainable parameters (resume a run); `step` continues the step count."""
        self.push_record(params_record(params, self._require_ready().blob_id, step))

    def push_record(self, record: bytes) -> None:
        """Send a params record as is (the device refuses one for another blob); its first
        chunk holds the header."""
        self._send_chunks(record, PushParams, first=RECORD_HEADER.size)

    def save(self) -> int:
        """Save the params record to the board's store (restored at its next boot); returns
        the bytes saved."""
        return self.link.request(SaveParams(), Ack, self.timeout).value

    def reset(self) -> None:
        """Parameters back to the blob's, step count to 0."""
        self.link.request(Reset(), Ack, self.timeout)

    def close(self) -> None:
        self.link.close()
