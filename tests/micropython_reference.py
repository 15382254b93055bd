"""The MicroPython tests (micropython/tests/*.py, each with its .py.exp): their assets, and
their expected outputs from tinyprop's NumPy reference.

Assets, made by tinyprop whenever they are needed, never committed: `small`, a MobileNetV1 tail
generated in the graph IR (tests/opgen.py small_classifier: the same bytes on every machine,
which a TFLite conversion is not), trained last:2 on eight random inputs, also as
`small_momentum` with optimizer state and as `small_float_grads` with float32 gradient maps;
`vww`, the MLPerf Tiny VWW model from the shared assets (last:2, planned for the Cortex-M4 DSP
kernels as the example's blob is) with four real photos, two of each class; `gray`, a 24x32
grayscale classifier generated in the IR (gray_classifier) whose input reads -1:1 pixels, and
`zero_scale`, the same with input scale 0; camera frames (CAMERA_MODES: QCIF gray, 96x96
RGB565, QQVGA RGB888) of two of those photos, as a sensor sends them (tinyprop.data.image).
Blobs are packed without META (which holds the source's path), so their bytes and ids do not
depend on where the model lies. Samples are files as tinyprop.device.device.write_bulk_file
writes them: a label byte, then the int8 input, per sample; frames files the same with a frame
for the input. The scripts import them from a module `tp_assets`.

Each .exp is what its script prints when every loss, prediction, output and params CRC equals
the reference's (reference.backward.ReferenceTrainer), every arena high-water mark the planned
one (vww's within it: the unix port's reference kernels leave the DSP kernels' scratch unused),
and every bad input is refused with its status; tests/test_micropython.py fails when a
committed .exp no longer matches. MicroPython itself is built by hand (docs/micropython.md):

    python tests/micropython_reference.py DIR             # assets + tp_assets.py reading DIR
    MICROPYPATH=DIR run-tests.py --keep-path micropython/tests/*.py           # unix port
    python tests/micropython_reference.py DIR --frozen    # tp_assets.py holding the bytes and
    make -C ports/qemu ... FROZEN_MANIFEST=DIR/manifest.py   # manifest.py: qemu port, no files
    python tests/micropython_reference.py --write-exp     # rewrite the .exp files
"""

from __future__ import annotations

import argparse
import os
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
from opgen import _Builder
from test_device_host import Model, load_ir_model, load_vww_model
from tinyprop.compile.blob import blob_id, pack_blob, read_blob
from tinyprop.compile.scheme import parse_scheme
from tinyprop.compile.train_plan import build_program
from tinyprop.data import assets
from tinyprop.data.datasets import input_pixels, load_dataset, quantize_pixels, read_rgb
from tinyprop.data.image import FRAME_FORMATS, decode_frame, encode_frame, fit_image
from tinyprop.device.device import write_bulk_file
from tinyprop.device.protocol import PROTOCOL_VERSION, MsgType
from tinyprop.engines.native import blob_fault
from tinyprop.reference.backward import ReferenceTrainer
from tinyprop.status import Status, status_code

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault(assets.ASSETS_ENV, str(REPO.parent / "shared"))  # as tests/conftest.py
TESTS = REPO / "micropython" / "tests"
LR, SEED, MOMENTUM = 0.05, 7, 0.9  # what the scripts set
SMALL_STEPS, VWW_STEPS, MOMENTUM_STEPS = 8, 8, 6


def load_small_model() -> Model:
    """The small generated model, last:2, and its eight samples."""
    return load_ir_model(momentum=False)


def small_momentum() -> Model:
    """The same with optimizer state (convert --momentum)."""
    return load_ir_model(momentum=True)


def small_float_grads() -> Model:
    """The same with float32 gradient maps (convert --grad float32): its training arena is
    larger than its inference arena, which the int8 maps' is not."""
    return load_ir_model(grad="float32")


def vww() -> Model:
    """Planned for the Cortex-M4 DSP kernels, as `tinyprop convert` plans the example's blob:
    the qemu port (MPS2_AN386) runs them, the unix port the reference kernels."""
    return load_vww_model(assets.resolve_model(), assets.resolve_dataset(), "cortex-m4")


def gray_classifier() -> Model:
    """A grayscale image classifier generated in the IR (the same bytes on every machine, as
    opgen.small_classifier): a 24x32x1 input quantized with scale 2/255 and zero point 0, which
    reads -1:1 pixels (input_pixels); CONV_2D 3x3/2 with RELU6, AVERAGE_POOL over the map,
    RESHAPE, FULLY_CONNECTED to three classes, SOFTMAX; last:2 (output scales: _Builder.calibrate).
    A camera frame becomes luma for it, in another pixel range than VWW's."""
    b = _Builder(np.random.default_rng([0, 0x6A7]))
    x = b.act("x", (1, 24, 32, 1), scale=float(np.float32(2.0 / 255)), zp=0)

    y = b.conv(x, "CONV_2D", k=(3, 3), stride=(2, 2), cout=8, act="RELU6")
    b.calibrate(y, 9, -128)
    t = b.tensors[y]
    pooled = b.act("pool", (1, 1, 1, 8), scale=t.s, zp=t.zp)
    b.op("AVERAGE_POOL_2D", [y], pooled, stride=(12, 16), padding="VALID", filter=(12, 16),
         activation="NONE")
    flat = b.act("flat", (1, 8), scale=t.s, zp=t.zp)
    b.op("RESHAPE", [pooled, b.const_int32("shape", [1, 8])], flat)
    logits = b.fc(flat, 3)
    b.calibrate(logits, 8, 0)
    probs = b.act("probs", (1, 3), scale=1.0 / 256, zp=-128)
    b.op("SOFTMAX", [logits], probs, beta=1.0)
    graph = b.graph(x, probs, "gray-classifier")
    program = build_program(graph, parse_scheme(graph, "last:2"))
    blob = pack_blob(graph, zlib.crc32(graph.name.encode()), train=program)
    return Model(program, blob, np.zeros((0, 24, 32, 1), np.int8), np.zeros(0, np.int64))


def zero_scale_blob() -> bytes:
    """gray_classifier's blob with its input scale 0 (CRC fixed): the loader takes it, but no
    pixel maps onto such an input, which s.camera() must refuse."""
    gray = gray_classifier()
    blob, scale = bytearray(gray.blob), np.float32(gray.program.graph.input.s).tobytes()
    assert blob.count(scale) == 1, "the input scale's bytes must be found once in the blob"
    at = blob.index(scale)
    blob[at : at + 4] = np.float32(0).tobytes()
    blob[-4:] = zlib.crc32(bytes(blob[:-4])).to_bytes(4, "little")
    return bytes(blob)


# (width, height, tinyprop.data.image format, the tp_assets name of its frames file)
CAMERA_MODES = [(176, 144, "gray8", "CAMERA_GRAY8"), (96, 96, "rgb565be", "CAMERA_RGB565"),
                (160, 120, "rgb888", "CAMERA_RGB888")]


def camera_frames(width: int, height: int, fmt: str) -> list[tuple[int, bytes]]:
    """(label, frame) of two of vww's photos (a non-person and a person: load_vww_model's
    first and last) as a width x height camera in `fmt` sends them: fitted to the sensor's
    size (fit_image), then encoded (encode_frame)."""
    train = load_dataset(assets.resolve_dataset()).split("train")
    return [(s.label, encode_frame(fit_image(read_rgb(s.path), (height, width)), fmt))
            for s in (train[0], train[-1])]


def frame_input(model: Model, raw: bytes, width: int, height: int, fmt: str) -> np.ndarray:
    """The model's int8 input of a camera frame, as the host makes a photo one (fit_image,
    quantize_pixels in the input's own pixel range): what s.camera() must feed the model."""
    x = model.program.graph.input
    _, h, w, c = x.shape
    return quantize_pixels(fit_image(decode_frame(raw, width, height, fmt), (h, w), c), x.s, x.zp)


def write_assets(out: Path, frozen: bool) -> list[Path]:
    """The blobs and samples files in `out`, and a tp_assets.py that reads them (the unix
    port), or, with `frozen`, a tp_assets.py holding their bytes and a manifest.py freezing it
    (the qemu port: frozen bytes stay in flash and the scripts use them in place)."""
    out.mkdir(parents=True, exist_ok=True)
    small, big = load_small_model(), vww()
    files = {"SMALL_BLOB": "small.tpb", "SMALL_SAMPLES": "small.bin",
             "SMALL_MOMENTUM_BLOB": "small_momentum.tpb",
             "SMALL_FLOAT_GRADS_BLOB": "small_float_grads.tpb", "VWW_BLOB": "vww.tpb",
             "VWW_SAMPLES": "vww.bin", "GRAY_BLOB": "gray.tpb",
             "ZERO_SCALE_BLOB": "zero_scale.tpb",
             **{name: f"{name.lower()}.bin" for *_, name in CAMERA_MODES}}
    (out / "small.tpb").write_bytes(small.blob)
    (out / "small_momentum.tpb").write_bytes(small_momentum().blob)
    (out / "small_float_grads.tpb").write_bytes(small_float_grads().blob)
    (out / "vww.tpb").write_bytes(big.blob)
    write_bulk_file(out / "small.bin", small.inputs, small.labels)
    write_bulk_file(out / "vww.bin", big.inputs, big.labels)
    (out / "gray.tpb").write_bytes(gray_classifier().blob)
    (out / "zero_scale.tpb").write_bytes(zero_scale_blob())
    for width, height, fmt, name in CAMERA_MODES:
        frames = camera_frames(width, height, fmt)
        (out / files[name]).write_bytes(b"".join(bytes([y]) + raw for y, raw in frames))
    lines = ["# The MicroPython tests' assets, written by tests/micropython_reference.py."]
    written = [out / name for name in files.values()] + [out / "tp_assets.py"]
    if frozen:
        lines += [f"{name} = {(out / file).read_bytes()!r}" for name, file in files.items()]
        (out / "manifest.py").write_text(f"freeze({str(out)!r}, 'tp_assets.py')\n")
        written.append(out / "manifest.py")
    else:
        lines += ["", "", "def _read(name):",
                  f"    with open({str(out)!r} + '/' + name, 'rb') as f:",
                  "        return f.read()", ""]
        lines += [f"{name} = _read({file!r})" for name, file in files.items()]
    (out / "tp_assets.py").write_text("\n".join(lines) + "\n")
    return written


# ---- expected outputs: each function prints what its script must print ----------------------


def bits(x: float) -> str:
    return f"{int(np.float32(x).view(np.uint32)):08x}"


def crc(data: bytes) -> str:
    return f"{zlib.crc32(data):08x}"


def requirements(model: Model) -> dict[str, int]:
    """What tinyprop.requirements returns, from the host's blob reader."""
    b = read_blob(model.blob)
    return {"arena_infer": b.arena_bytes, "arena_train": b.train_arena_bytes,
            "params": b.params_bytes, "input_bytes": b.tensors[b.input].size,
            "n_classes": b.n_classes, "model_id": b.model_id, "blob_id": blob_id(model.blob),
            "optimizer": b.optimizer_bytes}


def prediction(model: Model, ref: ReferenceTrainer, x: np.ndarray) -> int:
    """The argmax of the logits, as the core's infer() returns it."""
    logits = model.program.graph.ops[model.program.logits].outputs[0]
    return int(np.argmax(ref.forward(x, model.program.logits)[logits]))


def output(ref: ReferenceTrainer, x: np.ndarray) -> list[int]:
    return [int(v) for v in ref.infer(x).reshape(-1)]


def expect_small() -> list[str]:
    m, mm = load_small_model(), small_momentum()
    req = requirements(m)
    ref = ReferenceTrainer(m.program, LR, SEED)
    n = len(m.labels)
    lines = [repr(sorted(req.items())), f"params crc32 {crc(ref.params_bytes())} {req['params']}"]
    for i in range(SMALL_STEPS):
        x, y = m.inputs[i % n], int(m.labels[i % n])
        r = ref.train_step(x, y)
        lines.append(f"step {i} {bits(r.loss)} {r.prediction} {y}" +
                     (f" {req['arena_train']}" if i < SMALL_STEPS // 2 else ""))
    lines += [f"params crc32 {crc(ref.params_bytes())} step {SMALL_STEPS}",
              f"reset: params crc32 {crc(ReferenceTrainer(m.program).params_bytes())} step 0",
              f"resumed: params equal True step {SMALL_STEPS}"]
    lines += [f"infer {i} {prediction(m, ref, m.inputs[i])} {output(ref, m.inputs[i])} "
              f"{req['arena_infer']}" for i in range(3)]
    lines.append(f"momentum: optimizer bytes {requirements(mm)['optimizer']}")
    ref = ReferenceTrainer(mm.program, LR, SEED, momentum=MOMENTUM)
    for i in range(MOMENTUM_STEPS):
        r = ref.train_step(mm.inputs[i % n], int(mm.labels[i % n]))
        lines.append(f"step {i} {bits(r.loss)} {r.prediction}")
    lines.append(f"params crc32 {crc(ref.params_bytes())}")
    return lines


def expect_vww() -> list[str]:
    m = vww()
    req = requirements(m)
    ref = ReferenceTrainer(m.program, LR, SEED)
    n = len(m.labels)
    lines = [repr(sorted(req.items()))]
    for i in range(VWW_STEPS):
        y = int(m.labels[i % n])
        r = ref.train_step(m.inputs[i % n], y)
        lines.append(f"step {i} {bits(r.loss)} {r.prediction} {y} True")
    lines.append(f"params crc32 {crc(ref.params_bytes())} step {VWW_STEPS}")
    lines += [f"infer {i} {prediction(m, ref, x)} {output(ref, x)}" for i, x in enumerate(m.inputs)]
    return lines


def expect_errors() -> list[str]:
    m = load_small_model()
    float_grads = requirements(small_float_grads())
    assert float_grads["arena_train"] > float_grads["arena_infer"], (
        "tinyprop_errors.py needs a blob whose training arena exceeds its inference arena")
    fresh = ReferenceTrainer(m.program, LR, SEED)
    x0, y0 = m.inputs[0], int(m.labels[0])
    p0 = prediction(m, fresh, x0)
    corrupted = bytearray(m.blob)
    corrupted[len(corrupted) // 2] ^= 1
    fault = blob_fault(bytes(corrupted))  # the C loader's line, "TP_ERR_BLOB_CRC: where: what"
    step0 = fresh.train_step(x0, y0)

    def refused(status: str) -> str:
        return f"{status_code(status)} {status} True"

    return [
        f"empty blob -> {refused('TP_ERR_BLOB_TRUNCATED')}",
        f"truncated blob -> {refused('TP_ERR_BLOB_TRUNCATED')}",
        f"not a blob -> {refused('TP_ERR_BLOB_MAGIC')}",
        f"corrupted blob -> {refused('TP_ERR_BLOB_CRC')}",
        f"TP_ERR_BLOB_CRC ({status_code('TP_ERR_BLOB_CRC')}): {fault.split(': ', 1)[1]}",
        "int as blob -> TypeError",
        "blob at an odd address -> accepted",
        f"arena too small -> {refused('TP_ERR_ARENA_TOO_SMALL')}",
        f"arena for inference, train=True -> {refused('TP_ERR_ARENA_TOO_SMALL')}",
        f"unaligned arena -> {refused('TP_ERR_ARG')}",
        "read-only arena -> TypeError",
        f"params too small -> {refused('TP_ERR_PARAMS_TOO_SMALL')}",
        f"inference-only session: prediction {p0} params None",
        f"train without params -> {refused('TP_ERR_NO_TRAIN')}",
        f"blob altered -> {refused('TP_ERR_BLOB_CRC')}",
        f"blob restored: prediction {p0}",
        f"blob resized -> {refused('TP_ERR_ARG')}",
        f"arena resized -> {refused('TP_ERR_ARG')}",
        f"params resized -> {refused('TP_ERR_ARG')}",
        f"blob dropped by the caller: prediction {p0}",
        f"label out of range -> {refused('TP_ERR_BAD_LABEL')}",
        f"negative label -> {refused('TP_ERR_BAD_LABEL')}",
        "label not an int -> TypeError",
        f"sample too short -> {refused('TP_ERR_BAD_INPUT')}",
        f"sample too long -> {refused('TP_ERR_BAD_INPUT')}",
        "sample into input, wrong size -> ValueError",
        f"step without a new sample -> {refused('TP_ERR_BAD_INPUT')}",
        f"infer without a new sample -> {refused('TP_ERR_BAD_INPUT')}",
        f"momentum without optimizer state -> {refused('TP_ERR_NO_OPTIMIZER')}",
        f"negative lr -> {refused('TP_ERR_BAD_LR')}",
        f"lr not finite -> {refused('TP_ERR_BAD_LR')}",
        f"momentum 1 -> {refused('TP_ERR_BAD_MOMENTUM')}",
        f"output before infer -> {refused('TP_ERR_ARG')}",
        "link to a non-stream -> OSError",
        "link without a session -> TypeError",
        f"metric before a step -> {refused('TP_ERR_ARG')}",
        f"step 0 {bits(step0.loss)} {step0.prediction}",
        f"TP_ERR_BAD_LABEL (10): label 9 out of range: the model has {requirements(m)['n_classes']}"
        " classes",
        "10 TP_ERR_BAD_LABEL",
    ]


def expect_link() -> list[str]:
    m = load_small_model()
    req = requirements(m)
    ref = ReferenceTrainer(m.program, LR, SEED)
    arena = max(req["arena_train"], req["arena_infer"])
    unknown = ", ".join([str(0xFFFFFFFF)] * 3)  # protocol 2's free RAM: not measured here
    # fw 0.1.0, rx 32 - 9, us
    ready = f"{arena}, {req['blob_id']}, 256, 23, {PROTOCOL_VERSION}, 1, {unknown})"
    lines = [
        "hello answered True",
        f"ERROR seq 6 {int(Status.TP_ERR_UNSUPPORTED)} "
        "b'a MicroPython script drives this board: it only streams metrics' True",
        f"READY seq 7 (262144, {ready} b'mpy-test' True",
        "poll answers True",
        f"READY seq 9 (1, {ready} b'a-board-name-longer-than-32-byte' True",
        "no hello False False",
    ]
    for i in range(2):
        y = int(m.labels[i])
        r = ref.train_step(m.inputs[i], y)
        lines.append(f"METRIC seq 0 step {i} loss {bits(r.loss)} arena {req['arena_train']} "
                     f"stack>0 True trainable {req['params']} static>0 True label {y} pred "
                     f"{r.prediction} correct {int(r.prediction == y)} flags 0 True")
    lines.append(f"METRIC seq 0 step 2 loss 00000000 arena {req['arena_infer']} stack>0 True "
                 f"trainable {req['params']} static>0 True label 255 pred "
                 f"{prediction(m, ref, m.inputs[0])} correct 255 flags 2 True")
    lines.append(f"type {int(MsgType.LOG):02x} seq 0 b'done: 2 steps' True")
    return lines


def expect_camera() -> list[str]:
    m, gray = vww(), gray_classifier()
    assert input_pixels(gray.program.graph.input.s, 0) == "-1:1", (
        "the gray model must read other pixels than VWW's 0:1")
    bad_input = f"TP_ERR_BAD_INPUT ({status_code('TP_ERR_BAD_INPUT')})"
    wrong_size = "(set by s.camera): capture in that mode, or call s.camera() with the camera's"
    n = 176 * 144

    def trained_on_frames(name: str, m: Model) -> tuple[list[str], ReferenceTrainer]:
        lines, ref = [], ReferenceTrainer(m.program, LR, SEED)
        for width, height, fmt, _ in CAMERA_MODES:
            mode = f"{name} {width} {height} {FRAME_FORMATS.index(fmt)}"
            frames = camera_frames(width, height, fmt)
            for y, raw in frames:
                r = ref.train_step(frame_input(m, raw, width, height, fmt), y)
                lines.append(f"{mode} step {ref.step - 1} {bits(r.loss)} {r.prediction} {y}")
            x = frame_input(m, frames[0][1], width, height, fmt)
            lines.append(f"{mode} infer {prediction(m, ref, x)} {output(ref, x)}")
        return lines + [f"{name} params crc32 {crc(ref.params_bytes())} step {ref.step}"], ref

    lines, ref = trained_on_frames("vww", m)
    x = frame_input(m, camera_frames(176, 144, "gray8")[0][1], 176, 144, "gray8")
    lines += [
        "unknown format -> ValueError: camera format 3: unknown; use tinyprop.GRAY8, "
        "tinyprop.RGB888 or tinyprop.RGB565",
        "zero size -> ValueError: camera size 0x144: give the frame's width and height in "
        "pixels, 1 to 16384 each",
        "no format -> TypeError: camera() takes width, height, format, or None",
        f"frame too short -> ValueError: the frame has {n - 1} bytes, a 176x144 GRAY8 frame {n} "
        f"{wrong_size}",
        f"a 96x96 RGB565 frame -> ValueError: the frame has {96 * 96 * 2} bytes, a 176x144 GRAY8 "
        f"frame {n} {wrong_size}",
        f"label out of range -> TP_ERR_BAD_LABEL ({status_code('TP_ERR_BAD_LABEL')}): label 2 "
        f"out of range: the model has {requirements(m)['n_classes']} classes",
        f"the mode is kept: infer {prediction(m, ref, x)} {output(ref, x)}",
        f"camera(None): infer {prediction(m, ref, m.inputs[0])} {output(ref, m.inputs[0])}",
        f"a frame after camera(None) -> {bad_input}: the sample has {n} bytes, the model's "
        f"input {requirements(m)['input_bytes']}",
    ]
    lines += trained_on_frames("gray", gray)[0]
    fresh = ReferenceTrainer(gray.program)
    x = frame_input(gray, camera_frames(96, 96, "rgb565be")[1][1], 96, 96, "rgb565be")
    return lines + [
        "too narrow for the model -> ValueError: camera size 1x100: too narrow for the model's "
        "32x24 input; use a frame of a closer aspect",
        f"inference-only session: infer {prediction(gray, fresh, x)} {output(fresh, x)}",
        f"a model input that is no image -> {bad_input}: this model's input is not an image "
        "(int8, height x width x 1 or 3 channels), so it takes no camera frames: pass its int8 "
        "input instead",
        f"a model input of scale 0 -> {bad_input}: this model's input scale is not positive and "
        "finite, so no pixel maps onto its input: check the model",
    ]


EXPECTED: dict[str, Callable[[], list[str]]] = {
    "tinyprop_small": expect_small,
    "tinyprop_vww": expect_vww,
    "tinyprop_errors": expect_errors,
    "tinyprop_link": expect_link,
    "tinyprop_camera": expect_camera,
}


def expected_text(name: str) -> str:
    return "\n".join(EXPECTED[name]()) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", type=Path, help="folder for the assets")
    parser.add_argument("--frozen", action="store_true",
                        help="tp_assets.py holds the bytes, plus a manifest.py freezing it")
    parser.add_argument("--write-exp", action="store_true",
                        help=f"rewrite the .exp files in {TESTS.relative_to(REPO)}")
    args = parser.parse_args(argv)
    if args.out is None and not args.write_exp:
        parser.error("give a folder for the assets, or --write-exp")
    if args.out is not None:
        for path in write_assets(args.out.resolve(), args.frozen):
            print(path)
    if args.write_exp:
        for name in EXPECTED:
            path = TESTS / f"{name}.py.exp"
            path.write_text(expected_text(name))
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
