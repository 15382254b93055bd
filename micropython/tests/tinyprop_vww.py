# tinyprop on MicroPython: the MLPerf Tiny VWW model (last:2, planned for the Cortex-M4 DSP
# kernels) trains on four real photos bit for bit like the NumPy reference, then infers. On the
# qemu port the blob and photos are frozen into flash and used in place: the GC heap holds only
# the arena and the parameters.
try:
    import tinyprop
    import tp_assets
except ImportError:
    print("SKIP")
    raise SystemExit

import struct


def bits(x):
    return "%08x" % struct.unpack("<I", struct.pack("<f", x))[0]


blob, samples = tp_assets.VWW_BLOB, memoryview(tp_assets.VWW_SAMPLES)
req = tinyprop.requirements(blob)
print(sorted(req.items()))
n = req["input_bytes"]
count = len(samples) // (n + 1)
s = tinyprop.Session(blob)
s.set_hparams(lr=0.05, seed=7)
for i in range(8):
    at = i % count * (n + 1)
    s.input()[:] = samples[at + 1 : at + 1 + n]
    loss, pred = s.train(samples[at])
    # the blob plans the DSP kernels' scratch: the qemu port (Cortex-M4) uses all of it, the
    # unix port's reference kernels less
    print("step", i, bits(loss), pred, samples[at], 0 < s.arena_peak <= req["arena_train"])
print("params crc32 %08x" % tinyprop.crc32(s.params), "step", s.step)
for i in range(count):
    at = i * (n + 1)
    print("infer", i, s.infer(samples[at + 1 : at + 1 + n]), list(s.output()))
