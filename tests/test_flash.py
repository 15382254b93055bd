"""tinyprop flash: every missing piece is a one-line error (exit 2) naming it, found for real
(no board is plugged in here: no USB serial port, and the ports named do not exist)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from serial.tools import list_ports
from tinyprop.cli import main

MISSING_PORT = "/dev/ttyTINYPROP404"


def flash(capsys, *argv: str) -> str:
    """Run `tinyprop flash ARGV`, expect exit status 2; return its one-line message."""
    assert main(["flash", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    return err


@pytest.fixture
def image(tmp_path) -> Path:
    path = tmp_path / "firmware.bin"
    path.write_bytes(b"\xe9" + bytes(255))  # an ESP32 image starts with 0xE9
    return path


@pytest.fixture
def blob(tmp_path) -> Path:
    from test_device_host import load_small_model

    path = tmp_path / "model.tpb"
    path.write_bytes(load_small_model().blob)
    return path


def test_missing_port_is_named_for_platformio(capsys, blob):
    err = flash(capsys, "--board", "nano33ble", "--blob", str(blob), "--port", MISSING_PORT)
    assert f"--port {MISSING_PORT}: no such serial port" in err


def test_missing_port_is_named_for_esptool(capsys, image):
    err = flash(capsys, "--board", "esp32", "--image", str(image), "--port", MISSING_PORT)
    assert f"--port {MISSING_PORT}: no such serial port" in err


@pytest.mark.skipif(any(p.vid is not None for p in list_ports.comports()),
                    reason="a USB serial port is present: a board may be plugged in")
@pytest.mark.parametrize("board", ["nano33ble", "esp32"])
def test_no_board_plugged_in(capsys, board, blob):
    err = flash(capsys, "--board", board, "--blob", str(blob))
    assert "no USB serial port found" in err and "--port" in err


def test_missing_image_file_is_named(capsys, tmp_path):
    err = flash(capsys, "--board", "esp32", "--image", str(tmp_path / "nope.bin"))
    assert f"--image {tmp_path / 'nope.bin'}: no such file" in err


def test_missing_blob_file_is_named(capsys, tmp_path):
    # /dev/null exists, so the port check passes and the blob is what is missing
    err = flash(capsys, "--board", "esp32", "--blob", str(tmp_path / "nope.tpb"), "--port",
                "/dev/null")
    assert f"--blob {tmp_path / 'nope.tpb'}: no such file" in err


def test_image_is_for_a_board_whose_descriptor_has_one(capsys, image):
    err = flash(capsys, "--board", "nano33ble", "--image", str(image))
    assert "--image: board nano33ble (boards/nano33ble/profile.json) takes no prebuilt image" in err


def test_missing_platformio_is_named(capsys, monkeypatch, tmp_path, blob):
    # no pio on PATH, beside the running Python, or in ~/.platformio
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    err = flash(capsys, "--board", "nano33ble", "--blob", str(blob))
    assert "needs PlatformIO (pio), which is not installed" in err
    assert "pip install platformio" in err


def _registry_reachable() -> bool:
    import socket

    from tinyprop.device.flash import PIO_REGISTRY

    try:
        socket.create_connection(PIO_REGISTRY, timeout=5).close()
        return True
    except OSError:
        return False


@pytest.mark.skipif(_registry_reachable(), reason="PlatformIO's registry is reachable here: the "
                    "first build would install the platform")
def test_offline_without_the_platform_is_one_line(capsys, monkeypatch, tmp_path, blob,
                                                  learn_blob):
    """Offline (this machine, CI), a board whose PlatformIO platform is not installed is refused
    at once instead of PlatformIO retrying "Installing nordicnrf52" until killed."""
    monkeypatch.setenv("PLATFORMIO_CORE_DIR", str(tmp_path / "core"))
    err = flash(capsys, "--board", "nano33ble", "--blob", str(blob), "--build-only")
    assert ("env nano33ble needs PlatformIO's nordicnrf52 platform, which is not installed in "
            f"{tmp_path / 'core' / 'platforms'}, and its registry api.registry.platformio.org "
            "cannot be reached") in err
    assert "--image" in err
    # the learn app the same way, without the --image that tinyprop learn has not
    assert main(["learn", "--blob", str(learn_blob.path), "--board", "nano33ble",
                 "--build-only"]) == 2
    err = capsys.readouterr().err
    assert "env nano33ble-learn needs PlatformIO's nordicnrf52 platform" in err
    assert "--image" not in err and err.count("\n") == 1
    # an installed platform is left to PlatformIO
    (tmp_path / "core" / "platforms" / "nordicnrf52").mkdir(parents=True)
    from tinyprop.device.flash import check_platform
    from tinyprop.paths import REPO_ROOT

    check_platform(REPO_ROOT, "nano33ble", {"PLATFORMIO_CORE_DIR": str(tmp_path / "core")})
