# tinyprop on MicroPython: camera frames. After s.camera(width, height, format), a sample passed
# to train() or infer() is a frame, which the core fits and quantizes into the input tensor as
# the host makes a photo the model's input: QCIF gray, 96x96 RGB565 and QQVGA RGB888 frames
# train the VWW model (RGB, 0:1 pixels) and a grayscale model (-1:1 pixels) bit for bit like
# the NumPy reference fed the host's inputs of the same frames; a frame takes no heap;
# s.camera(None) makes samples the int8 input again; each bad case is refused in one line.
# The assets come from tests/micropython_reference.py (its docstring says how to run this).
try:
    import micropython
    import tinyprop
    import tp_assets
except ImportError:
    print("SKIP")
    raise SystemExit

import struct

GRAY8, RGB888, RGB565 = tinyprop.GRAY8, tinyprop.RGB888, tinyprop.RGB565
BYTES = {GRAY8: 1, RGB888: 3, RGB565: 2}
MODES = [(176, 144, GRAY8, tp_assets.CAMERA_GRAY8), (96, 96, RGB565, tp_assets.CAMERA_RGB565),
         (160, 120, RGB888, tp_assets.CAMERA_RGB888)]


def bits(x):
    return "%08x" % struct.unpack("<I", struct.pack("<f", x))[0]


def frame(frames, n, i):
    # frame i of a frames file (a label byte, then the frame): a view, no copy
    at = i * (n + 1)
    return frames[at], memoryview(frames)[at + 1 : at + 1 + n]


def infer_without_heap(s, x):
    micropython.heap_lock()  # any allocation now raises MemoryError
    try:
        return s.infer(x)
    finally:
        micropython.heap_unlock()


def refused(what, f, *args):
    try:
        f(*args)
        print(what, "-> accepted")
    except tinyprop.Error as e:
        print(what, "->", e)
    except (ValueError, TypeError) as e:
        print(what, "->", type(e).__name__ + ":", e)


def train_on_frames(name, s):
    # 2 steps and an inference in each camera mode
    s.set_hparams(lr=0.05, seed=7)
    for width, height, fmt, frames in MODES:
        n = width * height * BYTES[fmt]
        s.camera(width, height, fmt)
        for i in range(2):
            label, x = frame(frames, n, i)
            loss, pred = s.train(label, x)
            print(name, width, height, fmt, "step", s.step - 1, bits(loss), pred, label)
        pred = infer_without_heap(s, frame(frames, n, 0)[1])
        print(name, width, height, fmt, "infer", pred, list(s.output()))
    print(name, "params crc32 %08x" % tinyprop.crc32(s.params), "step", s.step)


# The qemu port's heap (140 KB) holds one VWW training session and little else: the VWW
# session's memory is allocated first, largest block first, and the small sessions reuse it
# after it, one after the other.
req = tinyprop.requirements(tp_assets.VWW_BLOB)
params, arena = bytearray(req["params"]), bytearray(req["arena_train"])

vww = tinyprop.Session(tp_assets.VWW_BLOB, arena, params)
train_on_frames("vww", vww)
n = 176 * 144
label, x = frame(tp_assets.CAMERA_GRAY8, n, 0)
vww.camera(176, 144, GRAY8)
refused("unknown format", vww.camera, 176, 144, 3)
refused("zero size", vww.camera, 0, 144, GRAY8)
refused("no format", vww.camera, 176, 144)
refused("frame too short", vww.infer, x[:-1])
refused("a 96x96 RGB565 frame", vww.train, label, frame(tp_assets.CAMERA_RGB565, 18432, 0)[1])
refused("label out of range", vww.train, 2, x)
print("the mode is kept: infer", vww.infer(x), list(vww.output()))
vww.camera(None)  # samples are the model's int8 input again
raw = memoryview(tp_assets.VWW_SAMPLES)[1 : 1 + vww.requirements["input_bytes"]]
print("camera(None): infer", vww.infer(raw), list(vww.output()))
refused("a frame after camera(None)", vww.infer, x)
del vww  # its memory is the small sessions' now

gray = tinyprop.Session(tp_assets.GRAY_BLOB, arena, params)
train_on_frames("gray", gray)
refused("too narrow for the model", gray.camera, 1, 100, GRAY8)
t = tinyprop.Session(tp_assets.GRAY_BLOB, arena, train=False)
t.camera(96, 96, RGB565)
pred = t.infer(frame(tp_assets.CAMERA_RGB565, 18432, 1)[1])
print("inference-only session: infer", pred, list(t.output()))
refused("a model input that is no image",
        tinyprop.Session(tp_assets.SMALL_BLOB, arena, train=False).camera, 96, 96, GRAY8)
refused("a model input of scale 0",
        tinyprop.Session(tp_assets.ZERO_SCALE_BLOB, arena, train=False).camera, 96, 96, GRAY8)
