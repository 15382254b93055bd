"""Links to a device: open one from a string, send messages, receive and match replies.

    with open_link("socket://127.0.0.1:4321") as link:
        ready = link.request(Hello(), expect=Ready)

A link string is any pyserial URL or port (`/dev/ttyACM0`, `COM3`, `socket://HOST:PORT`,
`loop://`), or `exec:COMMAND` to run the host board as a child process and talk over its
stdin/stdout. Replies carry the seq of the request they answer (docs/protocol.md); LOG frames
go to a callback, frames for other requests and line garbage are skipped and counted.
"""

from __future__ import annotations

import os
import select
import shlex
import subprocess
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import serial
from typing_extensions import Self  # a dependency of textual; typing.Self is 3.11+

from ..errors import DeviceError, TinypropError
from ..status import describe
from .protocol import (
    MAX_PAYLOAD,
    BadFrame,
    Error,
    FrameDecoder,
    Log,
    Message,
    MsgType,
    ProtocolError,
    Ready,
    encode,
)

DEFAULT_BAUDRATE = 921600  # the ESP32 UART's (boards/esp32/profile.json); USB CDC ignores it
# Seconds a request may go unanswered before it fails: a training step on the emulated M4 takes
# well under that, and a link cut for a few seconds is waited out (its requests sent again).
DEFAULT_TIMEOUT = 10.0
# Requests in flight in Link.pipeline: three full frames (3.1 KB) fit the smallest receive buffer
# of the boards (the ESP32's UART driver: 4 KB, boards/esp32/board.cpp).
PIPELINE_WINDOW = 3
LINK_FORMS = "a serial port (/dev/ttyACM0, COM3), socket://HOST:PORT, loop:// or exec:COMMAND"


class LinkClosed(Exception):
    """The transport ended for good (peer closed, process exited, port unplugged)."""


class LinkTrouble(DeviceError):
    """A frame of Link.pipeline was lost on the line: send its requests again."""


class Transport(Protocol):
    name: str

    def write(self, data: bytes) -> None: ...

    def read(self, timeout: float) -> bytes:
        """Bytes available within `timeout` seconds (b"" if none); LinkClosed at the end."""
        ...

    def close(self) -> None: ...


class SerialTransport:
    """A pyserial port or URL."""

    def __init__(self, port: serial.SerialBase, name: str) -> None:
        self.port = port
        self.name = name

    def write(self, data: bytes) -> None:
        try:
            self.port.write(data)
            self.port.flush()
        except (serial.SerialException, OSError) as exc:
            raise LinkClosed(str(exc)) from None

    def read(self, timeout: float) -> bytes:
        try:
            self.port.timeout = max(timeout, 0.0)
            first = self.port.read(1)
            if not first:
                return b""
            self.port.timeout = 0
        except (serial.SerialException, OSError) as exc:
            raise LinkClosed(str(exc)) from None
        try:
            return first + self.port.read(max(self.port.in_waiting, 1))
        except (serial.SerialException, OSError):
            # the peer closed right after its last byte: keep that byte (often a frame's
            # closing 0x00); the next read reports the end
            return first

    def close(self) -> None:
        self.port.close()


class PipeTransport:
    """A child process's stdin/stdout (the host board). POSIX only: reads wait in select()."""

    def __init__(self, process: subprocess.Popen, name: str, owned: bool = False) -> None:
        if process.stdin is None or process.stdout is None:
            raise ValueError("PipeTransport needs a Popen with stdin=PIPE and stdout=PIPE")
        self.process = process
        self.name = name
        self._owned = owned  # started by us: stopped by close()
        self._in = process.stdin.fileno()
        self._out = process.stdout.fileno()

    def _ended(self) -> LinkClosed:
        status = self.process.poll()
        return LinkClosed("pipe closed" if status is None else f"process exited with {status}")

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._in, view) :]
        except (BrokenPipeError, OSError):
            raise self._ended() from None

    def read(self, timeout: float) -> bytes:
        ready, _, _ = select.select([self._out], [], [], max(timeout, 0.0))
        if not ready:
            return b""
        data = os.read(self._out, 65536)
        if not data:
            raise self._ended()
        return data

    def close(self) -> None:
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
        if self._owned:
            try:
                self.process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Received(NamedTuple):
    seq: int
    msg: Message


@dataclass
class LinkStats:
    frames_out: int = 0
    frames_in: int = 0
    garbage_bytes: int = 0  # wire bytes of rejected frames
    faults: Counter = field(default_factory=Counter)  # rejected frames by decoder status
    stale: int = 0  # good frames that answered no pending request
    retried: int = 0  # requests sent again (no answer in time, or a frame lost on the line)


@dataclass(frozen=True)
class Retry:
    """When a request is sent again. A request unanswered after `first` seconds (or twice the
    longest answer of its type so far, whichever is longer) goes again, then after twice as long,
    up to `longest`; a frame the line garbled (the device's ERROR with seq 0, or a reply that
    fails its CRC) sends it again at once. Every request may be repeated: the device answers a
    repeated training request with its METRIC again instead of training twice
    (docs/protocol.md, Lossy links)."""

    first: float = 0.25
    longest: float = 2.0
    smallest_payload: int = 32  # payload bytes a chunk keeps on the worst line
    sample_first: float = 5.0  # a sample's first answer, before one was timed
    soon: float = 0.005  # a frame garbled: again at once, but not sooner than this after the last


SAMPLE_TYPES = (MsgType.TRAIN, MsgType.EVAL, MsgType.BULK_SAMPLE)


def _msg_type(expect: type[Message] | int) -> MsgType:
    return MsgType(expect.TYPE if isinstance(expect, type) else expect)


class Link:
    """Messages over a transport. Not thread-safe: one caller at a time."""

    def __init__(
        self, transport: Transport, on_log: Callable[[str], None] | None = None
    ) -> None:
        self.transport = transport
        self.name = transport.name
        self.on_log = on_log
        self.logs: deque[str] = deque(maxlen=200)  # LOG texts, when there is no on_log
        self.stats = LinkStats()
        self.retry = Retry()
        self._decoder = FrameDecoder()
        self._received: deque[Received] = deque()
        self._seq = 0
        self._garbled = 0  # frames rejected so far (a retry trigger)
        # Payload bytes a chunk of bulk data (input, params) carries now: the largest on a clean
        # line; halved when a request must be sent again, doubled back when one is answered at
        # once. A 1 KB frame rarely crosses a line that garbles one byte in a hundred intact.
        self.payload = MAX_PAYLOAD
        self._slowest: dict[MsgType, float] = {}  # the longest answer of each request type
        # Requests answered after they were sent again: their repeats' answers still come, and
        # are dropped (stats.stale), so recv never returns one.
        self._answered: deque[int] = deque(maxlen=16)

    def next_seq(self) -> int:
        """1..65535, wrapping; 0 is left to unsolicited device frames."""
        self._seq = self._seq % 0xFFFF + 1
        return self._seq

    def send(self, msg: Message) -> int:
        """Send one message with a fresh seq; returns the seq."""
        seq = self.next_seq()
        self._write(msg, seq)
        return seq

    def _write(self, msg: Message, seq: int, again: bool = False) -> None:
        # A repeat starts with 0x00: it ends whatever partial frame a lost delimiter left in the
        # device's decoder, which would otherwise swallow the repeat too.
        try:
            self.transport.write((b"\0" if again else b"") + encode(msg, seq))
        except LinkClosed as exc:
            raise DeviceError(
                f"device on {self.name}: cannot send {msg.TYPE.name}, the link is closed ({exc})"
            ) from None
        self.stats.frames_out += 1

    def recv(self, timeout: float) -> Received | None:
        """The next message from the device, or None if none came within `timeout` seconds.
        Rejected frames are counted in `stats`; a link that closes raises DeviceError."""
        deadline = time.monotonic() + timeout
        while (got := self._next(deadline - time.monotonic())) is None:
            if time.monotonic() >= deadline:
                return None
        return got

    def _next(self, timeout: float) -> Received | None:
        """As recv, but None as soon as a frame is rejected (a retry may be due)."""
        deadline = time.monotonic() + timeout
        garbled = self._garbled
        while not self._received:
            remaining = deadline - time.monotonic()
            if remaining < 0 or self._garbled != garbled:
                return None
            try:
                data = self.transport.read(remaining)
            except LinkClosed as exc:
                raise DeviceError(f"device on {self.name} closed the link ({exc})") from None
            for result in self._decoder.feed(data):
                if isinstance(result, BadFrame):
                    self.stats.garbage_bytes += result.size
                    self.stats.faults[result.fault] += 1
                    self._garbled += 1
                    continue
                try:
                    msg = result.message()
                except ProtocolError as exc:
                    raise DeviceError(
                        f"device on {self.name} sent a malformed message ({exc}): the firmware "
                        "and the host speak different protocol versions; re-flash the board"
                    ) from None
                self.stats.frames_in += 1
                if result.seq in self._answered:
                    self.stats.stale += 1
                    continue
                self._received.append(Received(result.seq, msg))
        return self._received.popleft()

    def chunk_bytes(self, fixed: int, limit: int) -> int:
        """Data bytes for a chunk with `fixed` bytes of other fields, at most `limit`: what
        the line carries well now (`payload`)."""
        return max(1, min(limit, self.payload - fixed))

    def exchange(
        self, msg: Message, until: type[Message] | int, timeout: float = DEFAULT_TIMEOUT,
        tries: int | None = None,
    ) -> list[Message]:
        """Send `msg`, then collect the device's replies to it up to and including the first of
        type `until` (e.g. [Output, Metric] for a TRAIN with SampleFlags.OUTPUT). The request
        goes again, with its seq, when its answer is late or the line garbles a frame (Retry).

        Raises DeviceError when the device answers ERROR, restarts, closes the link, or sends
        no `until` within `timeout` seconds; LinkTrouble after `tries` sends without an answer
        (a caller that can send the same in smaller chunks, with chunk_bytes, does so)."""
        seq = self.send(msg)
        return self._replies(seq, f"{msg.TYPE.name} (seq {seq})", _msg_type(until), timeout,
                             again=msg, tries=tries)

    def pipeline(self, msgs: Iterable[Message], expect: type[Message],
                 timeout: float = DEFAULT_TIMEOUT, window: int = PIPELINE_WINDOW) -> list[Message]:
        """Send `msgs` with up to `window` of them unanswered, and return each one's reply of
        type `expect`, in order: the link carries the next chunk while the device handles one,
        so a sample costs no round trip per chunk (USB CDC's are about 1 ms each). The device
        answers in order. Nothing is sent again: a late answer or a garbled frame raises
        LinkTrouble (the caller starts over, e.g. with exchange one at a time); other errors
        are those of exchange."""
        pending: deque[tuple[int, str, MsgType]] = deque()
        replies: list[Message] = []
        want = _msg_type(expect)
        for msg in msgs:
            seq = self.send(msg)
            pending.append((seq, f"{msg.TYPE.name} (seq {seq})", msg.TYPE))
            if len(pending) >= window:
                seq, what, asked = pending.popleft()
                replies.append(self._replies(seq, what, want, timeout, asked=asked)[-1])
        replies += [self._replies(seq, what, want, timeout, asked=asked)[-1]
                    for seq, what, asked in pending]
        return replies

    def _first_wait(self, asked: MsgType | None) -> float:
        """Seconds to wait for the answer to a request of type `asked` before sending it
        again."""
        slowest = self._slowest.get(asked) if asked is not None else None
        if slowest is None:
            return self.retry.sample_first if asked in SAMPLE_TYPES else self.retry.first
        return max(self.retry.first, 2 * slowest)

    def _replies(self, seq: int, what: str, want: MsgType, timeout: float,
                 again: Message | None = None, asked: MsgType | None = None,
                 tries: int | None = None) -> list[Message]:
        """The device's replies to request `seq` (of type `asked`) up to the first of type
        `want`; `again`: the request, sent again (Retry) while it is unanswered, else
        LinkTrouble at the first sign of a lost frame."""
        replies: list[Message] = []
        line_errors: list[str] = []
        asked = again.TYPE if again is not None else asked
        start = sent = time.monotonic()
        deadline = start + timeout
        wait = self._first_wait(asked)
        due = sent + wait
        retries = 0
        while (now := time.monotonic()) < deadline:
            if now >= due:
                self.payload = max(self.retry.smallest_payload, self.payload // 2)
                if again is None or (tries is not None and retries + 1 >= tries):
                    raise LinkTrouble(f"no answer to {what} in {now - start:.2f} s")
                self._write(again, seq, again=True)
                retries += 1
                self.stats.retried += 1
                sent, wait = now, min(2 * wait, max(self.retry.longest, wait))
                due = sent + wait
            garbled = self._garbled
            got = self._next(min(due, deadline) - now)
            if got is None:
                if self._garbled != garbled:  # perhaps our answer
                    if again is None:
                        raise LinkTrouble(f"a frame garbled on the line while waiting for {what}")
                    due = min(due, max(sent + self.retry.soon, time.monotonic()))
                continue
            if isinstance(got.msg, Log):
                self._log(got.msg.text)
            elif got.seq == seq and isinstance(got.msg, Error):
                raise DeviceError(f"device on {self.name} rejected {what}: "
                                  f"{describe(got.msg.code, got.msg.text)}", got.msg.code)
            elif got.seq == seq:
                replies.append(got.msg)
                if got.msg.TYPE == want:
                    took = time.monotonic() - sent
                    if retries == 0:
                        self.payload = min(MAX_PAYLOAD, self.payload * 2)
                        if asked is not None:
                            self._slowest[asked] = max(self._slowest.get(asked, 0.0), took)
                    if retries:
                        self._answered.append(seq)
                    return replies
            elif isinstance(got.msg, Error) and got.seq == 0:
                # The device could not read some frame (CRC, framing): perhaps ours.
                line_errors.append(describe(got.msg.code, got.msg.text))
                if again is None:
                    raise LinkTrouble(f"the device could not read a frame ({line_errors[-1]})")
                due = min(due, max(sent + self.retry.soon, time.monotonic()))
            elif isinstance(got.msg, Ready) and want != MsgType.READY and got.seq == 0:
                raise DeviceError(
                    f"device on {self.name} restarted while waiting for the answer to {what}: "
                    f"it sent READY; check its power supply and the log for a fault"
                )
            else:
                self.stats.stale += 1
        hint = (
            f"; it reported frames it could not read ({'; '.join(line_errors[-3:])}): "
            "check the link speed and cable"
            if line_errors
            else "; check that the board runs tinyprop firmware and nothing else uses the port"
        )
        raise DeviceError(
            f"device on {self.name} stopped answering after {timeout:g} s: "
            f"no {want.name} for {what}{hint}"
        )

    def request(
        self, msg: Message, expect: type[Message] | int, timeout: float = DEFAULT_TIMEOUT,
        tries: int | None = None,
    ) -> Message:
        """Send `msg` and return the device's reply of type `expect` (see exchange)."""
        return self.exchange(msg, expect, timeout, tries)[-1]

    def _log(self, text: str) -> None:
        if self.on_log is not None:
            self.on_log(text)
        else:
            self.logs.append(text)

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_link(
    spec: str,
    baudrate: int = DEFAULT_BAUDRATE,
    on_log: Callable[[str], None] | None = None,
) -> Link:
    """Open a link from a string: a pyserial port or URL, or exec:COMMAND (see module doc)."""
    if spec.startswith("exec:"):
        argv = shlex.split(spec[len("exec:") :])
        if not argv:
            raise TinypropError(f"link {spec!r}: no command after exec:; e.g. exec:build/tp-host")
        try:
            process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        except OSError as exc:
            raise TinypropError(
                f"link {spec!r}: cannot start {argv[0]} ({exc.strerror}); build the host board "
                "first or give the path to its executable"
            ) from None
        return Link(PipeTransport(process, spec, owned=True), on_log)
    try:
        port = serial.serial_for_url(spec, baudrate=baudrate, timeout=0)
    except (serial.SerialException, ValueError, OSError) as exc:
        raise TinypropError(
            f"link {spec!r}: cannot open it ({exc}); give {LINK_FORMS}, and check the device is "
            "connected and no other program holds the port"
        ) from None
    return Link(SerialTransport(port, spec), on_log)
