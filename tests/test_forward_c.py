"""The C core's forward pass (firmware/, built for this machine) equals the NumPy reference bit for
bit: on the real MLPerf VWW model over every vww-mini image and on every generated test model. Also
the arena high-water mark it measures. (Op by op: test_kernels.py; the build: test_firmware.py.)"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from tinyprop.compile.blob import T_ARENA, pack_blob, read_blob
from tinyprop.data.datasets import load_split
from tinyprop.device.firmware import core_library
from tinyprop.engines import BlobModel
from tinyprop.engines.native import NativeEngine
from tinyprop.errors import TinypropError
from tinyprop.frontend.tflite_reader import read_tflite
from tinyprop.reference.forward import Forward


@pytest.fixture(scope="module")
def vww(vww_model_path):
    graph = read_tflite(vww_model_path)
    blob = pack_blob(graph, zlib.crc32(vww_model_path.read_bytes()))
    return graph, blob


@pytest.mark.slow  # all 397 images
def test_vww_every_image_bit_exact(vww, vww_data_dir):
    graph, blob = vww
    xs, labels, names = load_split(vww_data_dir, "all", graph.input.s, graph.input.zp)
    assert len(xs) == 397
    session, forward = NativeEngine(BlobModel("vww", blob)), Forward(graph)
    ours = np.stack([session.infer(x)[0] for x in xs])
    theirs = np.stack([forward.run(x)[0] for x in xs])
    bad = [names[i] for i in np.flatnonzero((ours != theirs).any(axis=1))]
    assert not bad, f"{len(bad)} images differ, first {bad[:3]}"
    # a working model, not two equal wrong answers: the model is ~85 % accurate on COCO photos
    assert (ours.argmax(axis=1) == labels).mean() > 0.75


def test_prediction_and_measured_arena_peak(vww):
    graph, blob = vww
    session = NativeEngine(BlobModel("vww", blob))
    x = np.random.default_rng(3).integers(-128, 128, graph.input.shape, dtype=np.int8)
    y = session.infer(x)
    r = session.last_result
    logits = Forward(graph).run(x, keep=True)[graph.logits_op().outputs[0]]
    assert r.prediction == int(np.argmax(logits))
    # every activation an op touches, at its planned offset: the peak is where they end
    parsed = read_blob(blob)
    used = {i for op in parsed.ops for i in (*op.inputs, op.output) if i != 0xFFFF}
    ends = [parsed.tensors[i].offset + parsed.tensors[i].size for i in used
            if parsed.tensors[i].flags & T_ARENA]
    assert r.arena_peak == max(ends) <= session.requirements.arena_infer
    assert y.shape == (1, 2) and y.dtype == np.int8


@pytest.mark.slow
def test_generated_models_bit_exact():
    pytest.importorskip("tensorflow")
    modelgen = pytest.importorskip("modelgen")
    for name in modelgen.MODELS:
        path = modelgen.build_tflite(name)
        graph = read_tflite(path)
        session, forward = NativeEngine(BlobModel(name, pack_blob(graph, 0))), Forward(graph)
        for i, x in enumerate(modelgen.sample_inputs(path, 6, seed=11)):
            ours, theirs = session.infer(x), forward.run(x)
            assert np.array_equal(ours, theirs), (name, i, ours.ravel()[:8], theirs.ravel()[:8])


def test_without_gcc_the_host_engine_says_what_to_install(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # no gcc, no make
    with pytest.raises(TinypropError) as e:
        core_library()
    assert "needs gcc" in str(e.value) and "apt-get install gcc make" in str(e.value)
    assert len(str(e.value).splitlines()) == 1
