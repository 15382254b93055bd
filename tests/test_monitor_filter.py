"""monitor/filter_tinyprop.py, the PlatformIO device-monitor filter, without PlatformIO: frames
split at every byte, garbage between frames, the encoding warning, and its restated tables
against tinyprop.device.protocol and the shared vectors."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from tinyprop.device import protocol as p
from tinyprop.status import Status, status_name

ROOT = Path(__file__).resolve().parents[1]
FILTER_PATH = ROOT / "monitor" / "filter_tinyprop.py"
VECTORS = json.loads((ROOT / "tests" / "vectors" / "protocol.json").read_text(encoding="utf-8"))


def load_filter() -> ModuleType:
    spec = importlib.util.spec_from_file_location("filter_tinyprop", FILTER_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


F = load_filter()

READY = p.Ready(262144, 103000, 0x1234ABCD, 0x000100, 1024, 2, p.CounterUnit.INSTRUCTIONS,
                "qemu-m4", 237568, 237568, 237568)
READY_V1 = p.Ready(262144, 103000, 0x1234ABCD, 0x000100, 1024, 1, p.CounterUnit.INSTRUCTIONS,
                   "qemu-m4")
STREAM = b"".join([
    b"boot noise\xff\x00",
    p.encode(READY, 0),
    p.encode(READY_V1, 0),
    p.encode(p.Metric(12, 0.40625, 1234567, 96512, 3100, 4384, 2048, 1, 1, 1, 0), 7),
    b"\x13\x37",  # glued to the next frame: that frame is lost, the one after is not
    p.encode(p.Log("lost"), 0),
    p.encode(p.Error(Status.TP_ERR_NOT_LOADED, "no model blob in this firmware"), 8),
    p.encode(p.Log("step 1 \u2713"), 0),
    p.encode(p.Metric(13, 2.0, 99, 1, 2, 3, 4, p.LABEL_NONE, 0, 0xFF, p.MetricFlags.EVAL), 9),
    p.encode(p.Metric(14, 0.5, 10, 1, 2, 3, 4, 0, 1, 0, p.MetricFlags.SKIPPED), 10),
])
EXPECTED = [
    "[tinyprop: skipped 12 bytes: not a frame]",
    ("READY board qemu-m4, SRAM 262144 B, arena 103000 B, blob 0x1234abcd, firmware 0.1.0, "
     "protocol 2, counter instructions, max payload 1024 B, free RAM 237568 B (largest block "
     "237568 B, second 237568 B)"),
    ("READY board qemu-m4, SRAM 262144 B, arena 103000 B, blob 0x1234abcd, firmware 0.1.0, "
     "protocol 1, counter instructions, max payload 1024 B"),
    ("step 12 loss 0.406 label person pred person ok | 1234567 instructions | "
     "arena 96512 B stack 3100 B trainable 4384 B static 2048 B"),
    f"[tinyprop: skipped {len(p.encode(p.Log('lost'), 0)) + 2} bytes: not a frame]",
    "ERROR TP_ERR_NOT_LOADED (seq 8): no model blob in this firmware",
    "log: step 1 \u2713",
    ("eval 13 loss 2 label - pred non_person ? | 99 instructions | "
     "arena 1 B stack 2 B trainable 3 B static 4 B"),
    ("step 14 loss 0.5 label non_person pred person wrong (update skipped) | 10 instructions | "
     "arena 1 B stack 2 B trainable 3 B static 4 B"),
]
TEXT = STREAM.decode("latin-1")  # what PlatformIO hands over with monitor_encoding = latin-1


def lines_of(output: str) -> list[str]:
    assert output == "" or output.endswith("\n")
    return output.splitlines()


def test_whole_stream() -> None:
    assert lines_of(F.TinypropFilter().rx(TEXT)) == EXPECTED


def test_split_at_every_byte_boundary() -> None:
    for cut in range(len(TEXT) + 1):
        filt = F.TinypropFilter()
        assert lines_of(filt.rx(TEXT[:cut]) + filt.rx(TEXT[cut:])) == EXPECTED, cut


def test_one_character_at_a_time() -> None:
    filt = F.TinypropFilter()
    assert lines_of("".join(filt.rx(c) for c in TEXT)) == EXPECTED


def test_long_noise_without_delimiter_is_dropped_not_hoarded() -> None:
    filt = F.TinypropFilter()
    assert filt.rx("A" * 10000) == ""
    assert len(filt.reader._buf) <= F.MAX_WIRE
    assert lines_of(filt.rx("\0" + TEXT[12:])) == [
        "[tinyprop: skipped 10001 bytes: not a frame]", *EXPECTED[1:]
    ]


def test_utf8_decoded_input_is_reported_once() -> None:
    filt = F.TinypropFilter()
    text = STREAM.decode("utf-8", errors="replace")  # PlatformIO's default encoding
    out = lines_of(filt.rx(text) + filt.rx(text))
    assert sum("monitor_encoding = latin-1" in line for line in out) == 1


def test_class_names_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINYPROP_CLASSES", "cat,dog")
    out = lines_of(F.TinypropFilter().rx(TEXT))
    assert out[3].startswith("step 12 loss 0.406 label dog pred dog ok")


def test_every_device_message_vector_is_shown() -> None:
    reader = F.FrameReader()
    for v in VECTORS["messages"]:
        (line,) = reader.feed(bytes.fromhex(v["wire"]))
        assert not line.startswith("[tinyprop"), (v["name"], line)


def test_every_rejected_stream_frame_is_reported() -> None:
    for stream in VECTORS["streams"]:
        lines = F.FrameReader().feed(bytes.fromhex(stream["wire"]))
        faults = sum("fault" in e for e in stream["expect"])
        assert sum(line.startswith("[tinyprop: skipped") for line in lines) == faults
        assert len(lines) == len(stream["expect"]), stream["name"]


def test_restated_tables_match_the_protocol_module() -> None:
    assert F.ERROR_NAMES == {int(s): s.name for s in Status}  # both read tp_status.h
    assert F.TYPE_NAMES == {int(t): t.name for t in p.MsgType}
    assert F.COUNTER_UNITS.keys() == {int(u) for u in p.CounterUnit}
    for struct_, cls in [(F.READY, p.Ready), (F.ACK, p.Ack), (F.METRIC, p.Metric),
                         (F.PARAMS, p.Params), (F.ERROR, p.Error), (F.SEEN, p.Seen),
                         (F.THUMB, p.Thumb)]:
        assert struct_.format == cls.FIXED.format
    assert F.MAX_BODY == p.MAX_BODY and F.MAX_WIRE >= 2 * p.MAX_FRAME
    assert F.error_name(0x4242) == status_name(0x4242) == "0x4242"


def test_standalone_without_tinyprop_or_platformio() -> None:
    # PlatformIO loads the file in its own Python: it must not import tinyprop.
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('f', {str(FILTER_PATH)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "assert not any(n.split('.')[0] == 'tinyprop' for n in sys.modules), 'imports tinyprop'\n"
        "assert m.TinypropFilter.NAME == 'tinyprop'\n"
        "assert m.TinypropFilter()() is not None\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)
