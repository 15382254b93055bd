"""The protocol in Python (tinyprop.device.protocol) and C (firmware/proto/tp_proto.c) against the
shared vectors in tests/vectors/protocol.json, plus properties of the streaming decoders."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tinyprop.device import protocol as p
from tinyprop.device.firmware import build_program

ROOT = Path(__file__).resolve().parents[1]
VECTORS_PATH = ROOT / "tests" / "vectors" / "protocol.json"
VECTORS = json.loads(VECTORS_PATH.read_text(encoding="utf-8"))
HEADER = ROOT / "firmware" / "include" / "tp_proto.h"
# the protocol module and the one core file it uses (the CRC)
PROTO_SOURCES = [ROOT / "firmware" / "proto" / "tp_proto.c",
                 ROOT / "firmware" / "core" / "tp_crc32.c"]
CFLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror"]


def message_of(vector: dict) -> p.Message:
    cls = p.MESSAGE_CLASSES[p.MsgType(vector["type"])]
    values = dict(vector["fields"])
    if cls.TAIL == "bytes":
        *_, last = values
        values[last] = bytes.fromhex(values[last])
    return cls(**values)


def results_as_json(results: list) -> list:
    out = []
    for r in results:
        if isinstance(r, p.Frame):
            out.append({"frame": {"type": r.type, "seq": r.seq, "payload": r.payload.hex()}})
        else:
            fault = {"fault": r.fault.name, "size": r.size}
            if r.type is not None:
                fault |= {"type": r.type, "seq": r.seq}
            out.append(fault)
    return out


# ---- Python ----


def test_vectors_file_is_what_the_generator_writes() -> None:
    sys.path.insert(0, str(VECTORS_PATH.parent))
    try:
        import gen_protocol
    finally:
        sys.path.pop(0)
    assert gen_protocol.render() == VECTORS_PATH.read_text(encoding="utf-8"), (
        "tests/vectors/protocol.json is stale: run .venv/bin/python tests/vectors/gen_protocol.py"
    )


def test_vectors_cover_every_message_type() -> None:
    assert {v["type"] for v in VECTORS["messages"]} == {int(t) for t in p.MsgType}


@pytest.mark.parametrize("vector", VECTORS["messages"], ids=lambda v: f"{v['name']}-{v['seq']}")
def test_python_message_vectors(vector: dict) -> None:
    msg = message_of(vector)
    assert msg.pack().hex() == vector["payload"]
    wire = p.encode(msg, vector["seq"])
    assert wire.hex() == vector["wire"]
    assert wire.count(0) == 1 and wire.endswith(b"\0")
    (frame,) = p.FrameDecoder().feed(wire)
    assert (frame.type, frame.seq) == (vector["type"], vector["seq"])
    assert frame.message() == msg


@pytest.mark.parametrize("stream", VECTORS["streams"], ids=lambda s: s["name"])
@pytest.mark.parametrize("chunk", [1, 2, 7, 254, 1 << 20])
def test_python_stream_vectors(stream: dict, chunk: int) -> None:
    data = bytes.fromhex(stream["wire"])
    decoder = p.FrameDecoder()
    results = []
    for i in range(0, len(data), chunk):
        results += decoder.feed(data[i : i + chunk])
    assert results_as_json(results) == stream["expect"]


@pytest.mark.parametrize("case", VECTORS["bad_payloads"], ids=lambda c: f"{c['type']}")
def test_python_rejects_bad_payloads(case: dict) -> None:
    frame = p.Frame(case["type"], 1, bytes.fromhex(case["payload"]))
    with pytest.raises(p.ProtocolError):
        frame.message()


def test_cobs_known_answers() -> None:
    # The examples of Cheshire & Baker's paper, as listed on Wikipedia.
    cases = {
        b"\x00": b"\x01\x01",
        b"\x00\x00": b"\x01\x01\x01",
        b"\x11\x22\x00\x33": b"\x03\x11\x22\x02\x33",
        b"\x11\x00\x00\x00": b"\x02\x11\x01\x01\x01",
        bytes(range(1, 255)): b"\xff" + bytes(range(1, 255)),
        bytes(range(255)): b"\x01\xff" + bytes(range(1, 255)),
        bytes(range(1, 256)): b"\xff" + bytes(range(1, 255)) + b"\x02\xff",
    }
    for raw, encoded in cases.items():
        assert p.cobs_encode(raw) == encoded
        assert p.cobs_decode(encoded) == (raw, True)


def test_pack_errors_name_the_message() -> None:
    with pytest.raises(p.ProtocolError, match="Train"):
        p.Train(300).pack()
    with pytest.raises(p.ProtocolError, match="smaller chunks"):
        p.InputChunk(0, bytes(p.MAX_CHUNK + 1)).pack()
    with pytest.raises(p.ProtocolError, match="BULK_OPEN"):
        p.BulkOpen("")


def _header_enum(prefix: str) -> dict[str, int]:
    text = HEADER.read_text(encoding="utf-8")
    return {m[1]: int(m[2], 0) for m in re.finditer(rf"\b{prefix}(\w+) = (0x[0-9A-Fa-f]+)", text)}


def test_c_header_and_python_enums_agree() -> None:
    assert _header_enum("TP_MSG_") == {t.name: int(t) for t in p.MsgType}


frames = st.builds(
    lambda t, seq, payload: (t, seq, payload),
    st.sampled_from(list(p.MsgType)),
    st.integers(0, 0xFFFF),
    st.binary(max_size=p.MAX_PAYLOAD),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=40), frames), max_size=4), st.integers(1, 300))
def test_python_decoder_recovers_frames_after_garbage(pieces: list, chunk: int) -> None:
    # Each frame is preceded by garbage and a delimiter: whatever the garbage, the frame after
    # it comes out intact, and the garbage is reported, never silently taken for a frame.
    data = b"".join(g + b"\0" + p.encode_frame(*f) for g, f in pieces)
    decoder = p.FrameDecoder()
    results = []
    for i in range(0, len(data), chunk):
        results += decoder.feed(data[i : i + chunk])
    frames_out = [(r.type, r.seq, r.payload) for r in results if isinstance(r, p.Frame)]
    assert frames_out == [f for _, f in pieces]
    assert all(r.size >= 2 for r in results if isinstance(r, p.BadFrame))


# ---- C, against the same vectors ----


@pytest.fixture(scope="module")
def c_driver() -> Path:
    return build_program(ROOT / "tests" / "c" / "test_proto_vectors.c", sanitize=True)


def run_c(exe: Path, commands: list[str]) -> list[str]:
    proc = subprocess.run(
        [str(exe)], input="\n".join(commands) + "\n", capture_output=True, text=True,
        timeout=60, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.splitlines()


def value_text(v: object) -> str:
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, str):
        return v.encode("utf-8").hex()
    if isinstance(v, float):
        return format(v, ".9g")
    return str(int(v))


def c_result_line(e: dict) -> str:
    if "frame" in e:
        f = e["frame"]
        return f"frame {f['type']} {f['seq']} {f['payload']}"
    extra = f" {e['type']} {e['seq']}" if "type" in e else ""
    return f"fault {e['fault']}{extra}"


def test_c_limits_match_python(c_driver: Path) -> None:
    assert run_c(c_driver, ["limits"]) == [f"limits {p.MAX_PAYLOAD} {p.MAX_BODY} {p.MAX_FRAME}"]


def test_c_max_payload_for_a_buffer(c_driver: Path) -> None:
    caps = range(p.MAX_FRAME + 3)
    lines = run_c(c_driver, [f"maxpayload {cap}" for cap in caps])
    for cap, line in zip(caps, lines, strict=True):
        n = int(line.split()[1])
        if cap < p.wire_size(p.OVERHEAD):
            assert n == 0
        else:  # the largest payload whose frame fits, at most MAX_PAYLOAD
            assert p.wire_size(n + p.OVERHEAD) <= cap
            assert n == p.MAX_PAYLOAD or p.wire_size(n + 1 + p.OVERHEAD) > cap


def test_c_counter_unit_names(c_driver: Path) -> None:
    names = ["instructions", "us", "cycles", "ms"]
    assert run_c(c_driver, [f"unit {n}" for n in names]) == [
        f"unit {int(p.CounterUnit.INSTRUCTIONS)}", f"unit {int(p.CounterUnit.MICROSECONDS)}",
        f"unit {int(p.CounterUnit.CYCLES)}", "fault TP_ERR_ARG",
    ]


def test_c_decodes_stream_vectors_in_any_chunking(c_driver: Path) -> None:
    commands, expected = [], []
    for stream in VECTORS["streams"]:
        lines = [c_result_line(e) for e in stream["expect"]] + ["end"]
        for chunk in (1, 2, 7, 254, 1 << 20):
            commands.append(f"decode {chunk} {stream['wire']}")
            expected += lines
    assert run_c(c_driver, commands) == expected


def test_c_decodes_and_unpacks_message_vectors(c_driver: Path) -> None:
    commands, expected = [], []
    for v in VECTORS["messages"]:
        commands.append(f"decode 1 {v['wire']}")
        expected += [f"frame {v['type']} {v['seq']} {v['payload']}", "end"]
        if v["type"] in p.HOST_TO_DEVICE:
            commands.append(f"unpack {v['type']} {v['payload']}")
            fields = p.message_fields(message_of(v))
            expected.append(" ".join(["ok", *(f"{k}={value_text(x)}" for k, x in fields.items())]))
    assert run_c(c_driver, commands) == expected


def test_c_encodes_device_message_vectors(c_driver: Path) -> None:
    commands, expected = [], []
    for v in VECTORS["messages"]:
        if v["type"] in p.DEVICE_TO_HOST:
            fields = p.message_fields(message_of(v))
            tokens = " ".join(f"{k}={value_text(x)}" for k, x in fields.items())
            commands.append(f"encode {v['type']} {v['seq']} {tokens}")
            expected.append(f"wire {v['wire']}")
    assert run_c(c_driver, commands) == expected


def test_c_rejects_bad_payloads(c_driver: Path) -> None:
    cases = VECTORS["bad_payloads"]
    lines = run_c(c_driver, [f"unpack {c['type']} {c['payload']}" for c in cases])
    assert lines == [f"fault {c['c']}" for c in cases]


def test_c_encoder_limits(c_driver: Path) -> None:
    long_text = ("x" * 2000).encode().hex()
    lines = run_c(c_driver, [
        f"encode {p.MsgType.LOG} 5 text={long_text}",
        f"encode {p.MsgType.ERROR} 5 code=16 text={long_text}",
        f"encode {p.MsgType.PARAMS} 5 offset=0 data={bytes(p.MAX_CHUNK + 1).hex()}",
        f"encode {p.MsgType.OUTPUT} 5 data={bytes(p.MAX_PAYLOAD).hex()}",
    ])
    # Texts are cut to the payload limit; byte tails are refused instead.
    log = p.FrameDecoder().feed(bytes.fromhex(lines[0].split()[1]))[0].message()
    assert log == p.Log("x" * p.MAX_PAYLOAD)
    err = p.FrameDecoder().feed(bytes.fromhex(lines[1].split()[1]))[0].message()
    assert err == p.Error(16, "x" * (p.MAX_PAYLOAD - 2))
    assert lines[2] == "fault TP_ERR_ARG"
    assert lines[3].startswith("wire ")


def test_c_builds_for_cortex_m4(tmp_path: Path) -> None:
    subprocess.run(
        ["arm-none-eabi-gcc", *CFLAGS, "-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard",
         "-mfpu=fpv4-sp-d16", "-Os", f"-I{ROOT / 'firmware' / 'include'}", "-c",
         str(PROTO_SOURCES[0]), "-o", str(tmp_path / "tp_proto.o")],
        check=True,
    )


def test_ready_of_a_version_1_device_still_reads() -> None:
    """Protocol 2 put free RAM before READY's board name; a host reads both layouts by the
    version byte, and refuses a version it does not know."""
    v1 = p.Ready(262144, 1000, 7, 0x000100, 1024, 1, p.CounterUnit.MICROSECONDS, "old-board")
    payload = v1.pack()
    assert len(payload) == 20 + len("old-board")
    back = p.Frame(p.MsgType.READY, 0, payload).message()
    assert back == v1 and back.free_bytes is None and back.board == "old-board"
    unknown = p.Ready(1, 2, 3, 4, 5, 2, 0, "mpy", None, None, None).pack()
    assert unknown[20:32] == b"\xff" * 12  # RAM_UNKNOWN: not measured
    assert p.Ready.unpack(unknown).free_bytes is None
    with pytest.raises(p.ProtocolError, match="update tinyprop"):
        p.Ready.unpack(payload[:18] + bytes([p.PROTOCOL_VERSION + 1]) + payload[19:])
