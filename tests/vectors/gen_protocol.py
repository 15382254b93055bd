"""Writes tests/vectors/protocol.json: protocol test vectors shared by the Python tests and the C
test program (tests/c/test_proto_vectors.c).

    .venv/bin/python tests/vectors/gen_protocol.py

The expected results come from host/tinyprop/device/protocol.py; the C implementation is checked
against them, and tests/test_protocol.py checks that this script reproduces the file byte for
byte, so a layout change is one edit here plus a regeneration.
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

from tinyprop.device import protocol as p
from tinyprop.status import Status

OUT = Path(__file__).with_name("protocol.json")


def pattern(n: int, salt: int = 0) -> bytes:
    """Deterministic bytes with zeros and 0xFF sprinkled in, to exercise COBS."""
    return bytes((i * 37 + salt * 101 + (i >> 3)) & 0xFF for i in range(n))


def messages() -> list[tuple[int, p.Message]]:
    """(seq, message): every type, plus size and value extremes."""
    m = p.MetricFlags
    return [
        (1, p.Hello()),
        (3, p.InputChunk(0, pattern(p.MAX_CHUNK))),  # the largest legal frame
        (4, p.InputChunk(27647, b"")),
        (0x0100, p.InputChunk(26624, pattern(700, 1))),  # seq with a zero byte
        (7, p.Train(1)),
        (8, p.Train(0, p.SampleFlags.OUTPUT)),
        (9, p.Eval()),
        (10, p.Eval(1, p.SampleFlags.OUTPUT)),
        (11, p.SetHparams(0.0078125, 0.875, 42, p.HparamFlags.QAS)),
        (12, p.SetHparams(-2.5, 0.0, 0xFFFFFFFF, 0)),
        (13, p.PullParams(4096)),
        (14, p.PullParams(0xFFFFFFFF, 0)),
        (15, p.PushParams(8, pattern(300, 2))),
        (16, p.SaveParams()),
        (17, p.Reset()),
        (18, p.BulkOpen("vww-mini/train.bin")),
        (19, p.BulkOpen("donn\u00e9es/\u00e9t\u00e9.bin")),
        (20, p.BulkSample(396, p.BulkMode.EVAL, p.SampleFlags.OUTPUT)),
        # a static board (one region), a heap board (its blocks)
        (0, p.Ready(262144, 103000, 0x1234ABCD, 0x000100, 1024, p.PROTOCOL_VERSION,
                    p.CounterUnit.INSTRUCTIONS, "qemu-m4", 237568, 237568, 237568)),
        (1, p.Ready(327680, 98304, 0, 0x000100, 1024, p.PROTOCOL_VERSION,
                    p.CounterUnit.MICROSECONDS, "esp32", 261120, 113792, 98304)),
        (21, p.Ack(p.MsgType.INPUT_CHUNK, 2040)),
        (0xFFFF, p.Ack(p.MsgType.RESET)),
        (7, p.Metric(12, 0.40625, 1234567, 96512, 3100, 4384, 2048, 1, 1, 1, 0)),
        (9, p.Metric(13, 0.0, 77, 1, 2, 3, 4, p.LABEL_NONE, 0, p.CORRECT_UNKNOWN, m.EVAL)),
        (22, p.Metric(0xFFFFFFFF, 7.25, 0, 0, 0, 0, 0, 0, 1, 0, m.SKIPPED)),
        (10, p.Output(bytes([0x80, 0x7F]))),
        (13, p.Params(4096, pattern(p.MAX_CHUNK, 3))),
        (23, p.Params(9000, b"")),
        (24, p.Error(Status.TP_ERR_NOT_LOADED, "no model blob in this firmware")),
        (0, p.Error(Status.TP_ERR_BLOB_VERSION)),  # a status as it is: the loader's too
        (25, p.Error(Status.TP_ERR_IO, "cannot save the params record")),  # the board HAL's
        (0, p.Log("step 1 \u2713 done")),
        (26, p.Label(1)),
        (27, p.Label(p.LABEL_NONE)),
        (28, p.GetFrame()),
        (29, p.GetFrame(0xFFFF)),
        (0, p.Seen(41, 123456, 0xFFFFFFFF)),
        (30, p.Thumb(41, 0, 48, 48, 3, pattern(p.MAX_PAYLOAD - 11, 4))),  # a full chunk
        (30, p.Thumb(0xFFFFFFFF, 6912 - 768, 48, 48, 1, b"")),
        (7, p.Metric(14, 0.25, 99, 5, 6, 7, 8, 1, 0, 0, m.REPLAY)),
    ] + [
        # Non-zero runs across the 254-byte COBS block boundary.
        (0x0101, p.Output(b"\xaa" * n)) for n in range(240, 262, 3)
    ]


def json_fields(msg: p.Message) -> dict:
    return {k: v.hex() if isinstance(v, bytes) else v for k, v in p.message_fields(msg).items()}


def body(msg_type: int, seq: int, payload: bytes, length: int | None = None) -> bytes:
    """A frame body, optionally with a lying length field (the CRC still covers it)."""
    head = struct.pack("<BHH", msg_type, seq, len(payload) if length is None else length)
    return head + payload + struct.pack("<I", zlib.crc32(head + payload))


def wire(raw_body: bytes) -> bytes:
    return p.cobs_encode(raw_body) + b"\0"


def expect(stream: bytes) -> list[dict]:
    out = []
    for r in p.FrameDecoder().feed(stream):
        if isinstance(r, p.Frame):
            out.append({"frame": {"type": r.type, "seq": r.seq, "payload": r.payload.hex()}})
        else:
            fault = {"fault": r.fault.name, "size": r.size}
            if r.fault is Status.TP_ERR_UNKNOWN_TYPE:
                fault |= {"type": r.type, "seq": r.seq}
            out.append(fault)
    return out


def streams() -> list[tuple[str, bytes]]:
    hello = p.encode(p.Hello(), 1)
    metric = p.encode(p.Metric(5, 1.5, 10, 20, 30, 40, 50, 1, 0, 0, 0), 0x0203)
    log = body(p.MsgType.LOG, 0x0101, b"hello")
    corrupted = bytearray(log)
    corrupted[6] ^= 0x01  # a payload byte: the CRC no longer matches
    encoded_hello = bytearray(hello)
    encoded_hello[0] += 1  # a COBS code byte: the block structure breaks
    return [
        ("idle delimiters around a frame", b"\0\0" + hello + b"\0\0"),
        ("frames back to back", hello + metric + wire(log)),
        ("line noise, delimiter, frame", b"\x13\x37noise\xff\xfe\0" + metric),
        ("noise glued to a frame start, then a frame", b"\x05\x06" + hello + metric),
        ("payload byte corrupted", wire(bytes(corrupted)) + hello),
        ("tail of the body lost", wire(log[:-2]) + hello),
        ("body shorter than header + CRC", wire(b"\x01\x02\x03") + hello),
        ("length field smaller than the payload", wire(body(p.MsgType.LOG, 3, b"abcd", 2))),
        ("length field larger than the payload", wire(body(p.MsgType.LOG, 3, b"abcd", 9))),
        ("COBS block runs past the delimiter", b"\x10\x01\x02\x03\0" + hello),
        ("COBS code byte corrupted", bytes(encoded_hello) + metric),
        ("body one byte over the limit", wire(body(p.MsgType.INPUT_CHUNK, 4, bytes(1025))) + hello),
        ("5000 bytes of noise without a delimiter", b"\x41" * 5000 + b"\0" + metric),
        ("unknown type with a good CRC", wire(body(0x7E, 0x1234, b"\x01")) + hello),
        ("largest frame between noise", b"\xfe\xfe\0" + p.encode(p.InputChunk(0, bytes(1020)), 9)),
    ]


def bad_payloads() -> list[dict]:
    """Payloads the unpackers must reject: Python raises ProtocolError, C returns `c`."""
    t = p.MsgType
    cases = [
        (t.HELLO, b"\x00", "TP_ERR_BAD_PAYLOAD"),
        (t.INPUT_CHUNK, bytes(3), "TP_ERR_BAD_PAYLOAD"),
        (0x02, bytes(8), "TP_ERR_UNKNOWN_TYPE"),  # reserved: the blob is compiled in
        (t.TRAIN, b"\x01", "TP_ERR_BAD_PAYLOAD"),
        (t.SET_HPARAMS, bytes(15), "TP_ERR_BAD_PAYLOAD"),
        (t.PULL_PARAMS, bytes(5), "TP_ERR_BAD_PAYLOAD"),
        (t.BULK_OPEN, b"", "TP_ERR_BAD_PAYLOAD"),
        (t.BULK_OPEN, b"a\0b", "TP_ERR_BAD_PAYLOAD"),
        (t.BULK_SAMPLE, bytes(7), "TP_ERR_BAD_PAYLOAD"),
        (t.METRIC, bytes(31), "TP_ERR_UNKNOWN_TYPE"),  # device -> host: the device never unpacks it
        (t.ACK, bytes(4), "TP_ERR_UNKNOWN_TYPE"),
        (t.READY, bytes(19), "TP_ERR_UNKNOWN_TYPE"),
        (t.ERROR, b"\x01", "TP_ERR_UNKNOWN_TYPE"),
    ]
    return [{"type": int(k), "payload": v.hex(), "c": c} for k, v, c in cases]


def build() -> dict:
    return {
        "generated_by": "tests/vectors/gen_protocol.py (do not edit by hand)",
        "protocol_version": p.PROTOCOL_VERSION,
        "max_payload": p.MAX_PAYLOAD,
        "messages": [
            {
                "name": msg.TYPE.name,
                "type": int(msg.TYPE),
                "seq": seq,
                "fields": json_fields(msg),
                "payload": msg.pack().hex(),
                "wire": p.encode(msg, seq).hex(),
            }
            for seq, msg in messages()
        ],
        "streams": [
            {"name": name, "wire": data.hex(), "expect": expect(data)}
            for name, data in streams()
        ],
        "bad_payloads": bad_payloads(),
    }


def render() -> str:
    return json.dumps(build(), indent=1, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    OUT.write_text(render(), encoding="utf-8")
    print(f"wrote {OUT}")
