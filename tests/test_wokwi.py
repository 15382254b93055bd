"""Wokwi files for the ESP32 build: consistent with the PlatformIO env and the firmware (always
checked), and the scenario run in the simulator by wokwi-cli when WOKWI_CLI_TOKEN is set."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest
import tomllib
from tinyprop.qemu import REPO_ROOT

ESP32 = REPO_ROOT / "boards" / "esp32"


def scenario_waits() -> list[str]:
    text = (ESP32 / "scenario.yaml").read_text()
    return re.findall(r'^\s*- wait-serial: "([^"]+)"', text, re.MULTILINE)


def test_wokwi_runs_the_esp32dev_build():
    config = tomllib.loads((ESP32 / "wokwi.toml").read_text())["wokwi"]
    assert config["version"] == 1
    for key, name in (("firmware", "firmware.bin"), ("elf", "firmware.elf")):
        path = (ESP32 / config[key]).resolve()
        assert path == REPO_ROOT / ".pio" / "build" / "esp32dev" / name


def test_diagram_wires_the_uart_to_the_serial_monitor():
    diagram = json.loads((ESP32 / "diagram.json").read_text())
    (part,) = diagram["parts"]
    assert part["type"].startswith("board-esp32-devkit")
    wires = {(a, b) for a, b, *_ in diagram["connections"]}
    esp = part["id"]
    assert {(f"{esp}:TX", "$serialMonitor:RX"), (f"{esp}:RX", "$serialMonitor:TX")} <= wires


def test_scenario_waits_for_what_the_firmware_prints():
    waits = scenario_waits()
    assert waits
    source = (ESP32 / "board.cpp").read_text()
    boot_line = re.search(r'#define BOOT_LINE "([^"]+)"', source).group(1)
    assert all(w in boot_line for w in waits)


@pytest.mark.skipif(not os.environ.get("WOKWI_CLI_TOKEN"),
                    reason="WOKWI_CLI_TOKEN is not set: the Wokwi simulator needs an account "
                    "token (https://wokwi.com/dashboard/ci)")
def test_scenario_passes_in_wokwi():
    cli = shutil.which("wokwi-cli")
    assert cli, "WOKWI_CLI_TOKEN is set but wokwi-cli is not on PATH (docs.wokwi.com/wokwi-ci)"
    firmware = REPO_ROOT / ".pio" / "build" / "esp32dev" / "firmware.bin"
    if not firmware.exists():
        pio = shutil.which("pio")
        assert pio, "the esp32dev firmware is not built and PlatformIO (pio) is not installed"
        subprocess.run([pio, "run", "-d", str(REPO_ROOT), "-e", "esp32dev"], check=True,
                       timeout=1800)
    subprocess.run([cli, "--timeout", "60000", "--scenario", "scenario.yaml", str(ESP32)],
                   cwd=ESP32, check=True, timeout=300)
