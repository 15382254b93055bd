# tinyprop on MicroPython: a small generated model (a MobileNetV1 tail built in the IR, last:2)
# trains bit for bit like the NumPy reference; saving, resetting and restoring the parameters
# resumes the run exactly; inference; training with momentum. The assets come from
# tests/micropython_reference.py (its docstring says how to run this).
try:
    import tinyprop
    import tp_assets
except ImportError:
    print("SKIP")
    raise SystemExit

import struct


def bits(x):
    return "%08x" % struct.unpack("<I", struct.pack("<f", x))[0]


def sample(samples, n, i):
    # sample i of a samples file (a label byte, then the int8 input): a view, no copy
    at = i % (len(samples) // (n + 1)) * (n + 1)
    return samples[at], memoryview(samples)[at + 1 : at + 1 + n]


blob, samples = tp_assets.SMALL_BLOB, tp_assets.SMALL_SAMPLES
req = tinyprop.requirements(blob)
print(sorted(req.items()))
n = req["input_bytes"]
s = tinyprop.Session(blob)
s.set_hparams(lr=0.05, seed=7)
print("params crc32 %08x" % tinyprop.crc32(s.params), len(s.params))

for i in range(4):  # write the sample into the input tensor, then step
    label, x = sample(samples, n, i)
    s.input()[:] = x
    loss, pred = s.train(label)
    print("step", i, bits(loss), pred, label, s.arena_peak)
saved, step = bytes(s.params), s.step
for i in range(4, 8):  # or pass it: copied into the input tensor
    label, x = sample(samples, n, i)
    loss, pred = s.train(label, x)
    print("step", i, bits(loss), pred, label)
trained = tinyprop.crc32(s.params)
print("params crc32 %08x" % trained, "step", s.step)

s.reset()
print("reset: params crc32 %08x" % tinyprop.crc32(s.params), "step", s.step)
s.params[:] = saved  # restore, as f.readinto(s.params) does from a file
s.step = step
for i in range(4, 8):
    label, x = sample(samples, n, i)
    s.train(label, x)
print("resumed: params equal", tinyprop.crc32(s.params) == trained, "step", s.step)

for i in range(3):
    label, x = sample(samples, n, i)
    pred = s.infer(x)
    print("infer", i, pred, list(s.output()), s.arena_peak)

m = tinyprop.Session(tp_assets.SMALL_MOMENTUM_BLOB)
print("momentum: optimizer bytes", m.requirements["optimizer"])
m.set_hparams(lr=0.05, seed=7, momentum=0.9)
for i in range(6):
    label, x = sample(samples, n, i)
    loss, pred = m.train(label, x)
    print("step", i, bits(loss), pred)
print("params crc32 %08x" % tinyprop.crc32(m.params))
