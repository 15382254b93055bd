"""Wokwi files for the ESP32 self-training build (platformio.ini's esp32dev-wokwi env): consistent
with the PlatformIO env and the application (always checked; tests/test_selftrain.py checks the
scenario's waits against the application's real output on qemu-m4), and the scenario run in the
simulator by wokwi-cli when WOKWI_CLI_TOKEN is set."""

from __future__ import annotations

import configparser
import inspect
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from tinyprop.device.firmware import write_samples_header
from tinyprop.paths import REPO_ROOT

ESP32 = REPO_ROOT / "boards" / "esp32"
ENV = "esp32dev-wokwi"
BUILD = REPO_ROOT / ".pio" / "build" / ENV


def scenario_waits() -> list[str]:
    text = (ESP32 / "scenario.yaml").read_text()
    return re.findall(r'^\s*- wait-serial: "([^"]+)"', text, re.MULTILINE)


def test_wokwi_runs_the_selftrain_build():
    config = tomllib.loads((ESP32 / "wokwi.toml").read_text())["wokwi"]
    assert config["version"] == 1
    for key, name in (("firmware", "firmware.bin"), ("elf", "firmware.elf")):
        assert (ESP32 / config[key]).resolve() == BUILD / name
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(REPO_ROOT / "platformio.ini")
    assert "-DTP_APP_SELFTRAIN" in ini[f"env:{ENV}"]["build_flags"].split()


def test_diagram_wires_the_uart_to_the_serial_monitor():
    diagram = json.loads((ESP32 / "diagram.json").read_text())
    (part,) = diagram["parts"]
    assert part["type"].startswith("board-esp32-devkit")
    wires = {(a, b) for a, b, *_ in diagram["connections"]}
    esp = part["id"]
    assert {(f"{esp}:TX", "$serialMonitor:RX"), (f"{esp}:RX", "$serialMonitor:TX")} <= wires


def test_scenario_waits_for_ready_steps_and_the_verdict():
    waits = scenario_waits()
    steps = inspect.signature(write_samples_header).parameters["steps"].default
    # the first and the last step of the default run (the headers script's), then the verdict
    assert waits == ["selftrain ready board ", "step 0 loss ", f"step {steps - 1} loss ",
                     "selftrain ok: loss "]


@pytest.mark.skipif(not os.environ.get("WOKWI_CLI_TOKEN"),
                    reason="WOKWI_CLI_TOKEN is not set: the Wokwi simulator needs an account "
                    "token (https://wokwi.com/dashboard/ci)")
def test_scenario_passes_in_wokwi(vww_model_path, vww_data_dir, tmp_path):
    cli = shutil.which("wokwi-cli")
    assert cli, "WOKWI_CLI_TOKEN is set but wokwi-cli is not on PATH (docs.wokwi.com/wokwi-ci)"
    pio = shutil.which("pio")
    assert pio, "building the esp32dev-wokwi firmware needs PlatformIO (pio)"
    # the steps of docs/boards.md: convert, write the headers, build with them, simulate
    blob = tmp_path / "vww.tpb"
    subprocess.run([str(Path(sys.executable).with_name("tinyprop")), "convert",
                    str(vww_model_path), "-o", str(blob), "--scheme", "last:2"], check=True,
                   timeout=600)
    out = subprocess.run([sys.executable, str(REPO_ROOT / "boards" / "apps" /
                                              "selftrain_headers.py"), str(blob), "--data",
                          str(vww_data_dir)], check=True, capture_output=True, text=True,
                         timeout=300).stdout
    build_flags = shlex.split(out.removeprefix("export "))[0].split("=", 1)[1]
    subprocess.run([pio, "run", "-d", str(REPO_ROOT), "-e", ENV], check=True, timeout=1800,
                   env={**os.environ, "PLATFORMIO_BUILD_FLAGS": build_flags})
    # --timeout is simulated time: 16 VWW training steps and 16 inferences on a 240 MHz ESP32
    subprocess.run([cli, "--timeout", "600000", "--scenario", "scenario.yaml",
                    "--fail-text", "selftrain failed", "--fail-text", "selftrain error",
                    str(ESP32)], cwd=ESP32, check=True, timeout=1800)
