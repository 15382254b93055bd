"""`tinyprop convert` as a library: an int8 .tflite and a scheme spec to a training blob.

    tb = build(Path("vww_96_int8.tflite"), "auto", "256KB", calib=Path("vww-mini"),
               calib_shift="haze")                  # a TrainingBlob: graph, program, blob bytes
    figures(tb.program, tb.blob)                   # its memory figures (tinyprop.compile.report)
"""

from __future__ import annotations

from pathlib import Path

from ..errors import TinypropError
from ..frontend.tflite_reader import read_tflite
from ..program import DEFAULT_GRAD, DEFAULT_LOSS
from .auto import auto_scheme, calibration_samples
from .blobfile import TrainingBlob, make_blob
from .budget import DEFAULT_RESERVE, Room, over_budget, parse_budget
from .kernels import DEFAULT_TARGET, check_target
from .scheme import parse_scheme
from .train_plan import build_program

PATCH_MODES = ("auto", "min", "none")


def build(model: Path, scheme: str, budget: str | Room | None, calib: Path | None = None,
          reserve: str | int = DEFAULT_RESERVE, calib_shift: str = "none",
          momentum: bool = False, target: str = DEFAULT_TARGET, patch: str = "auto",
          input_rows: bool = False, grad: str = DEFAULT_GRAD,
          labels: tuple[str, ...] | None = None, loss: str = DEFAULT_LOSS,
          pixels: str | None = None) -> TrainingBlob:
    """The blob of `model` trained by `scheme` (bias-only, bias-last:N, last:K, auto, or a
    .json file), under `budget` when given (a size less `reserve`, or a board's Room); `auto`
    calibrates on the train split of `calib` seen through `calib_shift`. `momentum` plans the
    optimizer state (one float32 velocity per trained parameter); `target` the scratch of its
    kernels (tinyprop.compile.kernels), within the budget: the scheme is chosen first, without
    it. `patch` (auto, min, none) and `input_rows`: how the frozen first ops may run tile by
    tile (memory.choose_layout); `grad` the gradient maps' format (program.GRAD_FORMATS),
    which the scheme search plans with. `labels`: the class names the blob carries (LABL;
    the caller reads them beside the model, training.head.read_labels); `loss` what a step
    minimises (program.LOSSES: mse for an autoencoder); `pixels` the pixel range of `calib`'s
    images (None: the model input's own, datasets.input_pixels)."""
    if patch not in PATCH_MODES:
        raise TinypropError(f"--patch {patch}: unknown; use one of {', '.join(PATCH_MODES)}")
    check_target(target)
    graph = read_tflite(model)
    if isinstance(budget, Room) or budget is None:
        room = budget
    else:
        room = Room(parse_budget(budget), reserve if isinstance(reserve, int)
                    else parse_budget(reserve, "--reserve"))
    if scheme == "auto":
        if room is None:
            raise TinypropError("--scheme auto needs --budget (e.g. --budget 256KB) or --board")
        samples = None
        if calib is not None:
            from ..data.datasets import load_split

            xs, ys, _ = load_split(calib, "train", graph.input.s, graph.input.zp,
                                   calib_shift, graph.input.shape[1:], pixels=pixels)
            samples = calibration_samples(xs, ys)
        sch, prog = auto_scheme(graph, room, samples, momentum=momentum, patch=patch,
                                input_rows=input_rows, grad=grad, loss=loss)
    else:
        sch = parse_scheme(graph, scheme)
        prog = build_program(graph, sch, momentum, "none", grad=grad, loss=loss)
        if room is not None:
            prog = build_program(graph, sch, momentum, patch, input_rows,
                                 room.scratch_limit(prog) - prog.region_bytes, grad, loss)
            if not room.fits(prog):
                err = over_budget(prog, room)
                if patch == "none":  # the first ops in tiles might have fitted
                    err = TinypropError(f"{err}, or drop --patch none")
                raise err
    limit = room.scratch_limit(prog) if room is not None else None
    try:
        return make_blob(model, sch, momentum, target, limit, patch, input_rows, grad, labels,
                         loss)
    except ValueError as exc:  # --input-rows on a model whose first ops cannot be tiled
        raise TinypropError(f"--input-rows: {exc}; convert without it") from exc
