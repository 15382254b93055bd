"""Read an int8 .tflite flatbuffer into the graph IR with the TFLite schema parser (no interpreter).

Everything tinyprop cannot run exactly is refused here, with one line naming the operator, its
index and what is supported, so no later stage has to guess.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import tflite

from ..errors import TinypropError
from . import ops
from .graph import ACTIVATIONS, Graph, Op, Tensor

_OP_NAMES = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
_TYPE_NAMES = {v: k.lower() for k, v in vars(tflite.TensorType).items() if not k.startswith("_")}
_ACT_NAMES = {
    v: k for k, v in vars(tflite.ActivationFunctionType).items() if not k.startswith("_")
}
_PADDING = {tflite.Padding.SAME: "SAME", tflite.Padding.VALID: "VALID"}
# What the flatbuffer library raises on garbage, truncated or corrupt bytes.
_CORRUPT = (struct.error, ValueError, IndexError, KeyError, TypeError, OverflowError)


def _options(op, cls):
    table = op.BuiltinOptions()
    opts = cls()
    if table is not None:
        opts.Init(table.Bytes, table.Pos)
    return opts


class _Reader:
    def __init__(self, path: Path, buf: bytes):
        self.path = path
        self.buf = buf
        try:
            if len(buf) < 8 or buf[4:8] != b"TFL3":
                raise ValueError("no TFL3 identifier")
            self.model = tflite.Model.GetRootAsModel(buf, 0)
            if self.model.SubgraphsLength() < 1:
                raise ValueError("no subgraph")
        except _CORRUPT as exc:
            raise TinypropError(
                f"{path}: not a TensorFlow Lite flatbuffer ({exc}); pass a .tflite model file"
            ) from None

    def fail(self, op_index: int, kind: str, what: str) -> TinypropError:
        return TinypropError(f"{self.path}: operator #{op_index} {kind}: {what}")

    def tensor(self, sg, i: int) -> Tensor:
        t = sg.Tensors(i)
        q = t.Quantization()
        scale = np.zeros(0, np.float32)
        zp = np.zeros(0, np.int64)
        qdim = 0
        if q is not None and q.ScaleLength() > 0:
            scale = q.ScaleAsNumpy().astype(np.float32)
            zp = q.ZeroPointAsNumpy().astype(np.int64)
            qdim = q.QuantizedDimension()
        dtype = _TYPE_NAMES.get(t.Type(), f"type{t.Type()}")
        shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() > 0 else ()
        data = None
        buf = self.model.Buffers(t.Buffer()) if t.Buffer() < self.model.BuffersLength() else None
        if buf is not None:
            raw = None
            if buf.DataLength() > 0:
                raw = buf.DataAsNumpy().tobytes()
            elif hasattr(buf, "Offset") and buf.Offset() > 1:
                raw = self.buf[buf.Offset() : buf.Offset() + buf.Size()]
            if raw is not None:
                np_type = {"int8": np.int8, "int32": np.int32, "uint8": np.uint8,
                           "int64": np.int64, "float32": np.float32, "int16": np.int16}
                if dtype not in np_type:
                    raise TinypropError(f"{self.path}: constant tensor {i} has type {dtype}")
                data = np.frombuffer(raw, dtype=np_type[dtype]).reshape(shape).copy()
        name = t.Name().decode("utf-8", "replace") if t.Name() else f"t{i}"
        return Tensor(i, name, shape, dtype, scale, zp, qdim, data)

    def read(self) -> Graph:
        m = self.model
        if m.SubgraphsLength() != 1:
            raise TinypropError(
                f"{self.path}: has {m.SubgraphsLength()} subgraphs; tinyprop supports one "
                "(no control flow)"
            )
        sg = m.Subgraphs(0)
        tensors = [self.tensor(sg, i) for i in range(sg.TensorsLength())]
        inputs = [int(i) for i in sg.InputsAsNumpy()]
        outputs = [int(i) for i in sg.OutputsAsNumpy()]
        if len(inputs) != 1 or len(outputs) != 1:
            raise TinypropError(
                f"{self.path}: has {len(inputs)} inputs and {len(outputs)} outputs; "
                "tinyprop supports one of each"
            )
        tin = tensors[inputs[0]]
        if tin.dtype != "int8" or tin.scale.size == 0:
            raise TinypropError(
                f"{self.path}: input tensor '{tin.name}' is {tin.dtype}, not quantized int8 "
                "(a float model?); `tinyprop convert MODEL --calib DIR` quantizes it for you, "
                "or convert it with full-integer quantization "
                "(converter.inference_input_type = tf.int8)"
            )
        ops = []
        for i in range(sg.OperatorsLength()):
            ops.append(self.op(sg, i, tensors))
        name = self.path.stem
        return Graph(tensors, ops, inputs, outputs, name=name)

    def op(self, sg, i: int, tensors: list[Tensor]) -> Op:
        raw = sg.Operators(i)
        code = m_code = self.model.OperatorCodes(raw.OpcodeIndex())
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        kind = _OP_NAMES.get(builtin, f"OP{builtin}")
        if builtin == tflite.BuiltinOperator.CUSTOM:
            kind = "CUSTOM:" + (m_code.CustomCode() or b"?").decode()
        read_options = getattr(self, "opt_" + kind.lower(), None)
        if kind not in ops.kinds() or read_options is None:
            supported = ", ".join(k for k in ops.kinds() if hasattr(self, "opt_" + k.lower()))
            raise self.fail(i, kind, f"not supported; tinyprop supports {supported}: rebuild "
                            "the model with those layers and convert it again")
        ins = [int(x) for x in raw.InputsAsNumpy()]
        outs = [int(x) for x in raw.OutputsAsNumpy()]
        op = Op(i, kind, ins, outs)
        self.check_types(op, tensors)
        read_options(raw, op, tensors)
        act = op.options.get("activation", "NONE")
        if act not in ACTIVATIONS:
            raise self.fail(i, kind,
                            f"fused activation {act} not supported; use NONE, RELU or RELU6")
        return op

    def check_types(self, op: Op, tensors: list[Tensor]) -> None:
        for pos, ti in enumerate(op.inputs + op.outputs):
            if ti < 0:
                continue
            t = tensors[ti]
            is_param = op.spec.weighted and pos in (1, 2)
            if op.spec.const_operand and pos == 1:
                continue
            if is_param and pos == 2:
                if t.dtype != "int32":
                    raise self.fail(op.index, op.kind, f"bias '{t.name}' is {t.dtype}, not int32")
                continue
            if t.dtype != "int8":
                what = "float32 (a float model?)" if t.dtype == "float32" else t.dtype
                raise self.fail(
                    op.index, op.kind,
                    f"tensor '{t.name}' is {what}; tinyprop runs int8 models with per-channel "
                    "int8 weights (full-integer post-training quantization)",
                )
            if t.scale.size == 0:
                raise self.fail(op.index, op.kind, f"tensor '{t.name}' has no quantization")
            if not np.all(np.isfinite(t.scale) & (t.scale > 0)):
                raise self.fail(op.index, op.kind, f"tensor '{t.name}' has a scale that is not a "
                                "finite positive number; re-quantize the model")
            if not is_param and t.scale.size != 1:
                raise self.fail(
                    op.index, op.kind, f"activation '{t.name}' is quantized per channel; "
                    "tinyprop expects per-tensor activations"
                )
            if is_param and np.any(t.zero_point != 0):
                raise self.fail(op.index, op.kind, f"weights '{t.name}' are not symmetric (zero "
                                "point != 0); tinyprop expects symmetric int8 weights")

    def _weights(self, op: Op, tensors: list[Tensor]) -> None:
        w = tensors[op.inputs[1]]
        channel_dim = len(w.shape) - 1 if op.spec.channels_last else 0
        if not w.is_const:
            raise self.fail(op.index, op.kind, "weights are not constant")
        if w.scale.size > 1 and w.quant_dim != channel_dim:
            raise self.fail(op.index, op.kind, f"weights quantized along dimension {w.quant_dim}; "
                            f"expected the output-channel dimension {channel_dim}")
        if len(op.inputs) > 2 and op.inputs[2] >= 0 and not tensors[op.inputs[2]].is_const:
            raise self.fail(op.index, op.kind, "bias is not constant")

    def opt_conv_2d(self, raw, op: Op, tensors: list[Tensor]) -> None:
        o = _options(raw, tflite.Conv2DOptions)
        if o.DilationHFactor() not in (0, 1) or o.DilationWFactor() not in (0, 1):
            raise self.fail(op.index, op.kind, f"dilation {o.DilationHFactor()}x"
                            f"{o.DilationWFactor()} not supported; use dilation_rate=1")
        self._weights(op, tensors)
        op.options = dict(stride=(o.StrideH(), o.StrideW()), padding=_PADDING[o.Padding()],
                          activation=_ACT_NAMES.get(o.FusedActivationFunction(), "?"))

    def opt_depthwise_conv_2d(self, raw, op: Op, tensors: list[Tensor]) -> None:
        o = _options(raw, tflite.DepthwiseConv2DOptions)
        if o.DilationHFactor() not in (0, 1) or o.DilationWFactor() not in (0, 1):
            raise self.fail(op.index, op.kind, f"dilation {o.DilationHFactor()}x"
                            f"{o.DilationWFactor()} not supported; use dilation_rate=1")
        self._weights(op, tensors)
        cin = tensors[op.inputs[0]].shape[3]
        cout = tensors[op.inputs[1]].shape[3]
        op.options = dict(stride=(o.StrideH(), o.StrideW()), padding=_PADDING[o.Padding()],
                          activation=_ACT_NAMES.get(o.FusedActivationFunction(), "?"),
                          depth_multiplier=cout // cin)

    def opt_fully_connected(self, raw, op: Op, tensors: list[Tensor]) -> None:
        o = _options(raw, tflite.FullyConnectedOptions)
        if o.WeightsFormat() != 0:
            raise self.fail(op.index, op.kind, "shuffled weights format not supported")
        self._weights(op, tensors)
        op.options = dict(activation=_ACT_NAMES.get(o.FusedActivationFunction(), "?"))

    def opt_add(self, raw, op: Op, tensors: list[Tensor]) -> None:
        o = _options(raw, tflite.AddOptions)
        a, b = (tensors[i] for i in op.inputs[:2])
        if a.shape != b.shape or a.is_const or b.is_const:
            raise self.fail(op.index, op.kind, f"inputs {a.shape} and {b.shape}: tinyprop supports "
                            "ADD of two activations of the same shape (residual blocks)")
        op.options = dict(activation=_ACT_NAMES.get(o.FusedActivationFunction(), "?"))

    def opt_average_pool_2d(self, raw, op: Op, tensors: list[Tensor]) -> None:
        o = _options(raw, tflite.Pool2DOptions)
        ti, to = tensors[op.inputs[0]], tensors[op.outputs[0]]
        if ti.s != to.s or ti.zp != to.zp:
            raise self.fail(op.index, op.kind, "input and output quantization differ")
        op.options = dict(stride=(o.StrideH(), o.StrideW()), padding=_PADDING[o.Padding()],
                          filter=(o.FilterHeight(), o.FilterWidth()),
                          activation=_ACT_NAMES.get(o.FusedActivationFunction(), "?"))

    opt_max_pool_2d = opt_average_pool_2d  # the same options, the same one quantization

    def opt_mean(self, raw, op: Op, tensors: list[Tensor]) -> None:
        o = _options(raw, tflite.ReducerOptions)
        axes_t = tensors[op.inputs[1]]
        ti = tensors[op.inputs[0]]
        axes = sorted(int(a) % 4 for a in np.atleast_1d(axes_t.data)) if axes_t.is_const else None
        if len(ti.shape) != 4 or axes != [1, 2]:
            raise self.fail(op.index, op.kind,
                            f"axes {axes} of a {len(ti.shape)}-D input; tinyprop "
                            "supports MEAN over H and W of an NHWC tensor")
        op.options = dict(keep_dims=bool(o.KeepDims()))

    def opt_pad(self, raw, op: Op, tensors: list[Tensor]) -> None:
        pads_t = tensors[op.inputs[1]]
        ti, to = tensors[op.inputs[0]], tensors[op.outputs[0]]
        if not pads_t.is_const or len(ti.shape) != 4:
            raise self.fail(op.index, op.kind, "paddings must be constant on a 4-D input")
        pads = pads_t.data.reshape(4, 2).astype(int)
        if pads[0].any() or pads[3].any():
            raise self.fail(op.index, op.kind, "padding of batch or channels not supported")
        if ti.s != to.s or ti.zp != to.zp:
            raise self.fail(op.index, op.kind, "input and output quantization differ")
        op.options = dict(pads=((int(pads[1, 0]), int(pads[1, 1])),
                                (int(pads[2, 0]), int(pads[2, 1]))))

    def opt_reshape(self, raw, op: Op, tensors: list[Tensor]) -> None:
        ti, to = tensors[op.inputs[0]], tensors[op.outputs[0]]
        if ti.s != to.s or ti.zp != to.zp or ti.size != to.size:
            raise self.fail(op.index, op.kind, "input and output quantization or size differ")
        op.inputs = op.inputs[:1]

    def opt_softmax(self, raw, op: Op, tensors: list[Tensor]) -> None:
        o = _options(raw, tflite.SoftmaxOptions)
        to = tensors[op.outputs[0]]
        if abs(to.s - 1 / 256) > 1e-9 or to.zp != -128:
            raise self.fail(op.index, op.kind, "int8 softmax output must have scale 1/256, zero "
                            "point -128 (the TFLite int8 spec)")
        op.options = dict(beta=float(o.Beta()))


def read_tflite(path: str | Path) -> Graph:
    """Parse a .tflite file into the IR; TinypropError (one line) for anything unsupported."""
    path = Path(path)
    if not path.exists():
        raise TinypropError(f"{path}: no such file; pass the path of an int8 .tflite model")
    if path.is_dir():
        raise TinypropError(f"{path}: is a directory; pass the path of an int8 .tflite model")
    reader = _Reader(path, path.read_bytes())
    try:
        return reader.read()
    except _CORRUPT as exc:  # a truncated or corrupt flatbuffer fails anywhere in the parse
        raise TinypropError(
            f"{path}: not a valid TensorFlow Lite flatbuffer (truncated or corrupt: {exc}); "
            "pass a complete .tflite model file"
        ) from None
