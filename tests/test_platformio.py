"""platformio.ini and the PlatformIO library: `pio project config` parses the file offline and
lists the three envs with their platforms and boards; the native env's Unity tests compiled and
run with gcc (PlatformIO cannot download its native platform or Unity here, so a minimal unity.h
stands in); the Arduino glue compiled with g++ against stub Arduino headers (a syntax and type
check only: the real cores cannot be fetched here); and the build flags the Arduino envs give
the device loop, applied to the host board: autosave every N steps survives a killed board."""

from __future__ import annotations

import configparser
import functools
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
from tinyprop.device.flash import env_sections, learn_envs
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


@functools.cache
def pio_config() -> dict[str, dict]:
    out = subprocess.run([str(PIO), "project", "config", "--json-output"], cwd=REPO_ROOT,
                         capture_output=True, text=True, check=True, timeout=60).stdout
    return {name: dict(items) for name, items in json.loads(out)}


def env_option(env: str, option: str) -> str:
    """An env's option: from `pio project config`, or without PlatformIO read from the file
    (its `extends`, [env] and `${section.option}` references resolved as PlatformIO does)."""
    if PIO.exists():
        value = pio_config()[f"env:{env}"].get(option, "")
        return "\n".join(map(str, value)) if isinstance(value, list) else str(value)
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(REPO_ROOT / "platformio.ini")
    section = next((s for s in env_sections(ini, env) if ini.has_option(s, option)), None)
    value = ini.get(section, option) if section else ""
    return re.sub(r"\$\{([^.}]+)\.([^}]+)\}", lambda m: ini.get(*m.groups()), value).strip()


def env_build_flags(env: str) -> str:
    return " ".join(flags(env_option(env, "build_flags")))


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
    assert sorted(envs) == ["esp32cam-learn", "esp32dev", "esp32dev-wokwi", "esp32s3eye-learn",
                            "nano33ble", "nano33ble-learn", "native"]
    # the platforms pinned to a version (owner/name@version), the boards PlatformIO's
    assert (envs["nano33ble"]["platform"], envs["nano33ble"]["board"]) == (
        "platformio/nordicnrf52@10.11.0", "nano33ble")
    assert (envs["esp32dev"]["platform"], envs["esp32dev"]["board"]) == (
        "platformio/espressif32@6.13.0", "esp32dev")
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


# Each learn env: its board's folder, the camera library it needs beside the core and the learn
# application, and the defines its glue needs (boards/<folder>/camera.cpp).
LEARN_ENVS = {
    "nano33ble-learn": ("nano33ble", ["arduino-libraries/Arduino_OV767X@^0.0.2"],
                        {"-DTP_APP_LEARN"}),
    "esp32cam-learn": ("esp32", [], {"-DTP_APP_LEARN", "-DTP_LEARN_BOARD_BUFFERS",
                                     "-DTP_ESP32_CAM_AI_THINKER"}),
    "esp32s3eye-learn": ("esp32", [], {"-DTP_APP_LEARN", "-DTP_LEARN_BOARD_BUFFERS",
                                       "-DTP_ESP32_CAM_S3_EYE", "-DBOARD_HAS_PSRAM",
                                       "-DARDUINO_USB_CDC_ON_BOOT=1"}),
}


def test_learn_envs_build_the_learn_application_with_their_camera():
    """Each board's learn envs (what tinyprop.device.flash.learn_envs finds for `tinyprop learn`)
    build the board's folder with the learn application's library and the camera library the
    glue includes; the ESP32's esp32-camera comes with Arduino-ESP32 and is not added twice."""
    assert learn_envs(load_profile("nano33ble")) == ["nano33ble-learn"]
    assert learn_envs(load_profile("esp32")) == ["esp32cam-learn", "esp32s3eye-learn"]
    learn = json.loads((FIRMWARE / "apps" / "learn" / "library.json").read_text())
    assert learn["name"] == "tinyprop-learn"
    assert learn["build"]["srcFilter"] == ["+<learn.c>"]
    assert learn["dependencies"] == [{"name": "tinyprop"}]
    for env, (folder, camera_libs, defines) in LEARN_ENVS.items():
        assert re.findall(r"\+<([\w-]+)/>", env_option(env, "build_src_filter")) == \
            [folder, "arduino"], env
        assert env_option(env, "lib_deps").split() == [
            "tinyprop=symlink://firmware", "tinyprop-learn=symlink://firmware/apps/learn",
            *camera_libs], env
        assert defines <= set(flags(env_option(env, "build_flags"))), env
        glue = (REPO_ROOT / "boards" / folder / "camera.cpp").read_text()
        included = "Arduino_OV767X.h" if folder == "nano33ble" else "esp_camera.h"
        assert f"#include <{included}>" in glue
        for define in defines - {"-DTP_APP_LEARN", "-DTP_LEARN_BOARD_BUFFERS"}:
            name = define.removeprefix("-D").split("=")[0]
            if name.startswith("TP_"):  # the camera board's pin map is in the glue
                assert f"defined({name})" in glue, (env, name)
    assert env_option("esp32cam-learn", "board") == "esp32cam"
    assert env_option("esp32s3eye-learn", "board") == "esp32-s3-devkitc-1"
    assert env_option("esp32s3eye-learn", "board_build.arduino.memory_type") == "qio_opi"


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
    common = REPO_ROOT / "boards" / "common"  # the virtual camera, as boards/host/Makefile
    sources = [REPO_ROOT / "boards" / "host" / "board.c", common / "vcamera.c",
               *make_print("print-sources"), FIRMWARE / "apps" / "device" / "tp_device.c"]
    subprocess.run(["gcc", *make_print("print-cflags"), f"-I{common}", "-O2", "-Wall", "-Wextra",
                    "-Werror", "-DAPP_ENTRY=tp_device_main", f'-DTP_MODEL_HEADER="{header}"',
                    *extra, "-o", str(exe),
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


# Declarations of just the Arduino, mbed, nRF, ESP-IDF and camera-library API the glue uses, as
# the real cores and libraries declare them; a call the real one lacks fails to compile here too.
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
unsigned long millis(void);
void delay(unsigned long ms);
void yield(void);
#ifdef ESP32
#define LOW 0x0
#define HIGH 0x1
#define OUTPUT 0x03
#define INPUT_PULLUP 0x05
void pinMode(uint8_t pin, uint8_t mode);
void digitalWrite(uint8_t pin, uint8_t val);
int digitalRead(uint8_t pin);
bool psramFound();
typedef void *TaskHandle_t;
unsigned int uxTaskGetStackHighWaterMark(TaskHandle_t task);
size_t getArduinoLoopTaskStackSize(void);
#else /* ArduinoCore-API, as the mbed core has it */
typedef uint8_t pin_size_t;
typedef enum { LOW = 0, HIGH = 1 } PinStatus;
typedef enum { INPUT = 0, OUTPUT = 1, INPUT_PULLUP = 2 } PinMode;
void pinMode(pin_size_t pin, PinMode mode);
void digitalWrite(pin_size_t pin, PinStatus value);
typedef enum { p13 = 13 } PinName;
PinName digitalPinToPinName(pin_size_t pin);
#define LEDR (22u)
#define LEDG (23u)
#define LEDB (24u)
#endif
""",
    "mbed.h": """
#include <chrono>
#include <stdint.h>
namespace mbed {
class FlashIAP {
  public:
    int init();
    int read(void *buffer, uint32_t address, uint32_t size);
    int program(const void *buffer, uint32_t address, uint32_t size);
    int erase(uint32_t address, uint32_t size);
    uint32_t get_sector_size(uint32_t address) const;
    uint32_t get_page_size() const;
    uint32_t get_flash_start() const;
    uint32_t get_flash_size() const;
};
class Ticker {
  public:
    void attach(void (*func)(), std::chrono::microseconds t);
};
}
""",
    "nrf_gpio.h": """
#include <stdint.h>
typedef enum { NRF_GPIO_PIN_DIR_INPUT, NRF_GPIO_PIN_DIR_OUTPUT } nrf_gpio_pin_dir_t;
typedef enum { NRF_GPIO_PIN_INPUT_CONNECT, NRF_GPIO_PIN_INPUT_DISCONNECT } nrf_gpio_pin_input_t;
typedef enum { NRF_GPIO_PIN_NOPULL, NRF_GPIO_PIN_PULLDOWN, NRF_GPIO_PIN_PULLUP = 3 }
    nrf_gpio_pin_pull_t;
typedef enum { NRF_GPIO_PIN_S0S1 } nrf_gpio_pin_drive_t;
typedef enum { NRF_GPIO_PIN_NOSENSE } nrf_gpio_pin_sense_t;
void nrf_gpio_cfg(uint32_t pin_number, nrf_gpio_pin_dir_t dir, nrf_gpio_pin_input_t input,
                  nrf_gpio_pin_pull_t pull, nrf_gpio_pin_drive_t drive,
                  nrf_gpio_pin_sense_t sense);
uint32_t nrf_gpio_pin_read(uint32_t pin_number);
""",
    "Arduino_OV767X.h": """
enum { YUV422 = 0, RGB444 = 1, RGB565 = 2, GRAYSCALE = 4 };
enum { OV7670 = 0, OV7675 = 1 };
enum { VGA = 0, CIF = 1, QVGA = 2, QCIF = 3, QQVGA = 4 };
class OV767X {
  public:
    int begin(int resolution, int format, int fps, int camera_name = OV7670);
    void end();
    void readFrame(void *buffer);
};
extern OV767X Camera;
""",
    "esp_heap_caps.h": """
#include <stddef.h>
#include <stdint.h>
#define MALLOC_CAP_8BIT (1 << 2)
#define MALLOC_CAP_SPIRAM (1 << 10)
void *heap_caps_aligned_alloc(size_t alignment, size_t size, uint32_t caps);
void *heap_caps_malloc(size_t size, uint32_t caps);
void heap_caps_free(void *ptr);
size_t heap_caps_get_free_size(uint32_t caps);
size_t heap_caps_get_largest_free_block(uint32_t caps);
""",
    "esp_err.h": """
typedef int esp_err_t;
#define ESP_OK 0
""",
    # ESP-IDF 4.4's (Arduino-ESP32 2.0.17's): no erase_size in esp_partition_t yet
    "esp_partition.h": """
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "esp_err.h"
typedef enum { ESP_PARTITION_TYPE_APP = 0x00, ESP_PARTITION_TYPE_DATA = 0x01 }
    esp_partition_type_t;
typedef enum { ESP_PARTITION_SUBTYPE_ANY = 0xff } esp_partition_subtype_t;
typedef struct {
    void *flash_chip;
    esp_partition_type_t type;
    esp_partition_subtype_t subtype;
    uint32_t address;
    uint32_t size;
    char label[17];
    bool encrypted;
} esp_partition_t;
const esp_partition_t *esp_partition_find_first(esp_partition_type_t type,
                                                esp_partition_subtype_t subtype,
                                                const char *label);
esp_err_t esp_partition_read(const esp_partition_t *partition, size_t src_offset, void *dst,
                             size_t size);
esp_err_t esp_partition_write(const esp_partition_t *partition, size_t dst_offset,
                              const void *src, size_t size);
esp_err_t esp_partition_erase_range(const esp_partition_t *partition, size_t offset,
                                    size_t size);
""",
    "esp_timer.h": """
#include <stdint.h>
#include "esp_err.h"
typedef struct esp_timer *esp_timer_handle_t;
typedef void (*esp_timer_cb_t)(void *arg);
typedef enum { ESP_TIMER_TASK } esp_timer_dispatch_t;
typedef struct {
    esp_timer_cb_t callback;
    void *arg;
    esp_timer_dispatch_t dispatch_method;
    const char *name;
    bool skip_unhandled_events;
} esp_timer_create_args_t;
esp_err_t esp_timer_create(const esp_timer_create_args_t *args, esp_timer_handle_t *handle);
esp_err_t esp_timer_start_periodic(esp_timer_handle_t timer, uint64_t period_us);
""",
    # espressif/esp32-camera's driver/include (esp_camera.h, sensor.h), in part
    "esp_camera.h": """
#include <stddef.h>
#include <stdint.h>
#include "esp_err.h"
typedef enum { LEDC_TIMER_0 } ledc_timer_t;
typedef enum { LEDC_CHANNEL_0 } ledc_channel_t;
typedef enum { PIXFORMAT_RGB565, PIXFORMAT_YUV422, PIXFORMAT_YUV420, PIXFORMAT_GRAYSCALE,
               PIXFORMAT_JPEG, PIXFORMAT_RGB888 } pixformat_t;
typedef enum { FRAMESIZE_96X96, FRAMESIZE_QQVGA, FRAMESIZE_128X128, FRAMESIZE_QCIF } framesize_t;
typedef enum { CAMERA_GRAB_WHEN_EMPTY, CAMERA_GRAB_LATEST } camera_grab_mode_t;
typedef enum { CAMERA_FB_IN_PSRAM, CAMERA_FB_IN_DRAM } camera_fb_location_t;
typedef struct {
    int pin_pwdn, pin_reset, pin_xclk;
    union { int pin_sccb_sda; };
    union { int pin_sccb_scl; };
    int pin_d7, pin_d6, pin_d5, pin_d4, pin_d3, pin_d2, pin_d1, pin_d0;
    int pin_vsync, pin_href, pin_pclk;
    int xclk_freq_hz;
    ledc_timer_t ledc_timer;
    ledc_channel_t ledc_channel;
    pixformat_t pixel_format;
    framesize_t frame_size;
    int jpeg_quality;
    size_t fb_count;
    camera_fb_location_t fb_location;
    camera_grab_mode_t grab_mode;
    int sccb_i2c_port;
} camera_config_t;
typedef struct {
    uint8_t *buf;
    size_t len, width, height;
    pixformat_t format;
} camera_fb_t;
esp_err_t esp_camera_init(const camera_config_t *config);
esp_err_t esp_camera_deinit(void);
camera_fb_t *esp_camera_fb_get(void);
void esp_camera_fb_return(camera_fb_t *fb);
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


def glue_command(tmp_path: Path, env: str, defines: list[str]) -> list[str]:
    """g++ checking the glue of env's board folder (board.cpp, camera.cpp, the shared Arduino
    glue) against the stub cores, with `defines`."""
    for name, text in ARDUINO_STUBS.items():
        (tmp_path / name).write_text(text)
    folder = re.findall(r"\+<([\w-]+)/>", env_option(env, "build_src_filter"))[0]
    if folder == "esp32":
        defines = [*defines, "-DESP32"]
    sources = [REPO_ROOT / "boards" / folder / "board.cpp",
               REPO_ROOT / "boards" / folder / "camera.cpp",
               REPO_ROOT / "boards" / "arduino" / "tp_arduino.cpp"]
    return ["g++", "-std=gnu++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
            f"-I{tmp_path}", f"-I{FIRMWARE / 'include'}", *defines, *map(str, sources)]


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
@pytest.mark.parametrize("env", ["nano33ble", "esp32dev", "esp32dev-wokwi", *LEARN_ENVS])
def test_arduino_glue_compiles_against_stub_cores(tmp_path, env):
    """The glue of each env with the defines platformio.ini gives it (esp32dev-wokwi: the
    self-training path, whose C application is built and run on qemu-m4 by test_selftrain; the
    learn envs: the camera, button and LED glue)."""
    defines = [f for f in flags(env_build_flags(env)) if f.startswith("-D")]
    result = subprocess.run(glue_command(tmp_path, env, defines), check=False,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_esp32_learn_build_without_a_camera_board_is_one_error(tmp_path):
    """The ESP32 learn glue's pin maps are per camera board: a learn build naming none fails,
    its first error the #error saying which defines choose one."""
    result = subprocess.run(glue_command(tmp_path, "esp32dev", ["-DTP_APP_LEARN",
                                                                "-DTP_LEARN_BOARD_BUFFERS"]),
                            check=False, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert "#error" in errors[0]
    assert "-DTP_ESP32_CAM_AI_THINKER or -DTP_ESP32_CAM_S3_EYE" in errors[0]


# The shared glue's label button and non-blocking read, run: a serial port whose bytes the test
# sets and a clock it moves stand in for the core.
BUTTON_DRIVER = r"""
#include <assert.h>
#include <stdio.h>
#include "Arduino.h"
#include "tp_arduino.h"

HardwareSerial Serial;
static const char *rx = "";
int HardwareSerial::available() { return (int)strlen(rx); }
size_t HardwareSerial::readBytes(char *buffer, size_t length)
{
    memcpy(buffer, rx, length);
    rx += length;
    return length;
}
void HardwareSerial::begin(unsigned long) {}
HardwareSerial::operator bool() const { return true; }
size_t HardwareSerial::write(const uint8_t *, size_t size) { return size; }
unsigned long micros(void) { return 0; }
void delay(unsigned long) {}
void yield(void) {}
extern "C" int tp_learn_main(void) { return 0; }
const unsigned long tp_arduino_baud = 115200;

/* A press of held_ms sampled every TP_ARDUINO_BUTTON_SAMPLE_MS from t, then the label. */
static int32_t press(uint32_t t, uint32_t held_ms)
{
    for (uint32_t ms = 0; ms <= held_ms; ms += TP_ARDUINO_BUTTON_SAMPLE_MS) {
        tp_arduino_button_sample(ms < held_ms, t + ms);
    }
    int32_t label = 99;
    assert(tp_arduino_button_label(&label) == TP_BOARD_OK);
    return label;
}

int main(void)
{
    int32_t label = 99;
    assert(tp_arduino_button_label(&label) == TP_BOARD_OK && label == TP_BOARD_NO_LABEL);
    int32_t short_press = press(1000, 200), long_press = press(5000, 1500);
    int32_t bounce = press(9000, 20), wrapped = press(0xFFFFFF00u, 400); /* the clock wraps */
    printf("%d %d %d %d", (int)short_press, (int)long_press, (int)bounce, (int)wrapped);
    tp_arduino_button_sample(true, 20000);
    tp_arduino_button_sample(false, 20100);
    assert(tp_arduino_button_label(&label) == TP_BOARD_OK && label == 1);
    assert(tp_arduino_button_label(&label) == TP_BOARD_OK && label == TP_BOARD_NO_LABEL);
    assert(tp_arduino_button_label(NULL) == TP_BOARD_ERR_ARG);
    uint8_t buf[4];
    assert(tp_board_poll(buf, sizeof buf) == 0); /* nothing arrived: no wait */
    rx = "abcdef";
    assert(tp_board_poll(buf, sizeof buf) == 4 && memcmp(buf, "abcd", 4) == 0);
    assert(tp_board_read(buf, sizeof buf) == 2 && memcmp(buf, "ef", 2) == 0);
    assert(tp_board_poll(NULL, 4) == TP_BOARD_ERR_ARG && tp_board_poll(buf, 0) == TP_BOARD_ERR_ARG);
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_label_button_and_poll_of_the_arduino_glue(tmp_path):
    """boards/arduino/tp_arduino.cpp compiled for a learn build and run: a short press labels
    class 1, a long one (>= 1 s) class 0, a bounce (< 30 ms) nothing, also across the clock's
    wrap; a label is taken once; tp_board_poll returns at once with what has arrived."""
    for name, text in ARDUINO_STUBS.items():
        (tmp_path / name).write_text(text)
    driver, exe = tmp_path / "driver.cpp", tmp_path / "button"
    driver.write_text(BUTTON_DRIVER)
    glue = REPO_ROOT / "boards" / "arduino"
    subprocess.run(["g++", "-std=gnu++17", "-Wall", "-Wextra", "-Werror", "-DTP_APP_LEARN",
                    f"-I{tmp_path}", f"-I{glue}", f"-I{FIRMWARE / 'include'}", "-o", str(exe),
                    str(driver), str(glue / "tp_arduino.cpp")], check=True, timeout=120)
    run = subprocess.run([str(exe)], check=False, capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "1 0 -1 1"
