"""The Tiny Training Engine comparison: Keras MobileNetV2-w0.35 at 128x128, int8, with TTE's
"99 KB" scheme, planned by tinyprop and run one real step in the C core.

Slow: building and quantizing the model takes about 30 s the first time (then it is cached under
build/tte/, keyed by the TensorFlow version)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from tinyprop.bench.tte import (
    BIAS_LAST,
    WEIGHTS,
    build_mbv2_tflite,
    convolutions,
    default_model_path,
    measure,
    tte_scheme,
)
from tinyprop.compile.blobfile import make_blob
from tinyprop.compile.planner import check_plan
from tinyprop.engines import HParams
from tinyprop.engines.native import NativeEngine, blob_status
from tinyprop.frontend.tflite_reader import read_tflite

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def mbv2():
    path = build_mbv2_tflite(default_model_path())
    return path, read_tflite(path)


def test_scheme_selects_exactly_the_listed_layers_and_fractions(mbv2):
    _, graph = mbv2
    convs = convolutions(graph)
    assert len(convs) == 52  # first conv, block 0 (dw, project), 16 blocks x 3, last 1x1 conv
    scheme = tte_scheme(graph)
    cls = graph.logits_op()
    assert cls.kind == "FULLY_CONNECTED"  # not counted as a convolution
    assert set(scheme.layers) == set(convs[-BIAS_LAST:]) | {cls.index}
    for n, op in enumerate(convs):
        lu = scheme.layers.get(op)
        assert (lu is not None and lu.bias) == (n >= len(convs) - BIAS_LAST), n
        if n in WEIGHTS:
            o = graph.ops[op]
            w = graph.tensors[o.inputs[1]]
            assert o.kind == "CONV_2D" and w.shape[1:3] == (1, 1), n  # block expansion convs
            assert len(lu.channels) == WEIGHTS[n] * w.shape[0], n
        else:
            assert lu is None or not lu.weights, n
    n_cls = graph.tensors[cls.inputs[1]].shape[0]
    assert scheme.layers[cls.index].bias and scheme.layers[cls.index].channels == list(
        range(n_cls))


def test_plan_is_valid_and_a_c_step_measures_exactly_the_plan(mbv2):
    path, graph = mbv2
    tb = make_blob(path, tte_scheme(graph))
    prog = tb.program
    check_plan(prog.buffers, prog.buffer_offsets, prog.arena_bytes)
    assert blob_status(tb.blob) == "TP_OK"
    eng = NativeEngine(tb, HParams(lr=0.05, seed=1))
    assert len(eng.params()) == prog.params_bytes
    # random weights: activations fade to zero through the depth, so the step changes nothing;
    # it still walks every buffer of the plan, which is what is measured here
    x = np.random.default_rng(0).integers(-128, 128, (128, 128, 3), dtype=np.int8)
    r = eng.train(x, 3)
    assert r.memory["arena_peak"] == prog.arena_bytes and not r.skipped
    fig = measure(path)
    assert fig["arena_peak"] == prog.arena_bytes and fig["trainable_bytes"] == prog.params_bytes
    assert fig["total"] == fig["arena_peak"] + fig["trainable_bytes"]
    # the forward pass at 128x128 sets the peak; the sparse backward fits under it
    assert fig["arena_peak"] == fig["inference_arena"]


def test_script_prints_and_writes_the_figures(mbv2, tmp_path):
    path, _ = mbv2
    out = tmp_path / "tte.json"
    r = subprocess.run([sys.executable, "-m", "tinyprop.bench.tte", "--model", str(path), "--json",
                        str(out)], capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    fig = json.loads(out.read_text())
    assert f"= {fig['total']:,} B" in r.stdout and "vs TTE's 141 KB" in r.stdout
    assert fig["tte_peak_bytes"] == 141 * 1024
