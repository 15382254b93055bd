"""A new classifier head: the model's last FULLY_CONNECTED (and its SOFTMAX) replaced by one with
one output a new class, on the same features, so a board can learn classes the model never knew.

    head = new_head(Path("vww.tflite"), ("animal", "furniture", "vehicle"), Path("coco3/"),
                    Path("out/coco3.head.tflite"))

The result is an ordinary int8 .tflite (TensorFlow's flatbuffer tools rewrite the head's tensors;
every other byte of the model is as it was), so everything after it (the blob, training, export,
the TFLite interpreter) takes it as any model; its class names go beside it in
`<model>.labels.txt` (`labels_path`), one a line, which convert, train and eval read.

How the head starts (`init`):
- "means" (default): nearest class mean on the features of the calibration samples, the
  features centred on their overall mean m: logit_c = a (f - m) . (m_c - m) - a |m_c - m|^2 / 2,
  with a making the logits' spread about 4 (softmax neither flat nor saturated).
- "zero": every weight and bias 0 (all classes equally likely until trained).
Weights are per-channel int8 (each class its own scale), biases int32 at input x weight scale;
the logits' quantization spans the old head's range and 1.5 times the calibration logits'.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import TinypropError
from ..extras import require
from ..frontend.graph import Graph, Op
from ..frontend.tflite_reader import read_tflite

HEAD_INITS = ("means", "zero")
DEFAULT_HEAD_INIT = "means"
LOGIT_SPREAD = 4.0  # the standard deviation of the initial logits over calibration samples


def labels_path(model: Path) -> Path:
    """Where a model's class names are: MODEL.labels.txt beside it."""
    return model.with_suffix(".labels.txt")


def read_labels(model: Path) -> tuple[str, ...] | None:
    """The class names written beside `model`, or None if there are none."""
    path = labels_path(model)
    if not path.is_file():
        return None
    return tuple(n.strip() for n in path.read_text().splitlines() if n.strip())


def head_ops(graph: Graph, model: Path) -> tuple[Op, Op | None]:
    """(the classifier FULLY_CONNECTED, the SOFTMAX after it or None), or a one-line error."""
    fc = graph.logits_op()
    if fc.kind != "FULLY_CONNECTED":
        raise TinypropError(f"{model}: --classes replaces the last FULLY_CONNECTED, but the "
                            f"logits come from op {fc.index} ({fc.kind}); give a classifier "
                            "that ends in a dense layer (and SOFTMAX)")
    last = graph.producer(graph.outputs[0])
    return fc, (last if last is not None and last.kind == "SOFTMAX" else None)


def new_head(model: Path, classes: Sequence[str], calib: Path | None, out: Path,
             init: str = DEFAULT_HEAD_INIT, shift: str = "none",
             pixels: str | None = None) -> Path:
    """Write `model` with a new head of len(classes) outputs at `out` (and its labels beside
    it); "means" initialises it from `calib` (a dataset with a folder a class named as
    `classes`) seen through `shift`, images in pixel range `pixels` (datasets.load_split).
    Returns `out`."""
    if init not in HEAD_INITS:
        raise TinypropError(f"--head-init {init}: unknown; use one of {', '.join(HEAD_INITS)}")
    if len(classes) < 2:
        raise TinypropError(f"--classes {','.join(classes)}: a classifier needs at least two "
                            "classes")
    graph = read_tflite(model)
    fc, softmax = head_ops(graph, model)
    t = graph.tensors
    x_t, w_t, y_t = t[fc.inputs[0]], t[fc.inputs[1]], t[fc.outputs[0]]
    n_feat = w_t.shape[1]
    if init == "means":
        if calib is None:
            raise TinypropError("--head-init means: pass --calib DIR, a dataset with a folder a "
                                f"class ({', '.join(classes)}), or use --head-init zero")
        w, b, logits = _class_means(graph, x_t.index, calib, classes, shift, pixels)
    else:
        w, b, logits = np.zeros((len(classes), n_feat)), np.zeros(len(classes)), (0.0, 0.0)
    old_scale = float(np.max(w_t.scale))
    w_scale = np.maximum(np.abs(w).max(axis=1), old_scale * 127.0) / 127.0
    wq = np.clip(np.round(w / w_scale[:, None]), -127, 127).astype(np.int8)
    bq = np.round(b / (x_t.s * w_scale)).astype(np.int64)
    bq = np.clip(bq, -(2**31), 2**31 - 1).astype(np.int32)
    lo_old = (-128 - y_t.zp) * y_t.s
    hi_old = (127 - y_t.zp) * y_t.s
    lo, hi = min(lo_old, 1.5 * logits[0]), max(hi_old, 1.5 * logits[1])
    y_scale = (hi - lo) / 255.0
    y_zp = int(np.clip(np.round(-128 - lo / y_scale), -128, 127))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(_rewrite(model, fc, softmax, graph, wq, w_scale, bq, y_scale, y_zp))
    labels_path(out).write_text("".join(f"{c}\n" for c in classes))
    return out


def _features(graph: Graph, feat: int, calib: Path, classes: Sequence[str],
              shift: str, pixels: str | None) -> tuple[np.ndarray, np.ndarray]:
    """(real-valued features N x F at tensor `feat`, labels) of calib's train split, whose
    classes must be `classes` in that order."""
    from ..data.datasets import load_dataset, load_split
    from ..reference.forward import Forward

    have = load_dataset(calib).classes
    if tuple(have) != tuple(classes):
        raise TinypropError(f"{calib}: classes {', '.join(have)} (in label order); --classes "
                            f"{','.join(classes)}: calibrate on a dataset of the new classes, "
                            "named in its order (sorted folder names, or its classes.txt)")
    t_in = graph.input
    xs, ys, _ = load_split(calib, "train", t_in.s, t_in.zp, shift, t_in.shape[1:],
                           pixels=pixels)
    fwd = Forward(graph)
    ft = graph.tensors[feat]
    q = np.stack([fwd.run(x, keep=True)[feat].reshape(-1) for x in xs]).astype(np.float64)
    return (q - ft.zp) * float(ft.s), ys


def _class_means(graph: Graph, feat: int, calib: Path, classes: Sequence[str],
                 shift: str, pixels: str | None) -> tuple[np.ndarray, np.ndarray,
                                                         tuple[float, float]]:
    """(weights, biases, (lowest, highest) logit on calib) of the nearest-class-mean head."""
    f, ys = _features(graph, feat, calib, classes, shift, pixels)
    missing = [c for i, c in enumerate(classes) if not np.any(ys == i)]
    if missing:
        raise TinypropError(f"{calib}: no training samples of class {missing[0]!r}; the new "
                            "head starts from each class's mean features: add some")
    m = f.mean(axis=0)
    mc = np.stack([f[ys == i].mean(axis=0) for i in range(len(classes))]) - m
    b = -(m @ mc.T) - 0.5 * np.sum(mc * mc, axis=1)
    logits = f @ mc.T + b
    spread = float(np.std(logits))
    a = LOGIT_SPREAD / spread if spread > 0 else 1.0
    return a * mc, a * b, (a * float(logits.min()), a * float(logits.max()))


def _rewrite(model: Path, fc: Op, softmax: Op | None, graph: Graph, wq: np.ndarray,
             w_scale: np.ndarray, bq: np.ndarray, y_scale: float, y_zp: int) -> bytes:
    """The model's flatbuffer with the head's weight, bias and output tensors (and the
    SOFTMAX's output) resized to the new classes."""
    require("tensorflow", "a new classifier head (--classes)")
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils as fbu

    m = fbu.read_model_from_bytearray(bytearray(model.read_bytes()))
    sg = m.subgraphs[0]
    n = len(wq)

    def new_buffer(data: np.ndarray) -> int:
        buf = schema.BufferT()
        buf.data = np.frombuffer(data.tobytes(), np.uint8)
        m.buffers.append(buf)
        return len(m.buffers) - 1

    def quant(scale: Sequence[float], zp: Sequence[int], dim: int = 0):
        q = schema.QuantizationParametersT()
        q.scale = [float(s) for s in scale]
        q.zeroPoint = [int(z) for z in zp]
        q.quantizedDimension = dim
        return q

    def resize(ti: int, shape: Sequence[int]) -> None:
        tens = sg.tensors[ti]
        tens.shape = np.array(shape, np.int32)
        if tens.shapeSignature is not None:
            tens.shapeSignature = np.array(shape, np.int32)

    x_scale = float(graph.tensors[fc.inputs[0]].s)
    w_i, y_i = fc.inputs[1], fc.outputs[0]
    resize(w_i, (n, wq.shape[1]))
    sg.tensors[w_i].buffer = new_buffer(wq.astype("<i1"))
    sg.tensors[w_i].quantization = quant(w_scale, [0] * n)
    if len(fc.inputs) > 2 and fc.inputs[2] >= 0:
        b_i = fc.inputs[2]
    else:  # a dense layer without a bias gets one: the head learns it
        bias = schema.TensorT()
        bias.name, bias.type = b"new_head_bias", 2  # 2: TensorType.INT32
        sg.tensors.append(bias)
        b_i = len(sg.tensors) - 1
        sg.operators[fc.index].inputs = np.array([*fc.inputs[:2], b_i], np.int32)
    resize(b_i, (n,))
    sg.tensors[b_i].buffer = new_buffer(bq.astype("<i4"))
    sg.tensors[b_i].quantization = quant(x_scale * w_scale, [0] * n)
    y_shape = graph.tensors[y_i].shape[:-1] + (n,)
    resize(y_i, y_shape)
    sg.tensors[y_i].quantization = quant([y_scale], [y_zp])
    if softmax is not None:
        resize(softmax.outputs[0], y_shape)
    return bytes(fbu.convert_object_to_bytearray(m))
