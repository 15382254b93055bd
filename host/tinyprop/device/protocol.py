"""The serial protocol between host and device: frames and messages (docs/protocol.md).

A frame body is type u8, seq u16, payload length u16, payload, CRC32 of all that; COBS-encoded
and ended by one 0x00 on the wire. firmware/proto/tp_proto.c is the C twin; both are checked against
tests/vectors/protocol.json. Every message is a dataclass whose fixed-size fields come first
(one `struct` format) and whose optional last field is a variable tail (bytes or UTF-8 text).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import astuple, dataclass, fields
from enum import IntEnum, IntFlag
from typing import ClassVar

from ..status import Status

PROTOCOL_VERSION = 3
# READY's fixed fields by protocol version (the board name follows them); other messages are the
# same in all. A host reads version 1 to 3 devices; version 3 made ERROR's code a tp_status
# (tinyprop.status), so an older device's codes are named wrongly: re-flash it.
READY_FIXED = {1: struct.Struct("<IIIIHBB"), 2: struct.Struct("<IIIIHBBIII"),
               3: struct.Struct("<IIIIHBBIII")}
RAM_UNKNOWN = 0xFFFFFFFF  # READY's free RAM fields from a device that does not measure them
MAX_PAYLOAD = 1024
OVERHEAD = 9  # type, seq, length, CRC32
MAX_BODY = MAX_PAYLOAD + OVERHEAD
LABEL_NONE = 0xFF  # EVAL without a label
CORRECT_UNKNOWN = 0xFF  # METRIC.correct when the sample had no label

_HEADER = struct.Struct("<BHH")
_CRC = struct.Struct("<I")


def wire_size(body_len: int) -> int:
    """Upper bound of the wire bytes of a frame whose body has body_len bytes."""
    return body_len + body_len // 254 + 2


MAX_FRAME = wire_size(MAX_BODY)


class MsgType(IntEnum):
    HELLO = 0x01
    # 0x02..0x04 reserved: the model blob is compiled into the firmware (docs/protocol.md)
    INPUT_CHUNK = 0x05
    TRAIN = 0x06
    EVAL = 0x07
    SET_HPARAMS = 0x08
    PULL_PARAMS = 0x09
    PUSH_PARAMS = 0x0A
    SAVE_PARAMS = 0x0B
    RESET = 0x0C
    BULK_OPEN = 0x0D
    BULK_SAMPLE = 0x0E
    LABEL = 0x0F
    GET_FRAME = 0x10
    READY = 0x81
    ACK = 0x82
    METRIC = 0x83
    OUTPUT = 0x84
    PARAMS = 0x85
    ERROR = 0x86
    LOG = 0x87
    SEEN = 0x88
    THUMB = 0x89


class SampleFlags(IntFlag):
    """Flags of TRAIN, EVAL and BULK_SAMPLE."""

    OUTPUT = 0x01  # send OUTPUT (the output tensor) before METRIC


class BulkMode(IntEnum):
    TRAIN = 0
    EVAL = 1


class HparamFlags(IntFlag):
    QAS = 0x01  # quantization-aware scaling of the gradients


class MetricFlags(IntFlag):
    SKIPPED = 0x01  # a gradient was computed but no update applied
    EVAL = 0x02  # an evaluation, not a training step
    REPLAY = 0x04  # a step on a kept camera frame again (the learn app's replay buffer)


class CounterUnit(IntEnum):
    """What METRIC.counter counts (READY.counter_unit)."""

    INSTRUCTIONS = 0
    MICROSECONDS = 1
    CYCLES = 2


class ProtocolError(ValueError):
    """A message that cannot be packed, or a payload that does not fit its type's layout."""


# ---- messages ----


@dataclass(frozen=True)
class Message:
    """Base of all messages. Subclasses set TYPE, FIXED (struct format of the leading fields)
    and TAIL (None, "bytes" or "text": the kind of the last field)."""

    TYPE: ClassVar[MsgType]
    FIXED: ClassVar[struct.Struct] = struct.Struct("<")
    TAIL: ClassVar[str | None] = None

    def pack(self) -> bytes:
        values = astuple(self)
        tail = b""
        if self.TAIL is not None:
            *values, last = values
            tail = last.encode("utf-8") if self.TAIL == "text" else bytes(last)
        try:
            payload = self.FIXED.pack(*values) + tail
        except struct.error as exc:
            raise ProtocolError(f"{self!r}: a field does not fit its wire type ({exc})") from None
        if len(payload) > MAX_PAYLOAD:
            raise ProtocolError(
                f"{type(self).__name__}: payload of {len(payload)} bytes exceeds {MAX_PAYLOAD}; "
                "send the data in smaller chunks"
            )
        return payload

    @classmethod
    def unpack(cls, payload: bytes) -> Message:
        size = cls.FIXED.size
        if len(payload) < size or (cls.TAIL is None and len(payload) != size):
            expected = f"{size}" if cls.TAIL is None else f"at least {size}"
            raise ProtocolError(
                f"{cls.TYPE.name} payload has {len(payload)} bytes, expected {expected}"
            )
        values = list(cls.FIXED.unpack_from(payload))
        if cls.TAIL == "text":
            values.append(payload[size:].decode("utf-8", errors="replace"))
        elif cls.TAIL == "bytes":
            values.append(bytes(payload[size:]))
        return cls(*values)


@dataclass(frozen=True)
class Hello(Message):
    TYPE = MsgType.HELLO


@dataclass(frozen=True)
class InputChunk(Message):
    TYPE = MsgType.INPUT_CHUNK
    FIXED = struct.Struct("<I")
    TAIL = "bytes"
    offset: int
    data: bytes


@dataclass(frozen=True)
class Train(Message):
    TYPE = MsgType.TRAIN
    FIXED = struct.Struct("<BB")
    label: int
    flags: int = 0


@dataclass(frozen=True)
class Eval(Message):
    TYPE = MsgType.EVAL
    FIXED = struct.Struct("<BB")
    label: int = LABEL_NONE
    flags: int = 0


@dataclass(frozen=True)
class SetHparams(Message):
    TYPE = MsgType.SET_HPARAMS
    FIXED = struct.Struct("<ffII")
    lr: float
    momentum: float = 0.0
    seed: int = 0
    flags: int = HparamFlags.QAS


@dataclass(frozen=True)
class PullParams(Message):
    TYPE = MsgType.PULL_PARAMS
    FIXED = struct.Struct("<IH")
    offset: int
    max_len: int = MAX_PAYLOAD - 4


@dataclass(frozen=True)
class PushParams(Message):
    TYPE = MsgType.PUSH_PARAMS
    FIXED = struct.Struct("<I")
    TAIL = "bytes"
    offset: int
    data: bytes


@dataclass(frozen=True)
class SaveParams(Message):
    TYPE = MsgType.SAVE_PARAMS


@dataclass(frozen=True)
class Reset(Message):
    TYPE = MsgType.RESET


@dataclass(frozen=True)
class BulkOpen(Message):
    TYPE = MsgType.BULK_OPEN
    TAIL = "text"
    path: str

    def __post_init__(self) -> None:
        # The board opens it as a C string.
        if not self.path or "\0" in self.path:
            raise ProtocolError(f"BULK_OPEN path {self.path!r}: must be non-empty, without NUL")


@dataclass(frozen=True)
class BulkSample(Message):
    TYPE = MsgType.BULK_SAMPLE
    FIXED = struct.Struct("<IBB")
    index: int
    mode: int = BulkMode.TRAIN
    flags: int = 0


@dataclass(frozen=True)
class Label(Message):
    """The learn app's latest camera frame is of class `label` (a key pressed on the host)."""

    TYPE = MsgType.LABEL
    FIXED = struct.Struct("<B")
    label: int


@dataclass(frozen=True)
class GetFrame(Message):
    """Send the latest camera frame's THUMB now, then every `every`-th frame's (0: only now)."""

    TYPE = MsgType.GET_FRAME
    FIXED = struct.Struct("<H")
    every: int = 0


@dataclass(frozen=True)
class Ready(Message):
    """The device's greeting. Version 2 adds the RAM it has for a blob's arena and params record:
    all of it, the largest block one of them can have and the largest left once that one is
    taken (None: not measured, RAM_UNKNOWN on the wire, or a version 1 device). On the wire
    they come before the board name, so pack/unpack follow READY_FIXED[protocol_version]."""

    TYPE = MsgType.READY
    FIXED = READY_FIXED[PROTOCOL_VERSION]
    TAIL = "text"
    sram_bytes: int
    arena_bytes: int
    blob_id: int
    fw_version: int  # major << 16 | minor << 8 | patch
    max_payload: int
    protocol_version: int
    counter_unit: int
    board: str
    free_bytes: int | None = None
    largest_block: int | None = None
    second_block: int | None = None

    def pack(self) -> bytes:
        fixed = READY_FIXED.get(self.protocol_version)
        if fixed is None:
            raise ProtocolError(f"READY of protocol version {self.protocol_version}: "
                                f"this host knows versions {sorted(READY_FIXED)}")
        values = astuple(self)[:7]
        if self.protocol_version >= 2:
            values += tuple(RAM_UNKNOWN if v is None else v
                            for v in (self.free_bytes, self.largest_block, self.second_block))
        try:
            return fixed.pack(*values) + self.board.encode("utf-8")
        except struct.error as exc:
            raise ProtocolError(f"{self!r}: a field does not fit its wire type ({exc})") from None

    @classmethod
    def unpack(cls, payload: bytes) -> Ready:
        version = payload[18] if len(payload) > 18 else 1  # too short: reported below
        fixed = READY_FIXED.get(version)
        if fixed is None:
            raise ProtocolError(f"READY of protocol version {version}: this host knows versions "
                                f"{sorted(READY_FIXED)}; update tinyprop")
        if len(payload) < fixed.size:
            raise ProtocolError(f"READY payload has {len(payload)} bytes, expected at least "
                                f"{fixed.size}")
        values = fixed.unpack_from(payload)
        board = payload[fixed.size :].decode("utf-8", errors="replace")
        room = [None if v == RAM_UNKNOWN else v for v in values[7:]] if version >= 2 \
            else (None, None, None)
        return cls(*values[:7], board, *room)


@dataclass(frozen=True)
class Ack(Message):
    TYPE = MsgType.ACK
    FIXED = struct.Struct("<BI")
    acked_type: int
    value: int = 0


@dataclass(frozen=True)
class Metric(Message):
    TYPE = MsgType.METRIC
    FIXED = struct.Struct("<IfIIIIIBBBB")
    step: int
    loss: float
    counter: int
    arena_peak: int
    stack_peak: int
    trainable_bytes: int
    static_bytes: int
    label: int
    prediction: int
    correct: int
    flags: int = 0


@dataclass(frozen=True)
class Output(Message):
    TYPE = MsgType.OUTPUT
    TAIL = "bytes"
    data: bytes


@dataclass(frozen=True)
class Params(Message):
    TYPE = MsgType.PARAMS
    FIXED = struct.Struct("<I")
    TAIL = "bytes"
    offset: int
    data: bytes


@dataclass(frozen=True)
class Error(Message):
    TYPE = MsgType.ERROR
    FIXED = struct.Struct("<H")
    TAIL = "text"
    code: int  # a tp_status (tinyprop.status)
    text: str = ""


@dataclass(frozen=True)
class Log(Message):
    TYPE = MsgType.LOG
    TAIL = "text"
    text: str


@dataclass(frozen=True)
class Seen(Message):
    """The learn app took camera frame `frame`: its capture and preprocessing costs (in the
    READY counter unit); the frame's METRIC follows."""

    TYPE = MsgType.SEEN
    FIXED = struct.Struct("<III")
    frame: int
    capture: int
    prep: int


@dataclass(frozen=True)
class Thumb(Message):
    """A chunk of frame `frame`'s thumbnail: width x height x channels uint8, rows packed, the
    centred crop the model sees; `data` starts at byte `offset` of it."""

    TYPE = MsgType.THUMB
    FIXED = struct.Struct("<IIBBB")
    TAIL = "bytes"
    frame: int
    offset: int
    width: int
    height: int
    channels: int
    data: bytes


MESSAGE_CLASSES: dict[MsgType, type[Message]] = {
    cls.TYPE: cls for cls in Message.__subclasses__()
}
HOST_TO_DEVICE = tuple(t for t in MsgType if t < 0x80)
DEVICE_TO_HOST = tuple(t for t in MsgType if t >= 0x80)
MAX_CHUNK = MAX_PAYLOAD - InputChunk.FIXED.size  # data bytes of a full INPUT/PUSH chunk


def message_fields(msg: Message) -> dict[str, object]:
    """The message's fields by name, in wire order."""
    return {f.name: getattr(msg, f.name) for f in fields(msg)}


# ---- COBS and frames ----


def cobs_encode(data: bytes) -> bytes:
    """COBS without the delimiter; canonical: no empty block after a final full block."""
    out = bytearray()
    segments = bytes(data).split(b"\0")
    for i, segment in enumerate(segments):
        full = 0
        while len(segment) - full >= 254:
            out += b"\xff" + segment[full : full + 254]
            full += 254
        rest = segment[full:]
        if not (i == len(segments) - 1 and full and not rest):
            out.append(len(rest) + 1)
            out += rest
    return bytes(out)


def cobs_decode(data: bytes) -> tuple[bytes, bool]:
    """Decode one COBS-encoded frame (no 0x00 in it). Returns the bytes and whether the last
    block was complete; a block running past the end is bad COBS."""
    out = bytearray()
    i = 0
    while i < len(data):
        code = data[i]
        block = data[i + 1 : i + code]
        out += block
        i += code
        if len(block) < code - 1:
            return bytes(out), False
        if code != 0xFF and i < len(data):
            out.append(0)
    return bytes(out), True


def encode_frame(msg_type: int, seq: int, payload: bytes = b"") -> bytes:
    """The wire bytes of one frame: COBS(body) + 0x00."""
    if len(payload) > MAX_PAYLOAD:
        raise ProtocolError(f"payload of {len(payload)} bytes exceeds {MAX_PAYLOAD}")
    body = _HEADER.pack(msg_type, seq & 0xFFFF, len(payload)) + payload
    return cobs_encode(body + _CRC.pack(zlib.crc32(body))) + b"\0"


def encode(msg: Message, seq: int) -> bytes:
    """The wire bytes of a message."""
    return encode_frame(msg.TYPE, seq, msg.pack())


@dataclass(frozen=True)
class Frame:
    type: int
    seq: int
    payload: bytes

    def message(self) -> Message:
        """The decoded message; ProtocolError if the type is not one of the protocol's (0x02 to
        0x04 are reserved) or the payload does not fit it."""
        try:
            kind = MsgType(self.type)
        except ValueError:
            raise ProtocolError(f"frame type 0x{self.type:02x} is not a message of protocol "
                                f"version {PROTOCOL_VERSION}") from None
        return MESSAGE_CLASSES[kind].unpack(self.payload)


@dataclass(frozen=True)
class BadFrame:
    """Rejected wire bytes: `size` of them including the delimiter; `fault` is the decoder's
    status, as tp_frame_decoder_feed returns it. For TP_ERR_UNKNOWN_TYPE (an intact frame)
    `type` and `seq` are known, else None."""

    fault: Status
    size: int
    type: int | None = None
    seq: int | None = None


_KNOWN_TYPES = frozenset(int(t) for t in MsgType)


def decode_body(body: bytes) -> Frame | BadFrame:
    """Check a COBS-decoded body; `size` of a BadFrame is left 0 for the caller to fill."""
    if len(body) < OVERHEAD:
        return BadFrame(Status.TP_ERR_FRAME_TRUNCATED, 0)
    msg_type, seq, length = _HEADER.unpack_from(body)
    if length + OVERHEAD > len(body):
        return BadFrame(Status.TP_ERR_FRAME_TRUNCATED, 0)
    if length + OVERHEAD < len(body):
        return BadFrame(Status.TP_ERR_LENGTH_MISMATCH, 0)
    if zlib.crc32(body[:-4]) != _CRC.unpack_from(body, len(body) - 4)[0]:
        return BadFrame(Status.TP_ERR_BAD_CRC, 0)
    if msg_type not in _KNOWN_TYPES:
        return BadFrame(Status.TP_ERR_UNKNOWN_TYPE, 0, msg_type, seq)
    return Frame(msg_type, seq, bytes(body[5:-4]))


class FrameDecoder:
    """Streaming decoder: feed any slices of the byte stream, get frames and rejections in
    order. Gives the same results as tp_frame_decoder with a TP_PROTO_MAX_BODY buffer."""

    # Wire bytes past which a frame decodes to more than MAX_BODY bytes whatever they hold
    # (COBS shrinks at most 255 -> 254), so they need not be kept.
    _KEEP = 2 * MAX_FRAME

    def __init__(self) -> None:
        self._buf = bytearray()
        self._dropped = 0  # wire bytes of the current frame discarded as too long

    def feed(self, data: bytes) -> list[Frame | BadFrame]:
        results: list[Frame | BadFrame] = []
        start = 0
        while (end := data.find(b"\0", start)) >= 0:
            self._buf += data[start:end]
            start = end + 1
            if self._buf or self._dropped:
                results.append(self._finish())
        self._buf += data[start:]
        if len(self._buf) > self._KEEP:
            self._dropped += len(self._buf)
            self._buf.clear()
        return results

    def _finish(self) -> Frame | BadFrame:
        size = len(self._buf) + self._dropped + 1
        body, complete = cobs_decode(bytes(self._buf))
        dropped, self._dropped = self._dropped, 0
        self._buf.clear()
        if dropped or len(body) > MAX_BODY:
            return BadFrame(Status.TP_ERR_FRAME_TOO_LONG, size)
        if not complete:
            return BadFrame(Status.TP_ERR_BAD_COBS, size)
        result = decode_body(body)
        if isinstance(result, BadFrame):
            return BadFrame(result.fault, size, result.type, result.seq)
        return result

