"""The flash flow for the learn application (what `tinyprop learn --board nano33ble|esp32` runs):
tinyprop.device.flash.flash_job(app="learn") picks the board's learn env from platformio.ini,
passes the blob and the learn configuration to PlatformIO, and refuses every bad request in one
line, before anything is built. No board is plugged in here and PlatformIO's platforms are not
installed: a platform folder in a scratch PLATFORMIO_CORE_DIR stands for an installed one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tinyprop.device.flash import flash_job
from tinyprop.device.profiles import load_profile
from tinyprop.errors import TinypropError
from tinyprop.paths import REPO_ROOT


@pytest.fixture
def blob(tmp_path) -> Path:
    from test_device_host import load_small_model

    path = tmp_path / "model.tpb"
    path.write_bytes(load_small_model().blob)
    return path


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """PlatformIO's nordicnrf52 and espressif32 platforms taken as installed."""
    core = tmp_path / "core"
    for platform in ("nordicnrf52", "espressif32"):
        (core / "platforms" / platform).mkdir(parents=True)
    monkeypatch.setenv("PLATFORMIO_CORE_DIR", str(core))


def refusal(**kwargs) -> str:
    with pytest.raises(TinypropError) as caught:
        flash_job(**kwargs)
    message = str(caught.value)
    assert len(message.splitlines()) == 1
    return message


def test_the_nano_builds_its_one_learn_env_with_blob_and_config(tmp_path, blob, installed):
    config = tmp_path / "learn_config.h"
    config.write_text("#define TP_LEARN_REPLAY 4u\n")
    job = flash_job(load_profile("nano33ble"), blob=blob, build_only=True, app="learn",
                    learn_config=config)
    assert job.tool == "pio"
    assert job.command[job.command.index("-e") + 1] == "nano33ble-learn"
    assert "-t" not in job.command  # build only: nothing uploaded
    flags = job.env["PLATFORMIO_BUILD_FLAGS"]
    assert '-DTP_MODEL_HEADER=\\"' in flags
    assert f'-DTP_LEARN_CONFIG=\\"{config.resolve()}\\"' in flags
    # the device firmware is still the board's own env
    job = flash_job(load_profile("nano33ble"), blob=blob, build_only=True)
    assert job.command[job.command.index("-e") + 1] == "nano33ble"


def test_the_esp32_learn_build_is_the_named_camera_boards(blob, installed):
    esp32 = load_profile("esp32")
    for env in ("esp32cam-learn", "esp32s3eye-learn"):
        job = flash_job(esp32, blob=blob, build_only=True, app="learn", pio_env=env)
        assert job.command[job.command.index("-e") + 1] == env
    err = refusal(board=esp32, blob=blob, build_only=True, app="learn")
    assert ("the esp32's learn builds are esp32cam-learn, esp32s3eye-learn (no camera board "
            "given): choose your camera board's with --env") in err
    err = refusal(board=esp32, blob=blob, build_only=True, app="learn", pio_env="esp32dev")
    assert "(env esp32dev is not one)" in err


def test_bad_learn_requests_are_one_line(tmp_path, blob, installed):
    nano = load_profile("nano33ble")
    err = refusal(board=nano, build_only=True, app="learn")
    assert "the learn application needs a blob to compile in: --blob MODEL.tpb" in err
    err = refusal(board=nano, blob=blob, build_only=True, app="learn",
                  learn_config=tmp_path / "nope.h")
    assert f"learn config {tmp_path / 'nope.h'}: no such file" in err
    err = refusal(board=nano, blob=blob, build_only=True, learn_config=blob)
    assert "only the learn application takes one" in err
    err = refusal(board=nano, blob=blob, build_only=True, app="selftrain")
    assert "app 'selftrain': no such application; choose device or learn" in err
    err = refusal(board=nano, blob=blob, build_only=True, pio_env="nano33ble-learn")
    assert "the device firmware of the nano33ble is env nano33ble" in err
    err = refusal(board=load_profile("host"), blob=blob, build_only=True, app="learn")
    assert "not a board to flash" in err


def test_a_board_folder_without_a_learn_env_is_refused(tmp_path, blob, installed):
    """A user's board with its own platformio.ini and no *-learn env extending its env."""
    mine = tmp_path / "my-nano"
    shutil.copytree(REPO_ROOT / "boards" / "nano33ble", mine)
    (mine / "platformio.ini").write_text(
        "[env:nano33ble]\nplatform = nordicnrf52\nboard = nano33ble\nframework = arduino\n"
        "[env:other-learn]\nplatform = nordicnrf52\nboard = nano33ble\n")
    assert json.loads((mine / "profile.json").read_text())["flash"]["platformio_env"] == \
        "nano33ble"
    err = refusal(board=load_profile(str(mine)), blob=blob, build_only=True, app="learn")
    assert f"no learn build (no env named *-learn extending env nano33ble in " \
           f"{mine / 'platformio.ini'})" in err


def test_offline_the_learn_env_without_its_platform_is_one_line(tmp_path, blob, monkeypatch):
    from test_flash import _registry_reachable

    if _registry_reachable():
        pytest.skip("PlatformIO's registry is reachable here: the first build would install "
                    "the platform")
    monkeypatch.setenv("PLATFORMIO_CORE_DIR", str(tmp_path / "core"))
    err = refusal(board=load_profile("esp32"), blob=blob, build_only=True, app="learn",
                  pio_env="esp32s3eye-learn")
    assert "env esp32s3eye-learn needs PlatformIO's espressif32 platform, which is not " \
           "installed" in err
