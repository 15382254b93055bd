"""`tinyprop infer`: the reference and host engines give the same int8 outputs for a batch, from a
.tflite or a .tpb; bad inputs are one-line errors with exit code 2."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from tinyprop.cli import main
from tinyprop.compile.blob import pack_blob
from tinyprop.frontend.tflite_reader import read_tflite


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    rng = np.random.default_rng(5)
    path = tmp_path_factory.mktemp("infer") / "x.npy"
    np.save(path, rng.integers(-128, 128, (3, 96, 96, 3), dtype=np.int8))
    return path


def test_engines_agree_on_tflite_and_tpb(vww_model_path, batch, tmp_path, capsys):
    ref, host, tpb_out = tmp_path / "ref.npy", tmp_path / "host.npy", tmp_path / "tpb.npy"
    tpb = tmp_path / "vww.tpb"
    tpb.write_bytes(pack_blob(read_tflite(vww_model_path),
                              zlib.crc32(vww_model_path.read_bytes())))
    m = str(vww_model_path)
    assert main(["infer", m, "--input", str(batch), "-o", str(ref)]) == 0
    assert main(["infer", m, "--input", str(batch), "-o", str(host), "--engine", "host"]) == 0
    assert main(["infer", str(tpb), "--input", str(batch), "-o", str(tpb_out)]) == 0
    a, b, c = np.load(ref), np.load(host), np.load(tpb_out)
    assert a.shape == (3, 2) and a.dtype == np.int8
    assert np.array_equal(a, b) and np.array_equal(a, c)
    assert "engine host" in capsys.readouterr().out


def test_engine_is_an_alias_of_board(vww_model_path, batch, tmp_path, capsys):
    """--board names the engine as in every verb; --engine, infer's older name, is the same."""
    by_board, by_engine = tmp_path / "board.npy", tmp_path / "engine.npy"
    m = str(vww_model_path)
    assert main(["infer", m, "--input", str(batch), "-o", str(by_board), "--board", "host"]) == 0
    assert "engine host" in capsys.readouterr().out
    assert main(["infer", m, "--input", str(batch), "-o", str(by_engine), "--engine", "host"]) == 0
    assert "engine host" in capsys.readouterr().out
    assert np.array_equal(np.load(by_board), np.load(by_engine))
    assert main(["infer", m, "--input", str(batch), "-o", str(by_board), "--engine", "nowhere",
                 "--board", "reference"]) == 0  # one option: the last one given wins
    assert "engine reference" in capsys.readouterr().out


def test_one_sample_is_a_batch_of_one(vww_model_path, batch, tmp_path):
    one = tmp_path / "one.npy"
    np.save(one, np.load(batch)[1])
    out = tmp_path / "y.npy"
    assert main(["infer", str(vww_model_path), "--input", str(one), "-o", str(out),
                 "--engine", "host"]) == 0
    assert np.load(out).shape == (1, 2)


@pytest.mark.parametrize("array", [np.zeros((2, 96, 96, 3), np.float32),
                                   np.zeros((2, 96, 96), np.int8),
                                   np.zeros((2, 32, 32, 3), np.int8)])
def test_wrong_dtype_or_shape_names_file_and_shape(vww_model_path, tmp_path, capsys, array):
    bad = tmp_path / "bad.npy"
    np.save(bad, array)
    assert main(["infer", str(vww_model_path), "--input", str(bad), "-o",
                 str(tmp_path / "y.npy")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert str(bad) in err and "int8 N x 96 x 96 x 3" in err


def test_missing_input_and_reference_on_tpb(vww_model_path, tmp_path, capsys):
    assert main(["infer", str(vww_model_path), "--input", str(tmp_path / "none.npy"), "-o",
                 str(tmp_path / "y.npy")]) == 2
    assert "none.npy: no such file" in capsys.readouterr().err
    tpb = tmp_path / "m.tpb"
    tpb.write_bytes(b"TPRB")
    assert main(["infer", str(tpb), "--input", str(tmp_path / "x.npy"), "-o",
                 str(tmp_path / "y.npy"), "--engine", "reference"]) == 2
    assert "needs the .tflite" in capsys.readouterr().err
