"""The op registry (frontend/ops.py) is the one place the host says what an op kind is: its codes
are the C core's, an op registered from here alone runs through the graph, the reference forward
and backward, the tiled stage and the training plan; and the training program's module is what
lets reference/ and compile/ not import each other."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest
from opgen import _Builder, random_input
from tinyprop.compile.memory import Buf
from tinyprop.compile.patch import plan_stage, run_stage, stage_splits
from tinyprop.compile.scheme import LayerUpdate, SparseScheme, with_classifier
from tinyprop.compile.train_plan import build_program
from tinyprop.frontend import ops
from tinyprop.frontend.graph import Graph
from tinyprop.program import F_GRAD_IN0
from tinyprop.reference.backward import step_gradients
from tinyprop.reference.forward import Forward
from tinyprop.reference.gradmap import GradMap

ROOT = Path(__file__).resolve().parents[1]
HOST = ROOT / "host" / "tinyprop"


def test_codes_are_the_c_table():
    """The registry and the C op table (firmware/core/tp_ops.h) agree on every kind's code, on
    which kinds have weights and on the scratch their integer-map input gradient asks for (the
    training plan's, the loader's and the kernels')."""
    header = (ROOT / "firmware" / "core" / "tp_ops.h").read_text()
    rows = re.findall(r"X\((\w+),\s*(\d+),\s*\w+,\s*(\d+),\s*\d+,\s*\d+,\s*(\d+),\s*(\d+)\)",
                      header)
    assert len(rows) >= 9
    assert {k: (ops.spec(k).code, ops.spec(k).weighted, ops.spec(k).grad_scratch)
            for k in ops.kinds()} == {
        k: (int(code), bool(int(w)), (int(qr), int(qc))) for k, code, w, qr, qc in rows}


# A test-only op: y = -x around the zero point (input and output share one quantization).

def _negate(graph, op, p, values) -> np.ndarray:
    zp = graph.tensors[op.inputs[0]].zp
    return np.clip(2 * zp - values[op.inputs[0]].astype(np.int64), -128, 127).astype(np.int8)


def _negate_grad(graph, op, p, pos, dy, buf, values) -> np.ndarray:
    return (buf - dy).astype(np.float32)


def _negate_grad_int(graph, op, p, pos, dy: GradMap, values):
    return -dy.q, dy.e


@pytest.fixture
def negate():
    spec = ops.register(ops.OpSpec("TEST_NEGATE", 200, forward=_negate, grad=_negate_grad,
                                   grad_int=_negate_grad_int, window="same"))
    yield spec
    ops.unregister(spec.kind)


def _graph(seed: int) -> tuple[Graph, int]:
    """CONV 3x3 -> TEST_NEGATE -> DEPTHWISE 3x3/2 -> CONV 1x1 -> MEAN -> FULLY_CONNECTED;
    returns the graph and the index of the negation."""
    b = _Builder(np.random.default_rng([seed, 0x4E47]))
    x = b.act("x", (1, 12, 12, 3))
    y = b.conv(x, "CONV_2D", k=(3, 3), cout=8)
    t = b.tensors[y]
    neg = b.act("neg", t.shape, scale=t.s, zp=t.zp)
    k = b.op("TEST_NEGATE", [y], neg)
    y = b.conv(neg, "DEPTHWISE_CONV_2D", k=(3, 3), stride=(2, 2))
    y = b.conv(y, "CONV_2D", k=(1, 1), cout=8)
    t = b.tensors[y]
    pooled = b.act("mean", (1, 1, 1, 8), scale=t.s, zp=t.zp)
    b.op("MEAN", [y, b.const_int32("axes", [1, 2])], pooled, keep_dims=True)
    return b.graph(x, b.fc(pooled, 3), f"negate-{seed}"), k


def test_an_op_registered_here_runs_forward_tiled_and_backward(negate):
    graph, k = _graph(0)
    rng = np.random.default_rng(1)
    x = random_input(graph, rng)
    assert k not in {op.index for op in graph.weighted_ops()}
    # forward: the reference runs the registered kernel
    vals = Forward(graph).run(x, keep=True)
    op = graph.ops[k]
    assert np.array_equal(vals[op.outputs[0]], _negate(graph, op, None, vals))
    # the planner: a "same" window may tile; the stage through it gives the whole-tensor bits
    splits = stage_splits(graph)
    assert max(splits) > k + 1, splits
    st = plan_stage(graph, max(splits), (2, 2))
    assert st is not None and np.array_equal(run_stage(st, x), vals[st.output])
    # backward: the conv before the negation trains through its gradient, float32 and int8
    scheme = with_classifier(graph, SparseScheme("t", {0: LayerUpdate(0, True, [0, 3])}))
    for grad in ("float32", "int8"):
        prog = build_program(graph, scheme, grad=grad)
        assert prog.ops[k].flags & F_GRAD_IN0
        names = {b.name for b in prog.buffers}
        assert {Buf("g", op.inputs[0]), Buf("g", op.outputs[0])} <= names
        db, dw = step_gradients(prog, x, 1)[0]
        assert dw.shape == (2, 27) and np.all(np.isfinite(dw)) and np.any(dw != 0)


def test_the_negation_flips_the_gradient_it_passes(negate):
    """dX = -dY through the test op: the first conv's bias gradient is the opposite of the one
    through an op with the same forward whose gradient passes dY unchanged."""
    graph, k = _graph(2)
    x = random_input(graph, np.random.default_rng(3))
    scheme = with_classifier(graph, SparseScheme("t", {0: LayerUpdate(0, True, None)}))
    prog = build_program(graph, scheme, grad="float32")
    db, _ = step_gradients(prog, x, 0)[0]
    passing = ops.register(ops.OpSpec(
        "TEST_PASS", 201, forward=_negate, window="same",
        grad=lambda g, op, p, pos, dy, buf, values: (buf + dy).astype(np.float32)))
    try:
        graph.ops[k].kind = passing.kind
        db_pass, _ = step_gradients(prog, x, 0)[0]
    finally:
        ops.unregister(passing.kind)
    assert np.any(db != 0) and np.array_equal(db, -db_pass)


def test_a_taken_kind_or_code_is_refused(negate):
    with pytest.raises(ValueError, match="code 200.*already registered by TEST_NEGATE"):
        ops.register(ops.OpSpec("TEST_OTHER", 200))
    with pytest.raises(ValueError, match="op ADD .code 202.: kind or code already registered"):
        ops.register(ops.OpSpec("ADD", 202))


def _imports(path: Path) -> set[str]:
    """The tinyprop modules a module imports when it runs (an `if TYPE_CHECKING:` block's
    annotations-only imports left out), relative imports resolved."""
    pkg = "tinyprop." + ".".join(path.relative_to(HOST).with_suffix("").parts[:-1])
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and ast.unparse(node.test) == "TYPE_CHECKING" for n in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            base = pkg.rstrip(".").split(".")
            mod = node.module or ""
            if node.level:
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([mod] if mod else []))
            found |= {mod} | {f"{mod}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return {m for m in found if m.startswith("tinyprop.")}


# The one call from compile/ into reference/, inside its function: compile/auto.py's
# calibration runs the reference trainer (a full backward pass with a zero learning rate).
KNOWN = {("compile/auto.py", "tinyprop.reference.backward")}


def test_reference_and_compile_do_not_import_each_other():
    edges = set()
    for layer, other in (("reference", "compile"), ("compile", "reference")):
        for path in sorted((HOST / layer).glob("*.py")):
            for mod in _imports(path):
                if mod.startswith(f"tinyprop.{other}.") and mod.count(".") == 2:
                    edges.add((str(path.relative_to(HOST)), mod))
    assert edges == KNOWN
    shared = _imports(HOST / "program.py")
    assert not {m for m in shared if m.startswith(("tinyprop.compile", "tinyprop.reference"))}
