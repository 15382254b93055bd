# tinyprop on MicroPython: the frames tinyprop.Link writes are the protocol's (docs/protocol.md):
# READY in answer to HELLO (after garbage on the line, too), METRIC for train and infer, LOG,
# ERROR UNSUPPORTED for other requests. Decoded here with a plain COBS decoder and
# tinyprop.crc32; tests/test_micropython.py feeds the same code's frames to the host monitor.
try:
    import tinyprop
    import tp_assets
except ImportError:
    print("SKIP")
    raise SystemExit

import io
import struct


def cobs_encode(body):
    out, block = bytearray(), bytearray()
    for b in body:
        if b == 0 or len(block) == 253:
            out += bytes([len(block) + 1]) + block
            block = bytearray()
            if b == 0:
                continue
        block.append(b)
    return bytes(out + bytes([len(block) + 1]) + block + b"\0")


def frame(kind, seq, payload=b""):
    body = struct.pack("<BHH", kind, seq, len(payload)) + payload
    return cobs_encode(body + struct.pack("<I", tinyprop.crc32(body)))


def frames(wire):
    # (type, seq, payload) of each frame; the CRC checked
    out = []
    for chunk in wire.split(b"\0")[:-1]:
        body, i = bytearray(), 0
        while i < len(chunk):
            code = chunk[i]
            body += chunk[i + 1 : i + code]
            i += code
            if code < 255 and i < len(chunk):
                body.append(0)
        kind, seq, n = struct.unpack("<BHH", body[:5])
        ok = struct.unpack("<I", body[5 + n :])[0] == tinyprop.crc32(body[: 5 + n])
        out.append((kind, seq, bytes(body[5 : 5 + n]), ok))
    return out


def show(wire):
    for kind, seq, payload, ok in frames(wire):
        if kind == 0x81:
            f = struct.unpack("<IIIIHBBIII", payload[:32])  # protocol 2: free RAM (unknown here)
            print("READY seq", seq, f, payload[32:], ok)
        elif kind == 0x83:
            f = struct.unpack("<IfIIIIIBBBB", payload)
            loss = "%08x" % struct.unpack("<I", payload[4:8])[0]
            # f[2], the step's duration in us, depends on the clock: not printed
            print("METRIC seq", seq, "step", f[0], "loss", loss, "arena", f[3], "stack>0",
                  f[4] > 0, "trainable", f[5], "static>0", f[6] > 0, "label", f[7], "pred", f[8],
                  "correct", f[9], "flags", f[10], ok)
        elif kind == 0x86:
            print("ERROR seq", seq, struct.unpack("<H", payload[:2])[0], payload[2:], ok)
        else:
            print("type %02x seq" % kind, seq, payload, ok)


blob, samples = tp_assets.SMALL_BLOB, tp_assets.SMALL_SAMPLES
n = tinyprop.requirements(blob)["input_bytes"]
s = tinyprop.Session(blob)
s.set_hparams(lr=0.05, seed=7)
out = io.BytesIO()
host = io.BytesIO(b"garbage\0" + frame(0x08, 6, bytes(16)) + frame(0x01, 7))
link = tinyprop.Link(out, s, board="mpy-test", sram=262144, input=host)
print("hello answered", link.wait())
show(out.getvalue())

out = io.BytesIO()
link = tinyprop.Link(out, s, board="a-board-name-longer-than-32-bytes!", sram=1,
                     input=io.BytesIO(frame(0x01, 9)))
print("poll answers", link.poll())
show(out.getvalue())

out = io.BytesIO()
link = tinyprop.Link(out, s, input=io.BytesIO())
print("no hello", link.wait(), link.poll())
for i in range(2):
    s.train(samples[i * (n + 1)], memoryview(samples)[i * (n + 1) + 1 : (i + 1) * (n + 1)])
    link.metric()
s.infer(memoryview(samples)[1 : n + 1])
link.metric()
link.log("done: 2 steps")
show(out.getvalue())
