"""Board profiles (boards/<name>/profile.json, tinyprop.device.profiles): every figure has its
source, the measured ones still match the linked firmware, `convert --board` plans within a
board's room (qemu-m4's reproduces the demo's blob byte for byte), and a blob that does not fit
is refused in one line (exit 2) before anything is built or sent: against the profile, and
against the free RAM a running board reports in READY (the host board told to stand for a
smaller board, a qemu-m4 flashed with a smaller blob)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_device_host import load_small_model
from tinyprop.cli import main
from tinyprop.compile.blobfile import make_blob
from tinyprop.compile.build import build
from tinyprop.compile.scheme import parse_scheme
from tinyprop.device.boards import open_board
from tinyprop.device.firmware import build_device_firmware, build_firmware
from tinyprop.device.profiles import (
    RECORD_HEADER_BYTES,
    blob_needs,
    board_names,
    load_profile,
)
from tinyprop.device.runners import start_qemu
from tinyprop.errors import TinypropError
from tinyprop.frontend.tflite_reader import read_tflite
from tinyprop.paths import BOARDS_ROOT

BOARDS = ["esp32", "host", "nano33ble", "qemu-m4", "rv32-virt"]  # at least; a new one adds itself


def one_line_error(capsys, argv: list[str]) -> str:
    """Run the CLI, expect exit 2 and one line on stderr; return it."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.fixture(scope="module")
def big_blob(vww_model_path, tmp_path_factory) -> Path:
    """bias-only with momentum and float32 gradient maps: about 255 KB of arena and params,
    more than any board has."""
    path = tmp_path_factory.mktemp("big") / "big.tpb"
    graph = read_tflite(vww_model_path)
    path.write_bytes(make_blob(vww_model_path, parse_scheme(graph, "bias-only"), True,
                               grad="float32").blob)
    return path


def test_every_board_has_a_profile_and_every_figure_its_source():
    assert set(BOARDS) <= set(board_names())
    for name in board_names():
        raw = json.loads((BOARDS_ROOT / name / "profile.json").read_text())
        for key in ("sram_bytes", "flash_bytes", "device_bytes", "plan_margin_bytes"):
            assert raw[key]["source"].strip(), (name, key)
        for item in raw["runtime"] + raw.get("heap_blocks", []):
            assert item["what"].strip() and item["source"].strip(), (name, item)
        for key in ("kernels", "link", "build", "run", "flash"):  # the last three: some boards
            assert key not in raw or raw[key]["source"].strip(), (name, key)
        assert load_profile(name).name == name


def test_profiles_keep_the_memory_the_issue_measured():
    nano = load_profile("nano33ble")
    # mbed OS + core: 43,908-43,928 B measured across ArduinoCore-mbed 2.3.1-4.6.0 (the largest
    # planned); 512 B of vectors and crash data; the variant's linker script keeps 0x400 for the
    # boot stack; tinyprop's glue and buffers come off what is left
    mbed, vectors, stack, glue = (b for _, b in nano.runtime)
    assert (mbed, vectors, stack, glue) == (43_928, 512, 1024, 80)
    assert nano.sram - mbed - vectors - stack == 216_680
    assert nano.room().limit == 216_680 - glue - nano.device
    esp = load_profile("esp32")
    assert esp.placement == "heap" and esp.heap_blocks[0] < 192 * 1024
    for name in ("qemu-m4", "host", "rv32-virt"):  # the 24 KB every plan used before profiles
        assert load_profile(name).reserve == 24 * 1024


@pytest.mark.parametrize("board", ["qemu-m4", "rv32-virt"])
def test_measured_figures_match_the_linked_firmware(board):
    """device_bytes: the device loop's `dev` (nm) + the record header; the board's and C
    library's own .data/.bss: the rest of the ELF's, less the buffers, stack and guard."""
    elf = build_firmware(board)
    tool = load_profile(board).toolchain.compiler.removesuffix("gcc")
    sizes = {}
    for line in subprocess.run([f"{tool}nm", "-S", str(elf)], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "bBdD":
            sizes[parts[3]] = int(parts[1], 16)
    profile = load_profile(board)
    assert sizes["dev"] + RECORD_HEADER_BYTES == profile.device
    text, data, bss = map(int, subprocess.run([f"{tool}size", str(elf)], capture_output=True,
                                              text=True, check=True).stdout.split()[6:9])
    stack = sum(b for what, b in profile.runtime if what.startswith("stack"))
    own = data + bss - stack - sizes["dev"] - sizes["record"]
    assert dict(profile.runtime)["board and C library .data/.bss"] == own


@pytest.mark.slow
def test_qemu_m4_profile_reproduces_the_demo_blob(vww_model_path, tmp_path):
    """`convert --board qemu-m4 --scheme auto` equals the demo's convert (256 KB, 24 KB
    reserve) byte for byte. Without the demo's calibration: it only feeds auto's benefit
    estimates, the same with or without a board (two calibrations would cost a minute)."""
    demo = build(vww_model_path, "auto", "256KB")
    out = tmp_path / "q.tpb"
    assert main(["convert", str(vww_model_path), "-o", str(out), "--scheme", "auto",
                 "--board", "qemu-m4"]) == 0
    assert out.read_bytes() == demo.blob


@pytest.mark.slow
@pytest.mark.parametrize("board", ["nano33ble", "esp32"])
def test_auto_plans_within_the_real_boards(board, vww_model_path, tmp_path, capsys):
    out, rep = tmp_path / "b.tpb", tmp_path / "b.json"
    # a board named and no --scheme: auto, within the board's profile
    assert main(["convert", str(vww_model_path), "-o", str(out), "--board", board,
                 "--report-json", str(rep)]) == 0
    shown = capsys.readouterr().out
    assert f"{out}: {out.stat().st_size:,} bytes, scheme auto@" in shown
    assert "--calib DATA ranks them by their gradients on your data" in shown
    assert f"planned for board {board} (boards/{board}/profile.json)" in shown
    fig = json.loads(rep.read_text())
    assert fig["room"]["board"] == board
    profile = load_profile(board)
    needs, cap = blob_needs(out.read_bytes()), profile.capacity()
    assert needs.arena + needs.record <= cap.free
    if profile.placement == "heap":
        assert needs.arena <= cap.largest and needs.record <= cap.second


def test_convert_refuses_a_scheme_the_board_cannot_hold(capsys, vww_model_path, tmp_path):
    err = one_line_error(capsys, ["convert", str(vww_model_path), "-o", str(tmp_path / "x.tpb"),
                                  "--scheme", "bias-only", "--grad", "float32", "--board",
                                  "nano33ble"])
    assert "--board nano33ble (boards/nano33ble/profile.json)" in err and "over" in err
    err = one_line_error(capsys, ["convert", str(vww_model_path), "-o", str(tmp_path / "x.tpb"),
                                  "--scheme", "last:2", "--board", "esp32"])
    assert "params region does not fit the second heap block" in err
    # --budget still overrides the profile's
    assert main(["convert", str(vww_model_path), "-o", str(tmp_path / "y.tpb"), "--scheme",
                 "bias-only", "--board", "nano33ble", "--budget", "512KB"]) == 0


def test_flash_refuses_a_blob_the_board_cannot_hold(capsys, big_blob):
    """Before PlatformIO or a port is even looked for: board, need, room and the fix."""
    needs = blob_needs(big_blob.read_bytes())
    err = one_line_error(capsys, ["flash", "--board", "nano33ble", "--blob", str(big_blob)])
    assert err.startswith("tinyprop flash: error: board nano33ble (boards/nano33ble/profile.json)")
    assert (f"it needs {needs.arena + needs.record:,} B (arena {needs.arena:,} + params record "
            f"{needs.record:,}) and the board has 212,856 B for them") in err
    assert "--board nano33ble" in err
    err = one_line_error(capsys, ["flash", "--board", "esp32", "--blob", str(big_blob)])
    assert (f"its arena needs {needs.arena:,} B in one block and the largest free heap block is "
            "111,792 B") in err


def test_train_refuses_before_building_a_blob_the_profile_cannot_hold(capsys, big_blob,
                                                                      vww_data_dir):
    err = one_line_error(capsys, ["train", str(big_blob), "--data", str(vww_data_dir),
                                  "--board", "qemu-m4", "--steps", "1", "--plain"])
    assert "board qemu-m4 (boards/qemu-m4/profile.json): the blob does not fit" in err


def test_host_board_standing_for_a_smaller_board_refuses_the_blob(monkeypatch, tmp_path):
    """TINYPROP_BOARD_SRAM: the host board reports a smaller board in READY. With just enough
    SRAM for the blob it trains; with one byte less the blob (which fits the host profile, so
    the firmware is built) is refused before anything but HELLO is sent."""
    model = load_small_model()
    needs = blob_needs(model.blob)
    with open_board("host", model.blob, tmp_path) as dev:
        ready = dev.ready
    assert ready.largest_block == ready.second_block == ready.free_bytes
    taken = ready.sram_bytes - ready.free_bytes  # stack, statics other than the two buffers
    monkeypatch.setenv("TINYPROP_BOARD_SRAM", str(taken + needs.arena + needs.record))
    with open_board("host", model.blob, tmp_path) as dev:
        assert dev.ready.free_bytes == needs.arena + needs.record
        dev.set_hparams(0.01)
        dev.train(model.inputs[0], int(model.labels[0]))
    monkeypatch.setenv("TINYPROP_BOARD_SRAM", str(taken + needs.arena + needs.record - 1))
    with pytest.raises(TinypropError) as info, open_board("host", model.blob, tmp_path):
        pass
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("board host on host board")
    assert "(its READY): the blob does not fit" in msg and "--board host" in msg


@pytest.mark.slow
def test_qemu_m4_reporting_less_free_ram_than_the_blob_needs_is_refused(
        capsys, big_blob, vww_data_dir, tmp_path):
    """A qemu-m4 flashed with a small blob reports its free RAM in READY; `tinyprop train` with
    a blob larger than that is refused before training, and the board trains on afterwards."""
    model = load_small_model()
    elf = build_device_firmware("qemu-m4", model.blob)
    with start_qemu(elf, workdir=tmp_path, timeout=120) as run:
        err = one_line_error(capsys, ["train", str(big_blob), "--data", str(vww_data_dir),
                                      "--board", run.url, "--steps", "1", "--plain"])
        assert f"board qemu-m4 on {run.url} (its READY): the blob does not fit" in err
        needs = blob_needs(big_blob.read_bytes())
        assert f"it needs {needs.arena + needs.record:,} B" in err
        with open_board(run.url, model.blob, tmp_path) as dev:  # not bricked
            dev.set_hparams(0.01)
            assert dev.train(model.inputs[0], int(model.labels[0]))["step"] == 0


def test_cli_starts_without_reading_profiles():
    """Profiles load when a verb needs them, not at start-up (the CLI starts in 0.4 s)."""
    code = ("import sys, tinyprop.cli as c; c.build_parser(); "
            "assert 'tinyprop.device.profiles' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
