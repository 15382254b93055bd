"""platformio.ini and the PlatformIO library: `pio project config` parses the file offline and
lists the three envs with their platforms and boards; the native env's Unity tests compiled and
run with gcc (PlatformIO cannot download its native platform or Unity here, so a minimal unity.h
stands in); the Arduino glue compiled with g++ against stub Arduino headers (a syntax and type
check only: the real cores cannot be fetched here); and the build flags the Arduino envs give
the device loop, applied to the host board: autosave every N steps survives a killed board."""

from __future__ import annotations

import configparser
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_device_host import LR, SEED, load_small_model
from tinyprop.device.device import Device
from tinyprop.device.firmware import build_program, write_blob_header
from tinyprop.device.link import Link, PipeTransport
from tinyprop.device.profiles import board_names, load_profile
from tinyprop.device.runners import start_host_board
from tinyprop.paths import REPO_ROOT

PIO = Path(sys.executable).with_name("pio")
FIRMWARE = REPO_ROOT / "firmware"

# Just what tests/native uses of Unity's API, with Unity's summary line.
UNITY_SHIM = r"""
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
static int unity_tests, unity_failures;
static jmp_buf unity_abort; /* a failed assertion ends its test, as in Unity */
void setUp(void);
void tearDown(void);
#define UNITY_FAIL_IF(cond, what) do { if (cond) { \
    printf("%s:%d: FAIL %s\n", __FILE__, __LINE__, what); longjmp(unity_abort, 1); } } while (0)
#define TEST_ASSERT_EQUAL_INT(e, a) UNITY_FAIL_IF((long)(e) != (long)(a), #a " == " #e)
#define TEST_ASSERT_EQUAL_UINT8 TEST_ASSERT_EQUAL_INT
#define TEST_ASSERT_EQUAL_UINT16 TEST_ASSERT_EQUAL_INT
#define TEST_ASSERT_EQUAL_HEX32 TEST_ASSERT_EQUAL_INT
#define TEST_ASSERT_NULL(p) UNITY_FAIL_IF((p) != NULL, #p " is NULL")
#define TEST_ASSERT_NOT_NULL(p) UNITY_FAIL_IF((p) == NULL, #p " is not NULL")
#define TEST_ASSERT_EQUAL_MEMORY(e, a, n) UNITY_FAIL_IF(memcmp((e), (a), (n)) != 0, #a)
#define UNITY_BEGIN() (unity_tests = unity_failures = 0)
#define RUN_TEST(f) do { unity_tests++; if (setjmp(unity_abort) == 0) { setUp(); f(); \
    tearDown(); } else { unity_failures++; } } while (0)
#define UNITY_END() (printf("%d Tests %d Failures 0 Ignored\n", unity_tests, unity_failures), \
    unity_failures)
"""

needs_pio = pytest.mark.skipif(not PIO.exists(), reason="needs platformio in the venv "
                               "(.venv/bin/pip install platformio; scripts/setup.sh)")


def pio_config() -> dict[str, dict]:
    out = subprocess.run([str(PIO), "project", "config", "--json-output"], cwd=REPO_ROOT,
                         capture_output=True, text=True, check=True, timeout=60).stdout
    return {name: dict(items) for name, items in json.loads(out)}


def env_build_flags(env: str) -> str:
    """An env's build_flags: from `pio project config`, or without PlatformIO read from the file
    (its `extends` and `${section.option}` references resolved as PlatformIO does)."""
    if PIO.exists():
        return " ".join(flags(pio_config()[f"env:{env}"]["build_flags"]))
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(REPO_ROOT / "platformio.ini")
    section = f"env:{env}"
    while not ini.has_option(section, "build_flags") and ini.has_option(section, "extends"):
        section = ini.get(section, "extends")
    value = ini.get(section, "build_flags", fallback="")
    return re.sub(r"\$\{([^.}]+)\.([^}]+)\}", lambda m: ini.get(*m.groups()), value)


def make_print(what: str) -> list[str]:
    """The library's sources or compiler flags, as firmware/Makefile (sources.mk) gives them."""
    return subprocess.run(["make", "-s", "-C", str(FIRMWARE), what], check=True,
                          capture_output=True, text=True).stdout.split()


def flags(value: str | list[str]) -> list[str]:
    return shlex.split(" ".join(value) if isinstance(value, list) else value)


def test_platformio_ini_has_the_boards_envs_and_no_other():
    """A board whose descriptor names a PlatformIO env (flash.platformio_env) has it in
    platformio.ini, building the board's own folder; every other env there is a variant of a
    board's (extends it) or the native tests' (no board code)."""
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(REPO_ROOT / "platformio.ini")
    envs = {name.removeprefix("env:"): ini[name] for name in ini.sections()
            if name.startswith("env:")}
    boards = {load_profile(n).flashing.platformio_env: n for n in board_names()
              if load_profile(n).flashing is not None}
    assert {"esp32", "nano33ble"} <= set(boards.values())
    for env, board in boards.items():
        assert env in envs, f"{board}'s env {env} is not in platformio.ini"
        assert f"+<{board}/>" in envs[env]["build_src_filter"], env
    for env, section in envs.items():
        if env in boards:
            continue
        if section.get("platform") == "native":
            assert section["build_src_filter"].strip() == "-<*>", env
        else:
            assert section.get("extends", "").removeprefix("env:") in boards, env


@needs_pio
def test_pio_lists_the_three_envs_with_platform_and_board():
    config = pio_config()
    envs = {name.removeprefix("env:"): items for name, items in config.items()
            if name.startswith("env:")}
    assert sorted(envs) == ["esp32dev", "esp32dev-wokwi", "nano33ble", "native"]
    assert (envs["nano33ble"]["platform"], envs["nano33ble"]["board"]) == ("nordicnrf52",
                                                                          "nano33ble")
    assert (envs["esp32dev"]["platform"], envs["esp32dev"]["board"]) == ("espressif32",
                                                                        "esp32dev")
    assert envs["native"]["platform"] == "native"
    assert envs["native"]["test_framework"] == "unity"
    for board in ("nano33ble", "esp32dev"):
        env = envs[board]
        assert env["framework"] == ["arduino"]
        # the UART's speed on the ESP32 (its profile); USB CDC ignores it
        speed = load_profile("esp32").baud if board == "esp32dev" else 115200
        assert env["monitor_speed"] == speed and env["monitor_filters"] == ["tinyprop"]
        assert env["monitor_encoding"] == "latin-1"
        assert env["lib_deps"] == ["tinyprop=symlink://firmware"]
        # the glue it builds exists, and the monitor filter PlatformIO looks for in monitor/
        folders = re.findall(r"\+<([\w-]+)/>", " ".join(env["build_src_filter"]))
        assert folders == [board.removesuffix("dev"), "arduino"]
        assert all((REPO_ROOT / "boards" / folder).is_dir() for folder in folders)
    assert (REPO_ROOT / "monitor" / "filter_tinyprop.py").is_file()
    assert "-DTP_DEVICE_BOARD_BUFFERS" in flags(envs["esp32dev"]["build_flags"])
    # the Wokwi build: the esp32dev board running the self-training application instead
    wokwi = envs["esp32dev-wokwi"]
    assert wokwi["extends"] == ["env:esp32dev"]
    assert {k: wokwi[k] for k in ("platform", "board", "framework")} == \
        {k: envs["esp32dev"][k] for k in ("platform", "board", "framework")}
    assert re.findall(r"\+<([\w-]+)/>", " ".join(wokwi["build_src_filter"])) == \
        ["esp32", "arduino"]
    # the self-training application is a library of its own beside the core's
    assert wokwi["lib_deps"] == ["tinyprop=symlink://firmware",
                                 "tinyprop-selftrain=symlink://firmware/apps/selftrain"]
    assert {"-DTP_APP_SELFTRAIN", "-DTP_SELFTRAIN_BOARD_BUFFERS"} <= \
        set(flags(wokwi["build_flags"]))
    assert Path(config["platformio"]["test_dir"]) == REPO_ROOT / "tests" / "native"


def test_library_json_builds_the_library_and_the_device_loop():
    library = json.loads((FIRMWARE / "library.json").read_text())
    assert library["name"] == "tinyprop"
    folders = [f.removeprefix("+<").removesuffix("/>") for f in library["build"]["srcFilter"]]
    assert folders == ["core", "proto", "apps/device"]
    # every library source (sources.mk) is in one of the folders PlatformIO compiles
    for source in make_print("print-sources"):
        assert Path(source).relative_to(FIRMWARE).parts[0] in folders
    include = FIRMWARE / library["build"]["includeDir"]
    for header in library["headers"]:
        assert (include / header).is_file()
    selftrain = json.loads((FIRMWARE / "apps" / "selftrain" / "library.json").read_text())
    assert selftrain["build"]["srcFilter"] == ["+<selftrain.c>"]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_native_unity_tests_pass_with_gcc(tmp_path):
    (tmp_path / "unity.h").write_text(UNITY_SHIM)
    tests = sorted((REPO_ROOT / "tests" / "native").glob("test_*/*.c"))
    assert tests
    for source in tests:  # each linked against the core as firmware/Makefile builds it
        exe = build_program(source, include_dirs=[tmp_path])
        run = subprocess.run([str(exe)], check=False, capture_output=True, text=True, timeout=30)
        assert run.returncode == 0, run.stdout
        assert re.search(r"^(\d+) Tests 0 Failures", run.stdout, re.MULTILINE).group(1) == "3"


def build_host_board(tmp_path: Path, blob: bytes, extra: list[str]) -> Path:
    header = write_blob_header(blob)
    exe = tmp_path / "tinyprop-host"
    sources = [REPO_ROOT / "boards" / "host" / "board.c", *make_print("print-sources"),
               FIRMWARE / "apps" / "device" / "tp_device.c"]
    subprocess.run(["gcc", *make_print("print-cflags"), "-O2", "-Wall", "-Wextra", "-Werror",
                    "-DAPP_ENTRY=tp_device_main",
                    f'-DTP_MODEL_HEADER="{header}"', *extra, "-o", str(exe),
                    *map(str, sources), "-lm"], check=True, timeout=300)
    return exe


@pytest.mark.slow
@needs_pio
def test_arduino_autosave_flag_survives_a_killed_board(tmp_path):
    """[arduino] build_flags (autosave every N steps) on the host board: killed after N + 1
    steps with no SAVE asked, the restarted board restores the parameters of step N."""
    model = load_small_model()
    extra = flags(pio_config()["arduino"]["build_flags"])
    every = int(re.search(r"-DTP_DEVICE_SAVE_EVERY=(\d+)", " ".join(extra)).group(1))
    exe = build_host_board(tmp_path, model.blob, extra)
    with start_host_board(exe, tmp_path) as run, Link(PipeTransport(run.proc, "host")) as link:
        dev = Device(link)
        dev.hello(30)
        dev.set_hparams(LR, SEED)
        n = len(model.labels)
        for i in range(every + 1):
            dev.train(model.inputs[i % n], int(model.labels[i % n]))
        run.proc.kill()
    with start_host_board(exe, tmp_path) as run, Link(PipeTransport(run.proc, "host")) as link:
        dev = Device(link)
        dev.hello(30)
        assert dev.pull_params() == model.reference(every).params_bytes()


# Declarations of just the Arduino, mbed and ESP-IDF API the glue uses, as the real cores
# declare them; a call the real core lacks fails to compile here too.
ARDUINO_STUBS = {
    "Arduino.h": """
#include <stddef.h>
#include <stdint.h>
#include <string.h>
struct HardwareSerial {
    void begin(unsigned long baud);
    explicit operator bool() const;
    int available();
    size_t readBytes(char *buffer, size_t length);
    size_t write(const uint8_t *buffer, size_t size);
    size_t println(const char *text);
#ifdef ESP32
    size_t setRxBufferSize(size_t size);
#endif
};
extern HardwareSerial Serial;
unsigned long micros(void);
void delay(unsigned long ms);
void yield(void);
#ifdef ESP32
typedef void *TaskHandle_t;
unsigned int uxTaskGetStackHighWaterMark(TaskHandle_t task);
size_t getArduinoLoopTaskStackSize(void);
#endif
""",
    "mbed.h": """
#include <stdint.h>
namespace mbed {
class FlashIAP {
  public:
    int init();
    int read(void *buffer, uint32_t address, uint32_t size);
    int program(const void *buffer, uint32_t address, uint32_t size);
    int erase(uint32_t address, uint32_t size);
    uint32_t get_page_size() const;
    uint32_t get_flash_start() const;
    uint32_t get_flash_size() const;
};
}
""",
    "LittleFS.h": """
#include <stddef.h>
#include <stdint.h>
class File {
  public:
    explicit operator bool() const;
    size_t write(const uint8_t *buf, size_t size);
    size_t read(uint8_t *buf, size_t size);
    size_t size() const;
    void close();
};
class LittleFSFS {
  public:
    bool begin(bool formatOnFail = false);
    File open(const char *path, const char *mode = "r");
    bool exists(const char *path);
    bool rename(const char *from, const char *to);
};
extern LittleFSFS LittleFS;
""",
    "esp_heap_caps.h": """
#include <stddef.h>
#include <stdint.h>
#define MALLOC_CAP_8BIT (1 << 2)
void *heap_caps_aligned_alloc(size_t alignment, size_t size, uint32_t caps);
void *heap_caps_malloc(size_t size, uint32_t caps);
void heap_caps_free(void *ptr);
size_t heap_caps_get_free_size(uint32_t caps);
size_t heap_caps_get_largest_free_block(uint32_t caps);
""",
    # newlib's (the Arm toolchain's): glibc's deprecates mallinfo
    "malloc.h": """
#include <stddef.h>
struct mallinfo {
    size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost;
};
struct mallinfo mallinfo(void);
""",
}


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
@pytest.mark.parametrize("env", ["nano33ble", "esp32dev", "esp32dev-wokwi"])
def test_arduino_glue_compiles_against_stub_cores(tmp_path, env):
    """The glue of each env with the defines platformio.ini gives it (esp32dev-wokwi: the
    self-training path, whose C application is built and run on qemu-m4 by test_selftrain)."""
    for name, text in ARDUINO_STUBS.items():
        (tmp_path / name).write_text(text)
    board = env.split("-")[0].removesuffix("dev")
    defines = [f for f in flags(env_build_flags(env)) if f.startswith("-D")]
    if board == "esp32":
        defines.append("-DESP32")
    sources = [REPO_ROOT / "boards" / board / "board.cpp",
               REPO_ROOT / "boards" / "arduino" / "tp_arduino.cpp"]
    result = subprocess.run(["g++", "-std=gnu++17", "-fsyntax-only", "-Wall", "-Wextra",
                             "-Werror", f"-I{tmp_path}", f"-I{FIRMWARE / 'include'}", *defines,
                             *map(str, sources)], check=False, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
