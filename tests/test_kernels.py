"""Op-level tests of the C kernels against the NumPy reference: for every op kind, graphs with
random shapes, strides, paddings, zero points, depth multipliers and per-channel scales
(tests/opgen.py), run by the C core built for this machine. A failure names the op and the drawn
parameters (and the seed that reproduces them), not just "the network differs".

Forward: the op's int8 output equals the reference's. Gradients: a few training steps of a small
graph around the op (its input gradient reaches a trained layer below it; a weighted op trains
its own bias and some of its rows) leave the parameters and losses bit-identical to the NumPy
reference trainer's, with each gradient format (float32, int16 and int8 maps).
"""

from __future__ import annotations

import zlib
from pathlib import Path

import modelgen
import numpy as np
import pytest
from opgen import FORWARD_KINDS, GRADIENT_KINDS, forward_case, random_input, training_case
from tinyprop.compile.blob import pack_blob
from tinyprop.compile.blobfile import TrainingBlob, make_blob
from tinyprop.compile.scheme import LayerUpdate, parse_scheme
from tinyprop.compile.train_plan import build_program
from tinyprop.engines import BlobModel, HParams
from tinyprop.engines.native import NativeEngine, blob_fault, blob_status
from tinyprop.engines.reference import ReferenceEngine
from tinyprop.frontend.tflite_reader import read_tflite
from tinyprop.program import F2_REDUCED, F_GRAD_IN0, GRAD_FORMATS
from tinyprop.reference.backward import ReferenceTrainer
from tinyprop.reference.forward import Forward

CASES = 12  # random cases per op kind (each a few milliseconds)
STEPS = 3


@pytest.mark.parametrize("kind", FORWARD_KINDS)
def test_forward_kernel_equals_reference(kind):
    for seed in range(CASES):
        case = forward_case(kind, seed)
        session = NativeEngine(BlobModel(case.name, pack_blob(case.graph, 0), case.graph))
        forward = Forward(case.graph)
        rng = np.random.default_rng(seed)
        for _ in range(2):
            x = random_input(case.graph, rng)
            ours, theirs = session.infer(x), forward.run(x)
            assert np.array_equal(ours, theirs), (
                f"{case.name}: {np.count_nonzero(ours != theirs)} of {theirs.size} outputs "
                f"differ, first at {np.argwhere(ours != theirs)[0].tolist()}")


def _sink(case):
    """The case with its first layer training only its bias: with integer maps the op under
    test (or the op above) then writes that layer's gradient as channel sums (a sink)."""
    case.scheme.layers[0] = LayerUpdate(0, True, None)
    return case


@pytest.mark.parametrize("grad,sink", [(g, False) for g in GRAD_FORMATS] +
                         [("int16", True), ("int8", True)])
@pytest.mark.parametrize("kind", GRADIENT_KINDS)
def test_gradient_kernels_equal_reference(kind, grad, sink):
    for seed in range(CASES):
        case = training_case(kind, seed)
        if sink:
            case = _sink(case)
        prog = build_program(case.graph, case.scheme, grad=grad)
        if sink and kind != "FULLY_CONNECTED":  # FC reads the layer through a RESHAPE: no sink
            assert prog.ops[0].flags2 & F2_REDUCED, case.name
        blob = pack_blob(case.graph, 0, train=prog)
        tb = TrainingBlob(case.graph, prog, blob, source=Path(case.name))
        ours = NativeEngine(tb, HParams(lr=0.05, seed=seed))
        theirs = ReferenceTrainer(prog, lr=0.05, seed=seed)
        rng = np.random.default_rng(seed)
        n_cls = case.graph.tensors[case.graph.logits_op().outputs[0]].size
        for step in range(STEPS):
            x, label = random_input(case.graph, rng), int(rng.integers(n_cls))
            a, b = ours.train(x, label), theirs.train_step(x, label)
            assert np.float32(a.loss).tobytes() == np.float32(b.loss).tobytes(), \
                f"{case.name}: loss of step {step} differs ({a.loss} vs {b.loss})"
            assert ours.params() == theirs.params_bytes(), (
                f"{case.name}: parameters differ after step {step} "
                f"(crc {zlib.crc32(ours.params()):08x} vs {zlib.crc32(theirs.params_bytes()):08x})")


def test_generated_cases_cover_what_they_claim():
    """The drawn parameters reach the corners the kernels must handle (not all defaults)."""
    seen: dict[str, set] = {"stride2": set(), "valid": set(), "mult>1": set(), "kxk": set()}
    for kind in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        for seed in range(CASES):
            op = forward_case(kind, seed).graph.ops[-1]
            seen["stride2"].add(2 in op.options["stride"])
            seen["valid"].add(op.options["padding"] == "VALID")
            seen["mult>1"].add(op.options.get("depth_multiplier", 1) > 1)
    for seed in range(CASES):
        g = forward_case("CONV_2D", seed).graph
        seen["kxk"].add(g.tensors[g.ops[-1].inputs[1]].shape[1] > 1)
    assert all(v == {True, False} for v in seen.values()), seen
    # per-channel requantization shifts of both signs
    from tinyprop.frontend.opparams import op_params

    shifts = np.concatenate([op_params(g, g.ops[-1]).shift for g in
                             (forward_case("CONV_2D", s).graph for s in range(CASES))])
    assert (shifts > 0).any() and (shifts < 0).any()


def _train_both(tb, xs, steps: int) -> None:
    """C and reference side by side from one blob: each step's loss and prediction agree, the
    arena's high-water mark is within the plan, and the parameters end equal."""
    ours = NativeEngine(tb, HParams(lr=0.05, seed=3))
    theirs = ReferenceEngine(tb, HParams(lr=0.05, seed=3))
    for step in range(steps):
        x, label = xs[step % len(xs)], step % tb.classes
        a, b = ours.train(x, label), theirs.train(x, label)
        assert (a.loss, a.prediction) == (b.loss, b.prediction), step
        assert a.memory["arena_peak"] <= tb.program.arena_bytes
    assert ours.params() == theirs.params()


@pytest.mark.parametrize("grad", GRAD_FORMATS)
def test_a_keras_cnn_trains_through_its_max_pools_bit_exactly(grad):
    """modelgen's maxpool_cnn (conv, max pool 2x2, conv, max pool 3x3/2 SAME, MEAN, FC) with
    its three weighted layers trained: both max pools pass their gradient down (their inputs
    kept for the backward), and the C core trains as the reference does."""
    path = modelgen.build_tflite("maxpool_cnn")
    graph = read_tflite(path)
    tb = make_blob(path, parse_scheme(graph, "last:3"), grad=grad)
    pools = [op.index for op in graph.ops if op.kind == "MAX_POOL_2D"]
    assert len(pools) == 2 and all(tb.program.ops[k].flags & F_GRAD_IN0 for k in pools)
    _train_both(tb, modelgen.sample_inputs(path, 6, seed=11), 12)


def test_a_max_pool_runs_tile_by_tile_in_the_frozen_first_ops():
    """The same model with only its last conv and FC trained and the smallest arena: the first
    conv and max pool run as a tiled stage, and inference and training stay the reference's."""
    path = modelgen.build_tflite("maxpool_cnn")
    graph = read_tflite(path)
    tb = make_blob(path, parse_scheme(graph, "last:2"), patch="min")
    stage = tb.program.layout.stage
    assert stage is not None and "MAX_POOL_2D" in {op.kind for op in graph.ops[:stage.n_ops]}
    xs = modelgen.sample_inputs(path, 6, seed=12)
    c = NativeEngine(tb)
    assert all(np.array_equal(c.infer(x), Forward(graph).run(x)) for x in xs)
    _train_both(tb, xs, 8)


def test_a_max_pool_changing_the_quantization_is_refused_in_one_line():
    """TFLite's int8 max pool keeps its input's scale and zero point; a blob whose max pool
    does not is refused by the loader, naming the op and the check."""
    for what in ("zero_point", "scale"):
        g = forward_case("MAX_POOL_2D", 0).graph
        assert blob_status(pack_blob(g, 0)) == "TP_OK"
        y = g.tensors[g.ops[-1].outputs[0]]
        if what == "zero_point":
            y.zero_point = y.zero_point ^ 1
        else:
            y.scale = y.scale * np.float32(2)
        assert blob_fault(pack_blob(g, 0)) == (
            f"TP_ERR_BLOB_INVALID: OPS record {g.ops[-1].index}: the operands' shapes, "
            "quantization or parameter counts do not fit the op's kind (check op_shapes)"), what
