"""What tinyprop cannot run is refused when the model is read, in one line that names the file, the
operator and its index, and says what to do: through tinyprop.frontend.tflite_reader.read_tflite and
through `tinyprop convert` (exit code 2, no traceback)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import modelgen
import pytest
import tflite
from tinyprop.errors import TinypropError
from tinyprop.frontend.tflite_reader import read_tflite

TINYPROP = Path(sys.executable).parent / "tinyprop"
OP_NAMES = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}

# generated model -> (operator kind the reader must name, words of the advice it must give)
REFUSALS = {
    "multiply": ("MUL", "rebuild the model"),
    "concatenation": ("CONCATENATION", "rebuild the model"),
    "tanh": ("TANH", "rebuild the model"),
    "dilated_conv": ("CONV_2D", "dilation_rate=1"),
    "dilated_depthwise": ("DEPTHWISE_CONV_2D", "dilation_rate=1"),
}


def first_op_index(path: Path, kind: str) -> int:
    """Index of the first operator of `kind`, read with the flatbuffer schema directly (not with
    the reader under test)."""
    model = tflite.Model.GetRootAsModel(path.read_bytes(), 0)
    sg = model.Subgraphs(0)
    for i in range(sg.OperatorsLength()):
        code = model.OperatorCodes(sg.Operators(i).OpcodeIndex())
        if OP_NAMES[max(code.BuiltinCode(), code.DeprecatedBuiltinCode())] == kind:
            return i
    raise AssertionError(f"{path.name} has no {kind}: the model does not test what it should")


def refusal(path: Path) -> str:
    with pytest.raises(TinypropError) as info:
        read_tflite(path)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(str(path)), msg
    return msg


@pytest.fixture(scope="session")
def float_model() -> Path:
    return modelgen.build_tflite("float_conv")


@pytest.fixture(scope="session")
def good_model() -> Path:
    return modelgen.build_tflite("mbv1_tail")


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_unsupported_operator_is_named_with_its_index(name):
    path = modelgen.build_tflite(name)
    kind, advice = REFUSALS[name]
    msg = refusal(path)
    assert f"operator #{first_op_index(path, kind)} {kind}:" in msg
    assert advice in msg


def test_float_model_is_refused(float_model):
    msg = refusal(float_model)
    assert "float32" in msg and "int8" in msg and "inference_input_type" in msg


def _not_tflite_files(tmp: Path, good: Path) -> list[Path]:
    data = good.read_bytes()
    files = {
        "empty.tflite": b"",
        "notes.tflite": b"this is a text file, not a model\n" * 4,
        "photo.tflite": b"\x89PNG\r\n\x1a\n" + bytes(range(256)),
        "fake_id.tflite": b"\x10\x00\x00\x00TFL3" + b"\xff" * 64,
    }
    # Truncations of a real model: every parse stage sees missing bytes somewhere.
    for cut in (8, 64, len(data) // 3, len(data) // 2, len(data) - 16):
        files[f"cut{cut}.tflite"] = data[:cut]
    for name, content in files.items():
        (tmp / name).write_bytes(content)
    return [tmp / n for n in files]


def test_non_tflite_files_are_refused(tmp_path, good_model):
    read_tflite(good_model)  # the intact model reads: the failures below come from the damage
    for path in _not_tflite_files(tmp_path, good_model):
        assert "TensorFlow Lite flatbuffer" in refusal(path), path


def test_missing_file_and_directory(tmp_path):
    assert "no such file" in refusal(tmp_path / "absent.tflite")
    assert "is a directory" in refusal(tmp_path)


# ---- through the CLI -------------------------------------------------------------------------

needs_convert = pytest.mark.skipif(
    importlib.util.find_spec("tinyprop.commands.convert") is None,
    reason="tinyprop convert is not written yet",
)


def convert(model: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(TINYPROP), "convert", str(model), "-o", str(out)],
                          check=False, capture_output=True, text=True, timeout=120)


@needs_convert
def test_cli_refusals_exit_2_with_one_line(tmp_path, float_model, good_model):
    cases = [modelgen.build_tflite("multiply"), modelgen.build_tflite("dilated_conv"),
             float_model, tmp_path / "absent.tflite", *_not_tflite_files(tmp_path, good_model)[:2]]
    out = tmp_path / "out.tpb"
    for model in cases:
        r = convert(model, out)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2, (model, r.returncode, r.stderr)
        assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
        assert lines[0].startswith("tinyprop convert: error: ") and str(model) in lines[0]
        assert not out.exists()


@needs_convert
def test_cli_converts_a_supported_model(tmp_path, good_model):
    """The control for the refusals above: a supported model converts with exit code 0."""
    out = tmp_path / "out.tpb"
    r = convert(good_model, out)
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 0
