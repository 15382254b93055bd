"""Write trained parameters back into a copy of the original .tflite.

Only the bytes of the trained biases and weights change: every other byte of the flatbuffer
(graph, quantization, other constants) stays as it was, so the TFLite interpreter runs the file
exactly as it ran the original, with the new values.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tflite

from ..compile.blobfile import TrainingBlob
from ..errors import TinypropError
from .head import labels_path, read_labels


def buffer_spans(model_bytes: bytes) -> dict[int, tuple[int, int]]:
    """Tensor index -> (byte offset, length) of its constant data inside the flatbuffer."""
    m = tflite.Model.GetRootAsModel(model_bytes, 0)
    sg = m.Subgraphs(0)
    spans = {}
    for i in range(sg.TensorsLength()):
        b = m.Buffers(sg.Tensors(i).Buffer())
        o = b._tab.Offset(4)  # Buffer.data
        if o:
            spans[i] = (b._tab.Vector(o), b._tab.VectorLen(o))
    return spans


def export_tflite(source: Path, values: dict[int, np.ndarray], out: Path) -> Path:
    """Copy `source` to `out` with tensor data replaced by `values` (tensor index -> array)."""
    raw = bytearray(Path(source).read_bytes())
    spans = buffer_spans(bytes(raw))
    for ti, arr in values.items():
        if ti not in spans:
            raise TinypropError(f"{source}: tensor {ti} has no constant buffer to write; was the "
                                "blob converted from this model?")
        start, n = spans[ti]
        data = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
        if len(data) != n:
            raise TinypropError(f"{source}: tensor {ti} holds {n} bytes, trained values have "
                                f"{len(data)}; was the blob converted from this model?")
        raw[start : start + n] = data
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(bytes(raw))
    except OSError as exc:
        raise TinypropError(f"{out}: cannot write ({exc.strerror}); pass a writable path for "
                            "the .tflite") from None
    return out


def export_params(tb: TrainingBlob, params: bytes, out: Path) -> Path:
    """The fine-tuned .tflite of `tb` with a params region (an engine's, a checkpoint's)."""
    if len(params) != tb.program.region_bytes:
        raise TinypropError(f"{tb.name}: {len(params):,} bytes of parameters, its params region "
                            f"holds {tb.program.region_bytes:,}; give the parameters of a run "
                            "of this blob")
    export_tflite(tb.source, tb.program.unpack_params(params), out)
    names = tb.labels or read_labels(tb.source)
    if names is not None:  # a new head's class names go with the model
        labels_path(out).write_text("".join(f"{n}\n" for n in names))
    return out
