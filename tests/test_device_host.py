"""The device firmware (firmware/apps/device/tp_device.c) on the POSIX host board, driven by
tinyprop.device.device over real pipes: training equals the NumPy reference bit for bit, on a
generated model and on the MLPerf VWW model. Also the shared model fixtures and helpers of the
other device tests."""

from __future__ import annotations

import functools
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from modelgen import build_tflite, sample_inputs
from tinyprop.compile.blob import pack_blob
from tinyprop.compile.kernels import plan_scratch
from tinyprop.compile.scheme import parse_scheme
from tinyprop.compile.train_plan import build_program
from tinyprop.data.datasets import load_dataset, read_rgb, to_model_input
from tinyprop.device.boards import open_board
from tinyprop.device.device import write_bulk_file
from tinyprop.frontend.tflite_reader import read_tflite
from tinyprop.program import DEFAULT_GRAD, TrainProgram
from tinyprop.reference.backward import ReferenceTrainer

LR, SEED = 0.05, 7


@dataclass
class Model:
    """A training blob and what the reference needs to follow it."""

    program: TrainProgram
    blob: bytes
    inputs: np.ndarray  # int8 samples, one a row
    labels: np.ndarray

    def reference(self, steps: int, lr: float = LR, seed: int = SEED) -> ReferenceTrainer:
        """The reference trainer after `steps` steps over the samples in order."""
        ref = ReferenceTrainer(self.program, lr, seed)
        for i in range(steps):
            n = i % len(self.labels)
            ref.train_step(self.inputs[n], int(self.labels[n]))
        return ref


def make_model(tflite: Path, scheme: str, inputs: np.ndarray, labels: np.ndarray,
               target: str = "ref") -> Model:
    """The blob planned for `target`'s kernels (tinyprop.compile.kernels: cortex-m4 plans the
    DSP kernels' scratch, so qemu-m4 runs them; the same bits either way)."""
    graph = read_tflite(tflite)
    program = build_program(graph, parse_scheme(graph, scheme))
    blob = pack_blob(graph, zlib.crc32(Path(tflite).read_bytes()), train=program,
                     scratch=plan_scratch(graph, target, program, program.region_bytes))
    return Model(program, blob, inputs, np.asarray(labels))


@functools.cache
def load_small_model(target: str = "ref") -> Model:
    """The last blocks of a MobileNetV1 (12x12x16 input, 2 classes), last two layers trained."""
    path = build_tflite("mbv1_tail")
    return make_model(path, "last:2", sample_inputs(path, 8, seed=3), [0, 1, 1, 0, 1, 0, 0, 1],
                      target)


@functools.cache
def load_ir_model(momentum: bool = False, grad: str = DEFAULT_GRAD) -> Model:
    """A MobileNetV1 tail built in the graph IR (tests/opgen.py small_classifier), last:2, and
    eight samples: the same bytes on every machine, unlike a TFLite conversion, for tests whose
    verdict depends on the model, not only on C equalling the reference (loss falls, .exp
    files). `momentum` plans the optimizer state; `grad` is the gradient maps' format."""
    from opgen import small_classifier

    graph = small_classifier()
    program = build_program(graph, parse_scheme(graph, "last:2"), momentum, grad=grad)
    blob = pack_blob(graph, zlib.crc32(graph.name.encode()), train=program)
    inputs = np.random.default_rng(3).integers(-128, 128, (8, *graph.input.shape[1:]))
    return Model(program, blob, inputs.astype(np.int8), np.array([0, 1, 1, 0, 1, 0, 0, 1]))


@functools.cache
def load_vww_model(model_path: Path, data_dir: Path, target: str = "ref") -> Model:
    """The MLPerf Tiny VWW model (last:2) and four real photos, two of each class."""
    graph = read_tflite(model_path)
    train = load_dataset(data_dir).split("train")
    picked = train[:2] + train[-2:]  # sorted by class: two non_person, two person
    x = np.stack([to_model_input(read_rgb(s.path), graph.input.s, graph.input.zp)
                  for s in picked])
    return make_model(model_path, "last:2", x, [s.label for s in picked], target)


def train_steps(dev, model: Model, steps: int) -> list[dict]:
    dev.set_hparams(LR, SEED)
    n = len(model.labels)
    return [dev.train(model.inputs[i % n], int(model.labels[i % n])) for i in range(steps)]


def check_training(board: str, model: Model, steps: int, workdir: Path) -> list[dict]:
    """Train `steps` steps on `board`; params, losses and predictions equal the reference's."""
    ref = ReferenceTrainer(model.program, LR, SEED)
    with open_board(board, model.blob, workdir) as dev:
        events = train_steps(dev, model, steps)
        params = dev.pull_params()
    for i, event in enumerate(events):
        n = i % len(model.labels)
        expected = ref.train_step(model.inputs[n], int(model.labels[n]))
        assert event["step"] == i and not event["skipped"]
        assert np.float32(event["loss"]) == np.float32(expected.loss)
        assert event["prediction"] == expected.prediction
    assert params == ref.params_bytes()
    assert params != ReferenceTrainer(model.program).params_bytes()  # training changed them
    return events


def test_small_model_trains_bit_exact(small_model, tmp_path):
    events = check_training("host", small_model, 6, tmp_path)
    memory = events[-1]["memory"]
    assert memory["trainable"] == small_model.program.params_bytes
    assert 0 < memory["arena_peak"] <= small_model.program.arena_bytes
    assert memory["sram"] == 262144 and 0 < memory["stack_peak"] < 64 * 1024
    assert events[-1]["counter"] > 0  # microseconds on the host


def test_vww_trains_bit_exact(vww_model, tmp_path):
    check_training("host", vww_model, 4, tmp_path)


def test_evaluate_returns_the_reference_output(small_model, tmp_path):
    ref = ReferenceTrainer(small_model.program)
    with open_board("host", small_model.blob, tmp_path) as dev:
        for x in small_model.inputs[:3]:
            out = dev.evaluate(x)
            assert np.array_equal(out, ref.infer(x).reshape(-1))


def test_bulk_samples_train_like_uart_samples(small_model, tmp_path):
    write_bulk_file(tmp_path / "train.bin", small_model.inputs, small_model.labels)
    with open_board("host", small_model.blob, tmp_path) as dev:
        assert dev.bulk_open("train.bin") == len(small_model.labels)
        dev.set_hparams(LR, SEED)
        events = [dev.train_bulk(i) for i in range(5)]
        params = dev.pull_params()
        evaluated = dev.evaluate_bulk(1)
    assert [e["step"] for e in events] == list(range(5))
    assert params == small_model.reference(5).params_bytes()
    assert evaluated["type"] == "sample_eval" and evaluated["label"] == small_model.labels[1]


def test_push_reset_and_pull(small_model, tmp_path):
    trained = small_model.reference(3).params_bytes()
    with open_board("host", small_model.blob, tmp_path) as dev:
        dev.push_params(trained, step=3)
        assert dev.pull_params() == trained
        dev.reset()
        assert dev.pull_params() == ReferenceTrainer(small_model.program).params_bytes()


def test_save_survives_a_restart(small_model, tmp_path):
    with open_board("host", small_model.blob, tmp_path) as dev:
        train_steps(dev, small_model, 3)
        assert dev.save() > small_model.program.params_bytes
        saved = dev.pull_params()
    with open_board("host", small_model.blob, tmp_path) as dev:
        assert dev.pull_params() == saved
        assert any("restored" in text for text in dev.link.logs)
