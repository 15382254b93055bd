"""PlatformIO device-monitor filter: shows tinyprop's binary frames as readable lines.

    ; platformio.ini
    monitor_speed = 115200
    monitor_encoding = latin-1     ; required: every byte must reach the filter unchanged
    monitor_filters = tinyprop

    $ pio device monitor
    READY board nano33ble, SRAM 262144 B, arena 103000 B, blob 0x1234abcd, firmware 0.1.0, ...
    step 12 loss 0.406 label person pred person ok | 1234567 us | arena 96512 B stack 3100 B ...

PlatformIO decodes serial bytes to text with `monitor_encoding` before any filter runs. The
default, UTF-8, replaces bytes that are not valid UTF-8 with U+FFFD, so binary frames cannot be
recovered from its output; latin-1 maps each byte to one character and back, losslessly. The
filter turns the text back into bytes with latin-1 and, if it sees characters latin-1 cannot
hold, says once that the encoding is wrong. List no other filter before this one.

PlatformIO runs this file in its own Python, where the tinyprop package is not installed, so
the frame format is restated here (docs/protocol.md); tests/test_monitor_filter.py checks it
against the shared vectors. ERROR's status names are read from
firmware/include/tp_status.h. Without PlatformIO (tests) a plain base class stands in.
"""

from __future__ import annotations

import os
import re
import struct
import zlib
from pathlib import Path

try:
    from platformio.public import DeviceMonitorFilterBase
except ImportError:  # not inside PlatformIO: keep the decoding importable and testable

    class DeviceMonitorFilterBase:  # type: ignore[no-redef]
        def __init__(self, options: dict | None = None) -> None:
            self.options = options or {}

        def __call__(self) -> DeviceMonitorFilterBase:
            return self


MAX_BODY = 1033  # type, seq, length, 1024 payload bytes, CRC32 (docs/protocol.md)
MAX_WIRE = 2 * 1040  # wire bytes beyond which a frame cannot be legal
COUNTER_UNITS = {0: "instructions", 1: "us", 2: "cycles"}


def _status_names() -> dict[int, str]:
    """ERROR codes are tp_status values: their names from the one table of them, the C header
    beside this folder (in the repository, or in tinyprop's bundled copy); none without it."""
    here = globals().get("__file__")
    if here is None:
        return {}
    header = Path(here).resolve().parents[1] / "firmware" / "include" / "tp_status.h"
    try:
        text = header.read_text()
    except OSError:
        return {}
    rows = re.findall(r"\bX\(\s*(\w+),\s*(0x[0-9A-Fa-f]+),", text)
    return {int(code, 16): name for name, code in rows}


ERROR_NAMES = _status_names()
TYPE_NAMES = {
    0x01: "HELLO", 0x05: "INPUT_CHUNK",
    0x06: "TRAIN", 0x07: "EVAL", 0x08: "SET_HPARAMS", 0x09: "PULL_PARAMS", 0x0A: "PUSH_PARAMS",
    0x0B: "SAVE_PARAMS", 0x0C: "RESET", 0x0D: "BULK_OPEN", 0x0E: "BULK_SAMPLE", 0x0F: "LABEL",
    0x10: "GET_FRAME", 0x81: "READY", 0x82: "ACK", 0x83: "METRIC", 0x84: "OUTPUT",
    0x85: "PARAMS", 0x86: "ERROR", 0x87: "LOG", 0x88: "SEEN", 0x89: "THUMB",
}
# Fixed-size leading fields of the device messages this filter shows. READY's depend on the
# protocol version (byte 18): version 2 adds free RAM, largest and second block before the name.
READY_V1 = struct.Struct("<IIIIHBB")
READY = struct.Struct("<IIIIHBBIII")
ACK = struct.Struct("<BI")
METRIC = struct.Struct("<IfIIIIIBBBB")
PARAMS = struct.Struct("<I")
ERROR = struct.Struct("<H")
SEEN = struct.Struct("<III")
THUMB = struct.Struct("<IIBBB")


def error_name(code: int) -> str:
    return ERROR_NAMES.get(code, f"0x{code:04x}")


def cobs_decode(data: bytes) -> bytes | None:
    out = bytearray()
    i = 0
    while i < len(data):
        code = data[i]
        if i + code > len(data):
            return None
        out += data[i + 1 : i + code]
        i += code
        if code != 0xFF and i < len(data):
            out.append(0)
    return bytes(out)


class FrameReader:
    """Bytes in, readable lines out; frames may arrive split anywhere."""

    def __init__(self, class_names: list[str] | None = None) -> None:
        self.class_names = class_names or ["non_person", "person"]  # the VWW model's labels
        self.unit = "counter"  # until a READY names it
        self._buf = bytearray()
        self._overflow = 0

    def feed(self, data: bytes) -> list[str]:
        lines = []
        *complete, rest = bytes(data).split(b"\0")
        for i, piece in enumerate(complete):
            wire = (self._buf + piece) if i == 0 else piece
            dropped = self._overflow if i == 0 else 0
            if i == 0:
                self._buf.clear()
                self._overflow = 0
            if wire or dropped:
                lines.append(self._frame(bytes(wire), dropped))
        self._buf += rest
        if len(self._buf) > MAX_WIRE:  # no delimiter for too long: not a frame, drop it
            self._overflow += len(self._buf)
            self._buf.clear()
        return lines

    def _frame(self, wire: bytes, dropped: int) -> str:
        body = None if dropped else cobs_decode(wire)
        skipped = f"[tinyprop: skipped {len(wire) + dropped + 1} bytes: "
        if body is None or not 9 <= len(body) <= MAX_BODY or struct.unpack_from("<H", body, 3)[0] != len(body) - 9:
            return skipped + "not a frame]"
        if zlib.crc32(body[:-4]) != struct.unpack_from("<I", body, len(body) - 4)[0]:
            return skipped + "bad CRC]"
        msg_type, seq = struct.unpack_from("<BH", body)
        if msg_type not in TYPE_NAMES:
            return skipped + f"unknown type 0x{msg_type:02x}]"
        try:
            return self._describe(msg_type, seq, body[5:-4])
        except struct.error:
            return f"[tinyprop: {TYPE_NAMES[msg_type]} (seq {seq}) with a malformed payload]"

    def _label(self, index: int) -> str:
        if index == 0xFF:
            return "-"
        return self.class_names[index] if index < len(self.class_names) else str(index)

    def _describe(self, msg_type: int, seq: int, payload: bytes) -> str:
        if msg_type == 0x81:
            fixed = READY_V1 if len(payload) > 18 and payload[18] == 1 else READY
            sram, arena, blob, fw, max_payload, proto, unit, *room = fixed.unpack_from(payload)
            self.unit = COUNTER_UNITS.get(unit, f"unit {unit}")
            board = payload[fixed.size :].decode("utf-8", "replace")
            free = (f", free RAM {room[0]} B (largest block {room[1]} B, second {room[2]} B)"
                    if room and room[0] != 0xFFFFFFFF else "")
            return (
                f"READY board {board}, SRAM {sram} B, arena {arena} B, blob 0x{blob:08x}, "
                f"firmware {fw >> 16}.{fw >> 8 & 0xFF}.{fw & 0xFF}, protocol {proto}, "
                f"counter {self.unit}, max payload {max_payload} B{free}"
            )
        if msg_type == 0x83:
            if len(payload) != METRIC.size:
                raise struct.error("METRIC size")
            step, loss, counter, arena, stack, trainable, static, label, pred, correct, flags = (
                METRIC.unpack(payload)
            )
            verdict = {0: "wrong", 1: "ok"}.get(correct, "?")
            kind = "eval" if flags & 0x02 else "replay step" if flags & 0x04 else "step"
            skipped = " (update skipped)" if flags & 0x01 else ""
            return (
                f"{kind} {step} loss {loss:.3g} label {self._label(label)} "
                f"pred {self._label(pred)} {verdict}{skipped} | {counter} {self.unit} | "
                f"arena {arena} B stack {stack} B trainable {trainable} B static {static} B"
            )
        if msg_type == 0x86:
            (code,) = ERROR.unpack_from(payload)
            text = payload[ERROR.size :].decode("utf-8", "replace")
            return f"ERROR {error_name(code)} (seq {seq}): {text}"
        if msg_type == 0x87:
            return "log: " + payload.decode("utf-8", "replace")
        if msg_type == 0x82:
            acked, value = ACK.unpack(payload)
            return f"ack {TYPE_NAMES.get(acked, hex(acked))} {value} (seq {seq})"
        if msg_type == 0x84:
            return f"output {list(struct.unpack(f'{len(payload)}b', payload))} (seq {seq})"
        if msg_type == 0x85:
            (offset,) = PARAMS.unpack_from(payload)
            return f"params at {offset}: {len(payload) - PARAMS.size} B (seq {seq})"
        if msg_type == 0x88:  # the learn app took a camera frame
            frame, capture, prep = SEEN.unpack(payload)
            return f"frame {frame}: capture {capture} {self.unit}, fit {prep} {self.unit}"
        if msg_type == 0x89:
            frame, offset, width, height, channels = THUMB.unpack_from(payload)
            return (f"thumbnail of frame {frame} ({width}x{height}x{channels}) at {offset}: "
                    f"{len(payload) - THUMB.size} B (seq {seq})")
        return f"{TYPE_NAMES[msg_type]} (seq {seq}), {len(payload)} B payload"  # host frames


class TinypropFilter(DeviceMonitorFilterBase):
    """`monitor_filters = tinyprop`. Class names for METRIC labels come from the environment
    variable TINYPROP_CLASSES (comma-separated, index order), default the VWW model's."""

    NAME = "tinyprop"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        names = os.environ.get("TINYPROP_CLASSES")
        self.reader = FrameReader(names.split(",") if names else None)
        self._warned = False

    def rx(self, text: str) -> str:
        data = text.encode("latin-1", errors="replace")
        lines = []
        if not self._warned and any(ord(c) > 0xFF for c in text):
            self._warned = True
            lines.append(
                "[tinyprop: the monitor decodes with an encoding other than latin-1, so frames "
                "are lost; set monitor_encoding = latin-1 in platformio.ini]"
            )
        lines += self.reader.feed(data)
        return "".join(line + "\n" for line in lines)

    def tx(self, text: str) -> str:
        return text
