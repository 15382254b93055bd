"""A training blob on the host: a .tpb with its graph and training program, rebuilt from the
source model.

A .tpb carries a META section naming its source .tflite (with the source's CRC as model id) and
its scheme with explicit channels. Rebuilding from those must reproduce the blob byte for byte,
so the host-side view is exactly what the device runs.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from pathlib import Path

from ..errors import TinypropError
from ..frontend.graph import Graph
from ..frontend.tflite_reader import read_tflite
from ..program import DEFAULT_GRAD, DEFAULT_LOSS, TrainProgram
from .blob import inference_for, pack_blob, read_blob
from .kernels import DEFAULT_TARGET, ScratchPlan, plan_scratch
from .scheme import SparseScheme, scheme_from_dict
from .train_plan import build_program


@dataclass
class TrainingBlob:
    """A training blob (`blob`), the graph and program it was packed from, its source model and,
    when it was read from one, its .tpb file (`path`). An engine runs it (engines.base.Model)."""

    graph: Graph
    program: TrainProgram
    blob: bytes
    source: Path
    path: Path | None = None
    scratch: ScratchPlan | None = None  # the kernels' scratch plan (None: reference kernels)
    labels: tuple[str, ...] | None = None  # the class names the blob carries (LABL), or None

    @property
    def name(self) -> str:
        return str(self.path) if self.path is not None else f"the blob of {self.source.name}"

    @property
    def autoencoder(self) -> bool:
        """Whether a step minimises the reconstruction error (--loss mse), not a class's."""
        return self.program.loss == "mse"

    @property
    def classes(self) -> int:
        return self.graph.tensors[self.graph.logits_op().outputs[0]].size


def make_blob(model: Path, scheme: SparseScheme, momentum: bool = False,
              target: str = DEFAULT_TARGET, limit: int | None = None, patch: str = "auto",
              input_rows: bool = False, grad: str = DEFAULT_GRAD,
              labels: tuple[str, ...] | None = None, loss: str = DEFAULT_LOSS) -> TrainingBlob:
    """The blob of `model` trained by `scheme`; `momentum` reserves its optimizer state;
    `target` names the kernels it plans scratch for (tinyprop.compile.kernels), within `limit`
    bytes of device memory (arena + params region) when given; `patch` and `input_rows` how
    the frozen first ops may run tile by tile (train_plan.build_program); `grad` is the
    gradient maps' format (program.GRAD_FORMATS); `labels` the class names it carries (the
    caller reads them beside the model: training.head.read_labels); `loss` what a step
    minimises (program.LOSSES)."""
    graph = read_tflite(model)
    raw = Path(model).read_bytes()
    program = build_program(graph, scheme, momentum, patch, input_rows,
                            _arena_limit(graph, scheme, momentum, limit, grad), grad, loss)
    meta = {"source": str(Path(model).resolve()), "scheme": scheme.to_json(), "grad": grad}
    if loss != DEFAULT_LOSS:  # a classifier's blob stays as it always was
        meta["loss"] = loss
    if momentum:  # only then: a blob without optimizer state stays as it always was
        meta["momentum"] = True
    if patch != "auto":  # likewise for the layout options
        meta["patch"] = patch
    if input_rows:
        meta["input_rows"] = True
    infer = inference_for(graph, program)
    scratch = None
    if target != "ref":  # likewise: a reference-kernels blob has no scratch plan
        scratch = plan_scratch(graph, target, program, program.region_bytes, limit, infer=infer)
        meta["target"] = target
    if limit is not None and (target != "ref" or program.layout.stage is not None):
        meta["scratch_limit"] = limit  # the device's limit: the scratch and the stage fit it
    blob = pack_blob(graph, zlib.crc32(raw), train=program, meta=meta, scratch=scratch,
                     infer=infer, labels=labels)
    return TrainingBlob(graph, program, blob, Path(model), scratch=scratch, labels=labels)


def _arena_limit(graph: Graph, scheme: SparseScheme, momentum: bool,
                 limit: int | None, grad: str = DEFAULT_GRAD) -> int | None:
    """What a device `limit` (arena + params region) leaves the arena for this scheme."""
    if limit is None:
        return None
    region = build_program(graph, scheme, momentum, "none", grad=grad).region_bytes
    return limit - region


def load_blob(path: Path, model: Path | None = None) -> TrainingBlob:
    """A .tpb with its source model (from META, or `model` when the file moved)."""
    path = Path(path)
    if not path.exists():
        raise TinypropError(f"{path}: no such file; create it with tinyprop convert")
    raw = path.read_bytes()
    info = read_blob(raw, str(path))
    if "META" not in info.sections or "TRAN" not in info.sections:
        raise TinypropError(f"{path}: has no training program; re-run tinyprop convert")
    meta = json.loads(info.sections["META"])
    src = Path(model) if model else Path(meta["source"])
    if not src.exists():
        raise TinypropError(f"{path}: its source model {src} is missing; pass --model SRC.tflite")
    if zlib.crc32(src.read_bytes()) != info.model_id:
        raise TinypropError(f"{path}: was converted from another model than {src}; pass the "
                            "original with --model or re-run tinyprop convert")
    tb = make_blob(src, scheme_from_dict(meta["scheme"]), bool(meta.get("momentum")),
                   meta.get("target", "ref"), meta.get("scratch_limit"),
                   meta.get("patch", "auto"), bool(meta.get("input_rows")),
                   meta.get("grad", "float32"), info.labels, meta.get("loss", DEFAULT_LOSS))
    if tb.blob != raw:
        raise TinypropError(f"{path}: rebuilding it from {src} gives a different blob (made by "
                            "another tinyprop version?); re-run tinyprop convert")
    tb.path = path
    return tb
