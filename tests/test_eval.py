"""`tinyprop eval` and `tinyprop infer` on a board: the TFLite interpreter and the engines (NumPy
reference, the C core on qemu-m4) give the same accuracy for the same model, per-class figures
add up to the confusion matrix, and bad input is a one-line error with exit code 2."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tinyprop.cli import main
from tinyprop.data.datasets import load_dataset
from tinyprop.engines import HParams

VWW_HOLDOUT = 121


def eval_json(capsys, *args: str) -> dict:
    assert main(["eval", *args, "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1, lines  # one JSON object, nothing else on stdout
    return json.loads(lines[0])


@pytest.fixture(scope="module")
def vww_tpb(vww_model_path, tmp_path_factory):
    path = tmp_path_factory.mktemp("eval") / "vww.tpb"
    assert main(["convert", str(vww_model_path), "-o", str(path), "--scheme", "last:2"]) == 0
    return path


@pytest.fixture
def few_photos(vww_data_dir, tmp_path):
    """Six vww-mini photos (links, not copies), three of each class, two in the holdout."""
    samples = load_dataset(vww_data_dir).split("all")
    picked = samples[:3] + samples[-3:]
    for s in picked:
        (tmp_path / s.path.parent.name).mkdir(exist_ok=True)
        (tmp_path / s.path.parent.name / s.name).symlink_to(s.path)
    (tmp_path / "holdout.txt").write_text(f"{picked[0].name}\n{picked[-1].name}\n")
    return tmp_path


def check_scores(r: dict, n: int) -> None:
    confusion = np.array(r["confusion"])
    assert r["n"] == n == confusion.sum()
    assert r["accuracy"] == pytest.approx(np.trace(confusion) / n)
    for i, name in enumerate(["non_person", "person"]):
        assert r["per_class"][name] == pytest.approx(confusion[i, i] / confusion[i].sum())


@pytest.mark.slow  # the NumPy reference on 121 images
def test_tflite_and_reference_agree_on_the_original_model(vww_model_path, vww_tpb, vww_data_dir,
                                                          capsys):
    data = str(vww_data_dir)
    tfl = eval_json(capsys, str(vww_model_path), "--data", data)
    ref = eval_json(capsys, str(vww_tpb), "--data", data, "--board", "reference")
    assert (tfl["engine"], ref["engine"]) == ("tflite", "reference")
    assert (tfl["split"], tfl["shift"]) == ("holdout", "none")
    check_scores(tfl, VWW_HOLDOUT)
    assert tfl["confusion"] == ref["confusion"] and tfl["accuracy"] == ref["accuracy"]
    assert 0.7 < tfl["accuracy"] < 0.95  # the pretrained person detector on real photos


@pytest.mark.slow  # TFLite on 518 images
def test_shift_and_split_change_what_is_scored(vww_model_path, vww_data_dir, capsys):
    data = str(vww_data_dir)
    plain = eval_json(capsys, str(vww_model_path), "--data", data)
    night = eval_json(capsys, str(vww_model_path), "--data", data, "--shift", "night")
    train = eval_json(capsys, str(vww_model_path), "--data", data, "--split", "train")
    assert night["shift"] == "night" and night["accuracy"] < plain["accuracy"]
    assert train["split"] == "train" and train["n"] == 397 - VWW_HOLDOUT


def test_text_output_names_model_split_and_classes(vww_model_path, few_photos, capsys):
    assert main(["eval", str(vww_model_path), "--data", str(few_photos), "--split", "all"]) == 0
    out = capsys.readouterr().out
    assert "vww_96_int8.tflite" in out and "all (6 samples" in out
    assert "non_person" in out and "person" in out and "accuracy" in out


@pytest.mark.slow  # VWW on qemu-m4
def test_qemu_m4_eval_and_infer_equal_the_reference(vww_model_path, vww_tpb, few_photos, tmp_path,
                                                    capsys):
    data = str(few_photos)
    ref = eval_json(capsys, str(vww_tpb), "--data", data, "--split", "all")
    board = eval_json(capsys, str(vww_tpb), "--data", data, "--split", "all",
                      "--board", "qemu-m4")
    check_scores(board, 6)
    assert board["confusion"] == ref["confusion"] and board["engine"] == "qemu-m4"
    assert board["instructions_per_inference"] > 5e6  # the VWW forward pass (8.3 M), by QEMU

    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng(2).integers(-128, 128, (2, 96, 96, 3), dtype=np.int8))
    outs = {}
    for engine, model in (("reference", vww_model_path), ("qemu-m4", vww_tpb)):
        outs[engine] = tmp_path / f"{engine}.npy"
        assert main(["infer", str(model), "--input", str(x), "-o", str(outs[engine]),
                     "--engine", engine]) == 0
    assert "engine qemu-m4" in capsys.readouterr().out
    a, b = np.load(outs["reference"]), np.load(outs["qemu-m4"])
    assert a.shape == b.shape == (2, 2) and np.array_equal(a, b)


@pytest.mark.parametrize("case", ["no_model", "no_data", "empty_split", "board_on_tflite",
                                  "bad_blob"])
def test_bad_input_is_one_line_exit_2(case, vww_model_path, few_photos, tmp_path, capsys):
    model, data, extra = str(vww_model_path), str(few_photos), []
    expect = {"no_model": "no such file", "no_data": "dataset folder not found",
              "empty_split": "split 'holdout' is empty", "board_on_tflite": "tinyprop convert",
              "bad_blob": "not a tinyprop blob"}[case]
    if case == "no_model":
        model = str(tmp_path / "missing.tflite")
    elif case == "no_data":
        data = str(tmp_path / "nowhere")
    elif case == "empty_split":
        (few_photos / "holdout.txt").unlink()
    elif case == "board_on_tflite":
        extra = ["--board", "qemu-m4"]
    else:
        model = str(tmp_path / "junk.tpb")
        (tmp_path / "junk.tpb").write_bytes(b"junk" * 40)
    assert main(["eval", model, "--data", data, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("tinyprop eval: error: ")
    assert expect in err


def test_a_board_without_bulk_store_evaluates_over_the_link(vww_tpb, few_photos):
    """The POSIX host board over pipes has no semihosting: samples go as INPUT_CHUNK + EVAL."""
    from tinyprop.compile.blobfile import load_blob
    from tinyprop.data.datasets import load_split
    from tinyprop.engines.device import DeviceEngine
    from tinyprop.engines.reference import ReferenceEngine
    from tinyprop.training.evaluate import evaluate_engine

    tb = load_blob(vww_tpb)
    xs, ys, _ = load_split(few_photos, "all", tb.graph.input.s, tb.graph.input.zp)
    board = DeviceEngine("host", tb, HParams(0.0, 0))
    try:
        on_board = evaluate_engine(board, xs, ys)
    finally:
        board.close()
    assert on_board == evaluate_engine(ReferenceEngine(tb, HParams(0.0, 0)), xs, ys) | {
        k: v for k, v in on_board.items() if k.endswith("_per_inference")}
    assert on_board["n"] == 6
