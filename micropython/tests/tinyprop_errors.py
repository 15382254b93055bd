# tinyprop on MicroPython: every bad input raises (tinyprop.Error with the core's status code and
# name, or MicroPython's own TypeError, ValueError or OSError for a wrong type, size or
# stream), and the session still trains bit for bit afterwards.
try:
    import tinyprop
    import tp_assets
except ImportError:
    print("SKIP")
    raise SystemExit

import gc
import io
import struct


def attempt(what, f, *args, **kw):
    try:
        f(*args, **kw)
        print(what, "-> accepted")
    except tinyprop.Error as e:
        print(what, "->", e.code, e.name, isinstance(e, Exception))
    except (TypeError, ValueError, OSError) as e:
        print(what, "->", type(e).__name__)


def put(view, data):
    view[:] = data


blob, samples = tp_assets.SMALL_BLOB, tp_assets.SMALL_SAMPLES
req = tinyprop.requirements(blob)
n = req["input_bytes"]
x0 = memoryview(samples)[1 : 1 + n]

# blobs
attempt("empty blob", tinyprop.requirements, b"")
attempt("truncated blob", tinyprop.Session, blob[:-1])
attempt("not a blob", tinyprop.Session, b"TFL3" + blob[4:])
bad = bytearray(blob)
bad[len(bad) // 2] ^= 1
attempt("corrupted blob", tinyprop.Session, bad)
try:
    tinyprop.Session(bad)
except tinyprop.Error as e:
    print(e)  # the core's fault line: where, what, which check
attempt("int as blob", tinyprop.Session, 5)
attempt("blob at an odd address", tinyprop.Session, memoryview(b"\0" + blob)[1:])

# memory
attempt("arena too small", tinyprop.Session, blob, bytearray(req["arena_infer"] - 1))
# float32 gradient maps: the training arena is larger than the inference arena (int8 maps' is not)
float_grads = tp_assets.SMALL_FLOAT_GRADS_BLOB
attempt("arena for inference, train=True", tinyprop.Session, float_grads,
        bytearray(tinyprop.requirements(float_grads)["arena_infer"]))
attempt("unaligned arena", tinyprop.Session, blob, memoryview(bytearray(req["arena_train"] + 8))[1:])
attempt("read-only arena", tinyprop.Session, blob, bytes(req["arena_train"]))
attempt("params too small", tinyprop.Session, blob, None, bytearray(req["params"] - 1))
inf = tinyprop.Session(blob, bytearray(req["arena_infer"]), train=False)
print("inference-only session: prediction", inf.infer(x0), "params", inf.params)
attempt("train without params", inf.train, 0, x0)

# buffers changed under a session
ba = bytearray(blob)
s = tinyprop.Session(ba)
ba[len(ba) // 2] ^= 1
attempt("blob altered", s.infer, x0)
ba[len(ba) // 2] ^= 1
print("blob restored: prediction", s.infer(x0))
ba.extend(b"\0" * 64)
attempt("blob resized", s.infer, x0)
arena = bytearray(req["arena_train"])
s = tinyprop.Session(blob, arena)
arena.extend(b"\0" * 64)
attempt("arena resized", s.input)
params = bytearray(req["params"])
s = tinyprop.Session(blob, None, params)
params.extend(b"\0" * 64)
attempt("params resized", s.train, 0, x0)
s = tinyprop.Session(bytearray(blob))  # the session holds the only reference
gc.collect()
print("blob dropped by the caller: prediction", s.infer(x0))

# samples, labels, hyper-parameters
s = tinyprop.Session(blob)
attempt("label out of range", s.train, req["n_classes"], x0)
attempt("negative label", s.train, -1, x0)
attempt("label not an int", s.train, "person", x0)
attempt("sample too short", s.train, 0, x0[:-1])
attempt("sample too long", s.train, 0, bytes(n + 1))
attempt("sample into input, wrong size", put, s.input(), x0[:-1])
s.train(0, x0)
attempt("step without a new sample", s.train, 0)
attempt("infer without a new sample", s.infer)
attempt("momentum without optimizer state", s.set_hparams, momentum=0.9)
attempt("negative lr", s.set_hparams, lr=-1.0)
attempt("lr not finite", s.set_hparams, lr=float("inf"))
attempt("momentum 1", tinyprop.Session(tp_assets.SMALL_MOMENTUM_BLOB).set_hparams, momentum=1.0)
attempt("output before infer", s.output)

# the link
attempt("link to a non-stream", tinyprop.Link, 5, s)
attempt("link without a session", tinyprop.Link, io.BytesIO(), None)
attempt("metric before a step", tinyprop.Link(io.BytesIO(), tinyprop.Session(blob)).metric)

# after all that, training is still exact
s = tinyprop.Session(blob)
s.set_hparams(lr=0.05, seed=7)
loss, pred = s.train(samples[0], x0)
print("step 0", "%08x" % struct.unpack("<I", struct.pack("<f", loss))[0], pred)
try:
    s.train(9, x0)
except tinyprop.Error as e:
    print(e)
    print(e.args[0], e.args[1])
