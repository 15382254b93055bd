"""A board is its folder: boards/<name>/ with its profile.json, the descriptor the one registry
(tinyprop.device.profiles) reads for its memory, build, run and flash. So the new-board
checklist is short, shown here with no edit in host/: a copy of the host board under a new name
in a folder of its own is planned for by `convert --board FOLDER` (its own memory), built from
that folder and trained through, bit for bit with the reference, by `train` and open_board; a
copy of qemu-m4 gives the blob qemu-m4 gives and trains under QEMU; a copy of the Nano 33 BLE is
flashed by path. An unknown name, or a folder without a valid descriptor, is one line naming it
and listing the known boards (exit 2) for every verb that takes --board."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_device_host import LR, SEED
from tinyprop.cli import main
from tinyprop.compile.blobfile import load_blob
from tinyprop.data.datasets import load_split
from tinyprop.device.boards import open_board
from tinyprop.device.firmware import board_build_root, build_device_firmware
from tinyprop.device.profiles import board_names, load_profile
from tinyprop.paths import BOARDS_ROOT, BUILD_ROOT
from tinyprop.reference.backward import ReferenceTrainer

TREE_BOARDS = sorted(p.parent.name for p in BOARDS_ROOT.glob("*/profile.json"))
KNOWN = f"use one of {', '.join(TREE_BOARDS)}, or the path of a board folder"


def copy_board(name: str, to: Path) -> Path:
    """The tree's board `name`, copied as it is to the folder `to` (its new name)."""
    shutil.copytree(BOARDS_ROOT / name, to)
    return to


def one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def convert(model: Path, out: Path, *extra: str) -> bytes:
    assert main(["convert", str(model), "-o", str(out), "--scheme", "last:2", *extra]) == 0
    return out.read_bytes()


def test_the_registry_is_the_folders():
    assert board_names() == TREE_BOARDS and "qemu-m4" in TREE_BOARDS
    for name in board_names():
        board = load_profile(name)
        assert board.folder == (BOARDS_ROOT / name).resolve() and board.arg == name
        # what tinyprop starts it builds; an emulator's command line has the fields it fills in
        assert board.runner is None or board.toolchain is not None
        if board.runner is not None and board.runner.kind == "emulator":
            line = " ".join(board.runner.command)
            assert "{firmware}" in line and "{uart_fd}" in line
    # the tree's path of a board is the board itself
    assert load_profile(str(BOARDS_ROOT / "qemu-m4")) == load_profile("qemu-m4")


def test_a_copy_of_the_host_board_is_converted_for_built_and_trained_through(
        tmp_path, capsys, vww_model_path, vww_data_dir):
    mine = copy_board("host", tmp_path / "mine")
    blob_path = tmp_path / "m.tpb"
    report = tmp_path / "m.json"
    blob = convert(vww_model_path, blob_path, "--board", str(mine), "--report-json", str(report))
    shown = capsys.readouterr().out
    assert (f"planned for board {mine} ({mine / 'profile.json'}): 262,144 B less a 24,576 B "
            "reserve") in shown
    assert json.loads(report.read_text())["room"]["board"] == str(mine)
    # its own memory: a copy told it has 128 KB gets a plan that fits 128 KB (tiled)
    small = copy_board("host", tmp_path / "small")
    profile = json.loads((small / "profile.json").read_text())
    profile["sram_bytes"]["value"] = 128 * 1024
    (small / "profile.json").write_text(json.dumps(profile))
    assert convert(vww_model_path, tmp_path / "x.tpb", "--board", str(small)) != blob
    assert (f"planned for board {small} ({small / 'profile.json'}): 131,072 B less a 24,576 B "
            "reserve") in capsys.readouterr().out

    # built from its folder, into a build folder of its own, and trained through by `train`
    firmware = build_device_firmware(str(mine), blob)
    assert firmware.parent == board_build_root(load_profile(str(mine))) / "mine"
    assert firmware.is_relative_to(BUILD_ROOT / "boards")
    # another blob's firmware compiles its application's object only: the library's and the
    # board's objects are shared by every blob's build (app.mk)
    shared = {p: p.stat().st_mtime_ns for p in (firmware.parent / "obj-lib-tinyprop").rglob("*.o")}
    other = build_device_firmware(str(mine), (tmp_path / "x.tpb").read_bytes())
    assert other != firmware and other.parent == firmware.parent
    assert len(shared) > 20 and {p: p.stat().st_mtime_ns for p in shared} == shared
    own = firmware.parent / f"obj-{other.name.removesuffix('-host')}"
    assert [p.name for p in own.rglob("*.o")] == ["app.o"]
    assert main(["train", str(blob_path), "--data", str(vww_data_dir), "--board", str(mine),
                 "--steps", "2", "--plain"]) == 0
    assert "summary steps 2 " in capsys.readouterr().out
    # and through open_board: it says its own name; steps and an inference equal the reference
    tb = load_blob(blob_path)
    xs, ys, _ = load_split(vww_data_dir, "train", tb.graph.input.s, tb.graph.input.zp)
    ref = ReferenceTrainer(tb.program, LR, SEED)
    with open_board(str(mine), blob, tmp_path / "run") as dev:
        assert dev.ready.board == "mine"
        dev.set_hparams(LR, SEED)
        for i in (0, len(xs) - 1):  # one of each class
            event = dev.train(xs[i], int(ys[i]))
            expected = ref.train_step(xs[i], int(ys[i]))
            assert np.float32(event["loss"]) == np.float32(expected.loss)
            assert event["prediction"] == expected.prediction
        assert np.array_equal(dev.evaluate(xs[1]), ref.infer(xs[1]).reshape(-1))
        assert dev.pull_params() == ref.params_bytes()


@pytest.mark.slow
def test_a_copy_of_qemu_m4_plans_as_qemu_m4_and_trains_under_qemu(tmp_path, vww_model_path,
                                                                  vww_data_dir):
    m4 = copy_board("qemu-m4", tmp_path / "my-m4")
    blob = convert(vww_model_path, tmp_path / "c.tpb", "--board", str(m4))
    assert blob == convert(vww_model_path, tmp_path / "q.tpb", "--board", "qemu-m4")
    tb = load_blob(tmp_path / "c.tpb")
    xs, ys, _ = load_split(vww_data_dir, "train", tb.graph.input.s, tb.graph.input.zp)
    ref = ReferenceTrainer(tb.program, LR, SEED)
    with open_board(str(m4), blob, tmp_path / "run") as dev:
        assert dev.ready.board == "my-m4" and dev.counter_unit == "instructions"
        dev.set_hparams(LR, SEED)
        event = dev.train(xs[0], int(ys[0]))
        assert np.float32(event["loss"]) == np.float32(ref.train_step(xs[0], int(ys[0])).loss)
        assert dev.pull_params() == ref.params_bytes()


def test_a_copy_of_a_real_board_is_flashed_by_path(capsys, tmp_path, small_model):
    nano = copy_board("nano33ble", tmp_path / "my-nano")
    blob = tmp_path / "s.tpb"
    blob.write_bytes(small_model.blob)
    # accepted, and its blob checked against the copy's memory: what is missing is the port
    err = one_line_error(capsys, ["flash", "--board", str(nano), "--blob", str(blob), "--port",
                                  "/dev/ttyTINYPROP404"])
    assert "--port /dev/ttyTINYPROP404: no such serial port" in err
    host = copy_board("host", tmp_path / "my-host")
    err = one_line_error(capsys, ["flash", "--board", str(host), "--blob", str(blob)])
    assert f"board my-host ({host / 'profile.json'}): not a board to flash" in err
    assert f"tinyprop train BLOB --board {host}" in err
    # infer (as train) does not start a real board: it asks for the flashed board's port
    err = one_line_error(capsys, ["infer", str(blob), "--input", str(tmp_path / "x.npy"), "-o",
                                  str(tmp_path / "y.npy"), "--board", "nano33ble"])
    assert "is a real board, which tinyprop does not start" in err and "flash" in err


@pytest.fixture
def not_boards(tmp_path) -> dict[str, str]:
    """--board values that name no board, and what the refusal says of each."""
    empty = tmp_path / "empty"
    empty.mkdir()
    broken = copy_board("host", tmp_path / "broken")
    raw = json.loads((broken / "profile.json").read_text())
    del raw["sram_bytes"]
    (broken / "profile.json").write_text(json.dumps(raw))
    return {"qemu-m5": "--board qemu-m5: no board of that name or folder",
            str(empty): f"--board {empty}: that folder has no profile.json",
            str(broken): f"--board {broken}: {broken / 'profile.json'} is not a valid board "
                         "descriptor (KeyError: 'sram_bytes')"}


@pytest.mark.parametrize("verb", ["convert", "train", "flash"])
def test_a_board_that_is_not_one_is_refused_listing_the_known_boards(
        verb, not_boards, capsys, tmp_path, small_model, vww_model_path, vww_data_dir):
    blob = tmp_path / "s.tpb"
    if verb == "train":  # the board is opened once the blob and data are read
        convert(vww_model_path, blob)
    else:
        blob.write_bytes(small_model.blob)
    argv = {"convert": ["convert", str(vww_model_path), "-o", str(tmp_path / "x.tpb")],
            "train": ["train", str(blob), "--data", str(vww_data_dir), "--steps", "1",
                      "--plain"],
            "flash": ["flash", "--blob", str(blob)]}[verb]
    for spec, says in not_boards.items():
        err = one_line_error(capsys, [*argv, "--board", spec])
        assert err.startswith(f"tinyprop {verb}: error: {says}") and KNOWN in err, err
