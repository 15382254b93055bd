"""`tinyprop package`: the Arduino library, the ESP-IDF component and the PlatformIO package held to
their specs without the network: every required manifest field, the layout, every #include of
every file resolving inside the package, the C sources exactly firmware/sources.mk's (`make
print-sources`) plus the named extras, copied unchanged. The Arduino library is built as a sketch
build would build it, from the package alone: src/ and each example's own files with only src/
on the include path, linked with the host board (boards/host) and run (the self-training run's
lines equal the NumPy reference's; the device loop binds its compiled-in model), and compiled to
objects with arm-none-eabi for the Nano 33 BLE's flags (the DSP kernels behind
__ARM_FEATURE_DSP: built there, not on the host). The Arduino glue is compiled against
test_platformio's stub cores (the declarations the glue uses; the real cores cannot be fetched
here). The ESP-IDF board and example cannot be compiled here (no ESP-IDF, no Xtensa compiler)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from test_device_host import load_ir_model
from test_platformio import ARDUINO_STUBS, make_print
from test_selftrain import expected_lines
from tinyprop import __version__
from tinyprop.cli import main
from tinyprop.compile.blob import blob_header, blob_id
from tinyprop.device.device import Device
from tinyprop.device.firmware import samples_header
from tinyprop.device.link import Link, PipeTransport
from tinyprop.device.runners import start_host_board
from tinyprop.paths import REPO_ROOT

FIRMWARE = REPO_ROOT / "firmware"
EXAMPLES = ("DeviceLoop", "CameraLearn", "SelfTrain")
GLUE = ["boards/arduino/tp_arduino.cpp", "boards/nano33ble/board.cpp", "boards/esp32/board.cpp"]
# each Arduino example's sources besides src/: its application and the board glue
EXAMPLE_SOURCES = {
    "DeviceLoop": ["firmware/apps/device/tp_device.c", *GLUE],
    "CameraLearn": ["firmware/apps/learn/learn.c", *GLUE, "boards/nano33ble/camera.cpp",
                    "boards/esp32/camera.cpp"],
    "SelfTrain": ["firmware/apps/selftrain/selftrain.c", *GLUE],
}
SKETCH_FILES = {"tinyprop_app.c", "tinyprop_board.cpp", "tinyprop_config.h"}
APP_ENTRIES = {"DeviceLoop": "tp_device_main", "CameraLearn": "tp_learn_main",
               "SelfTrain": "tp_selftrain_main"}
# ArduinoCore-mbed's variants/ARDUINO_NANO33BLE/cflags.txt (the code generation part)
NANO_FLAGS = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=softfp", "-mfpu=fpv4-sp-d16", "-Os",
              "-funsigned-char", "-ffunction-sections", "-fdata-sections", "-fomit-frame-pointer"]
# as the Arduino cores compile C: GNU C11 and no -ffp-contract=off (tinyprop.h's pragma holds)
C_FLAGS = ["-std=gnu11", "-Wall", "-Wextra", "-Werror"]
# the Cortex-M4F's fused multiply-adds, which would part the float paths from NumPy's
FUSED = re.compile(r"\bv(fma|fms|fnma|fnms)\.f32\b")
CXX_FLAGS = ["-std=gnu++17", "-Wall", "-Wextra", "-Werror"]
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
RUN = {"steps": 16, "lr": 0.05, "seed": 7}


def library_sources() -> list[str]:
    """sources.mk's sources, relative to firmware/."""
    return [Path(p).resolve().relative_to(FIRMWARE.resolve()).as_posix()
            for p in make_print("print-sources")]


def files_under(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def c_sources(names: set[str]) -> set[str]:
    return {n for n in names if n.endswith((".c", ".cpp"))}


@pytest.fixture(scope="module")
def packages(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("packages")
    for kind in ("arduino", "esp-idf", "platformio"):
        assert main(["package", kind, "-o", str(root / kind), "--zip"]) == 0
    return {kind: root / kind for kind in ("arduino", "esp-idf", "platformio")}


def properties(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def test_arduino_library_properties_has_every_field(packages):
    """Library Specification 1.5: the eight required fields, the boards, the camera example's
    library; the version the host package's."""
    props = properties(packages["arduino"] / "library.properties")
    required = ["name", "version", "author", "maintainer", "sentence", "paragraph", "category",
                "url"]
    assert all(props.get(key) for key in required), props
    assert props["name"] == "tinyprop"
    assert props["version"] == __version__
    assert props["category"] in ("Data Processing", "Data Storage", "Other")
    assert props["architectures"].split(",") == ["mbed_nano", "esp32"]
    assert props["depends"] == "Arduino_OV767X"
    assert props["includes"] == "tinyprop.h"
    assert (packages["arduino"] / "src" / "tinyprop.h").is_file()


def test_arduino_layout_and_sources(packages):
    """src/ holds sources.mk's sources exactly (include/ and core/ merged into src/, proto/
    under it), and the headers; every example is examples/<Name>/<Name>.ino with the sketch's
    files and its application and glue, byte for byte the repository's; nothing else."""
    lib = packages["arduino"]
    names = files_under(lib)
    expected_src = {"src/" + (s.split("/", 1)[1] if s.startswith("core/") else s)
                    for s in library_sources()}
    assert c_sources({n for n in names if n.startswith("src/")}) == expected_src
    headers = {n for n in names if n.startswith("src/") and n.endswith(".h")}
    assert {Path(h).name for h in headers} >= {p.name for p in (FIRMWARE / "include").glob("*.h")}
    assert sorted(p.name for p in (lib / "examples").iterdir()) == sorted(EXAMPLES)
    for example, own in EXAMPLE_SOURCES.items():
        folder = lib / "examples" / example
        assert (folder / f"{example}.ino").is_file()
        files = files_under(folder)
        headers = {"boards/arduino/tp_arduino.h", "boards/esp-idf/tp_esp_heap.h"}
        assert files - {f"{example}.ino"} - SKETCH_FILES == {*own, *headers}
        for name in files - {f"{example}.ino"} - SKETCH_FILES:
            assert (folder / name).read_bytes() == (REPO_ROOT / name).read_bytes(), name
    assert {n.split("/")[0] for n in names} == {"library.properties", "src", "examples"}


def resolve(include: str, source: Path, include_dirs: list[Path]) -> bool:
    return any((d / include).is_file() for d in (source.parent, *include_dirs))


def unresolved(root: Path, include_dirs: list[Path], ours: set[str]) -> list[str]:
    """Quoted #includes of every file under root that resolve neither beside the file nor in
    include_dirs; <...> includes too when they name one of `ours` (a tinyprop header). A
    sketch's two translation units choose their includes by its settings: the preprocessor
    checks those (test_every_sketch_include_resolves_inside_the_package)."""
    missing = []
    for path in root.rglob("*"):
        if path.suffix not in (".c", ".cpp", ".h", ".ino") or path.name in SKETCH_FILES:
            continue
        for kind, name in INCLUDE.findall(path.read_text()):
            if kind == "<" and name not in ours:
                continue
            if not resolve(name, path, include_dirs):
                missing.append(f"{path.relative_to(root)}: {name}")
    return missing


def test_every_include_resolves_inside_the_package(packages):
    """With only the include folders each tool adds: Arduino src/, ESP-IDF the component's
    INCLUDE_DIRS and PRIV_INCLUDE_DIRS, PlatformIO includeDir and the build flags' -I core."""
    ours = {p.name for p in (FIRMWARE / "include").glob("*.h")}
    lib, idf, pio = packages["arduino"], packages["esp-idf"], packages["platformio"]
    assert unresolved(lib, [lib / "src"], ours) == []
    assert unresolved(idf, [idf / "include", idf / "core", idf / "boards" / "esp-idf"], ours) == []
    assert unresolved(pio, [pio / "include", pio / "core"], ours) == []


def test_every_sketch_include_resolves_inside_the_package(sketches):
    """Each example's translation units, preprocessed with only src/ on the include path (and
    the stub cores for the glue, on each board): every file they include is the package's, or
    the sketch's own model.h / samples.h."""
    src, stubs = sketches / "src", sketches.parent / "stubs"
    for example in EXAMPLES:
        folder = sketches / "examples" / example
        units = [["gcc", f"-I{src}", str(folder / "tinyprop_app.c")]]
        units += [["g++", "-std=gnu++17", define, f"-I{stubs}", f"-I{src}",
                   str(folder / "tinyprop_board.cpp")]
                  for define in ("-DARDUINO_ARCH_MBED", "-DESP32")]
        for cmd in units:
            deps = subprocess.run([*cmd[:1], "-MM", *cmd[1:]], check=True, capture_output=True,
                                  text=True).stdout.replace("\\\n", " ").split()[2:]
            outside = [d for d in map(Path, deps) if not d.resolve().is_relative_to(sketches)
                       and not d.resolve().is_relative_to(stubs)]
            assert outside == [], (example, cmd)
        app_deps = subprocess.run(["gcc", "-MM", *units[0][1:]], check=True, capture_output=True,
                                  text=True).stdout
        assert "/../../../model.h" in app_deps  # the model, by the path the application takes


def test_the_zip_has_one_top_folder_with_the_package(packages):
    for kind, folder in packages.items():
        with zipfile.ZipFile(folder.with_name(kind + ".zip")) as z:
            names = z.namelist()
        assert {n.split("/")[0] for n in names} == {"tinyprop"}
        assert {n.split("/", 1)[1] for n in names} == files_under(folder)


def test_esp_idf_component(packages):
    """idf_component.yml's fields; CMakeLists.txt lists sources.mk's sources, the device loop
    and the ESP-IDF board, every one present; the example project names the component by path."""
    idf = packages["esp-idf"]
    manifest = (idf / "idf_component.yml").read_text()
    for key in ("version", "description", "url", "license"):
        assert re.search(rf'^{key}: "[^"]+"$', manifest, re.M), key
    assert re.search(r'^dependencies:\n  idf: ">=5\.\d+"$', manifest, re.M)
    cmake = (idf / "CMakeLists.txt").read_text()
    listed = re.findall(r'^ {8}"([^"]+)"$', cmake, re.M)
    assert set(listed) == {*library_sources(), "apps/device/tp_device.c", "boards/esp-idf/board.c"}
    assert {n for n in c_sources(files_under(idf)) if not n.startswith("examples/")} == set(listed)
    assert 'INCLUDE_DIRS "include" "boards/esp-idf"' in cmake and "-ffp-contract=off" in cmake
    example = idf / "examples" / "device_loop"
    for name in ("CMakeLists.txt", "main/CMakeLists.txt", "main/main.c", "main/idf_component.yml",
                 "partitions.csv", "sdkconfig.defaults"):
        assert (example / name).is_file(), name
    override = re.search(r'override_path: "([^"]+)"',
                         (example / "main" / "idf_component.yml").read_text()).group(1)
    assert (example / "main" / override).resolve() == idf.resolve()
    assert "tinyprop," in (example / "partitions.csv").read_text()  # the board's store


def test_platformio_package_is_library_json_export(packages):
    """The published files are library.json's export.include; the manifest has what the
    registry asks; the C sources are sources.mk's and the device loop (build.srcFilter)."""
    pio = packages["platformio"]
    lib = json.loads((pio / "library.json").read_text())
    for key in ("name", "version", "description", "keywords", "repository", "authors", "license",
                "homepage", "frameworks", "platforms", "export", "build"):
        assert lib.get(key), key
    assert lib["repository"]["type"] == "git" and lib["repository"]["url"].startswith("https://")
    names = files_under(pio)
    assert {n.split("/")[0] for n in names} == {p.split("/")[0]
                                                for p in lib["export"]["include"]} | {"examples"}
    library = {n for n in names if not n.startswith("examples/")}
    assert c_sources(library) == {*library_sources(), "apps/device/tp_device.c"}
    assert lib["build"]["srcFilter"] == ["+<core/>", "+<proto/>", "+<apps/device/>"]
    # the Arduino examples, each with its glue, listed for the registry with every file
    assert [e["name"] for e in lib["examples"]] == list(EXAMPLES)
    for e in lib["examples"]:
        assert f"{e['name']}.ino" in e["files"]
        assert {f"{e['base']}/{f}" for f in e["files"]} == \
            {n for n in names if n.startswith(e["base"] + "/")}
        assert files_under(pio / e["base"]) == files_under(packages["arduino"] / e["base"])


@pytest.mark.parametrize("argv, message", [
    (["package", "zephyr", "-o", "{tmp}/x"], "unknown kind 'zephyr'; use one of arduino, "),
    (["package", "arduino", "-o", "{tmp}/full"], "exists and is not empty; pass --force"),
    (["package", "arduino", "-o", "{tmp}/full", "--force"], "replaces only a folder"),
    (["package", "arduino", "-o", "{tmp}/file"], "is a file; name a folder"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, argv, message):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("not a package")
    (tmp_path / "file").write_text("")
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tinyprop package: error: ") and message in err
    assert (tmp_path / "full" / "mine.txt").is_file()  # never deleted


def test_force_replaces_a_package_it_wrote(tmp_path):
    out = tmp_path / "lib"
    assert main(["package", "platformio", "-o", str(out)]) == 0
    (out / "stale.c").write_text("")
    assert main(["package", "platformio", "-o", str(out), "--force"]) == 0
    assert not (out / "stale.c").exists() and (out / "library.json").is_file()


# ---- the Arduino library built as a sketch build builds it ----

def compile_all(commands: list[list[str]]) -> None:
    """Run the compiler commands two at a time (this machine's cores); every one must pass."""
    def run(cmd):
        return subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=300)

    with ThreadPoolExecutor(2) as pool:
        for cmd, result in zip(commands, pool.map(run, commands), strict=True):
            assert result.returncode == 0, f"{' '.join(cmd)}\n{result.stderr}"


@pytest.fixture(scope="module")
def sketches(packages, tmp_path_factory) -> Path:
    """The Arduino library with each example's headers written as its comments say (the
    model: convert --header's text; the samples: selftrain_headers.py's)."""
    lib = tmp_path_factory.mktemp("sketches") / "tinyprop"
    shutil.copytree(packages["arduino"], lib)
    model = load_ir_model()
    for example in EXAMPLES:
        (lib / "examples" / example / "model.h").write_text(blob_header(model.blob))
    (lib / "examples" / "SelfTrain" / "samples.h").write_text(
        samples_header(model.inputs, model.labels.tolist(), **RUN))
    stubs = lib.parent / "stubs"
    stubs.mkdir()
    for name, text in ARDUINO_STUBS.items():  # guarded, as the real headers: a sketch's glue
        (stubs / name).write_text("#pragma once\n" + text)  # is one translation unit
    return lib


def object_commands(lib: Path, out: Path, cc: str, cxx: str, flags: list[str]) -> list[list[str]]:
    """src/ and every example's two translation units (and its .ino) to objects in out, with
    only src/ (and the stub cores, for the glue) on the include path."""
    out.mkdir()
    src = lib / "src"
    cmds = [[cc, *C_FLAGS, *flags, f"-I{src}", "-c", str(f), "-o",
             str(out / (f.relative_to(src).as_posix().replace("/", "_") + ".o"))]
            for f in sorted(src.rglob("*.c"))]
    stubs = [f"-I{lib.parent / 'stubs'}", f"-I{src}"]
    for example in EXAMPLES:
        folder = lib / "examples" / example
        cmds.append([cc, *C_FLAGS, *flags, f"-I{src}", "-c", str(folder / "tinyprop_app.c"),
                     "-o", str(out / f"{example}_app.o")])
        for board, define in (("nano33ble", "-DARDUINO_ARCH_MBED"), ("esp32", "-DESP32")):
            if board == "esp32" and cc != "gcc":
                continue  # the Arm compiler builds the Nano's glue only
            cmds.append([cxx, *CXX_FLAGS, *flags, define, *stubs, "-c",
                         str(folder / "tinyprop_board.cpp"),
                         "-o", str(out / f"{example}_board_{board}.o")])
        cmds.append([cxx, *CXX_FLAGS, *flags, *stubs, "-x", "c++", "-c",
                     str(folder / f"{example}.ino"), "-o", str(out / f"{example}_ino.o")])
    return cmds


@pytest.fixture(scope="module")
def host_objects(sketches) -> Path:
    out = sketches.parent / "host"
    compile_all(object_commands(sketches, out, "gcc", "g++", ["-O1"]))
    return out


def link_host(sketches: Path, objects: Path, example: str) -> Path:
    """The example's application and src/ linked with the host board (boards/host)."""
    exe = objects / f"{example}-host"
    board = [REPO_ROOT / "boards" / "host" / "board.c",
             REPO_ROOT / "boards" / "common" / "vcamera.c"]
    library = sorted(objects.glob("*.c.o"))
    subprocess.run(["gcc", *C_FLAGS, "-O1", f"-I{sketches / 'src'}",
                    f"-I{REPO_ROOT / 'boards' / 'common'}", "-DTP_BOARD_NAME=\"host\"",
                    f"-DAPP_ENTRY={APP_ENTRIES[example]}", *map(str, board),
                    str(objects / f"{example}_app.o"), *map(str, library), "-lm", "-o", str(exe)],
                   check=True, timeout=120)
    return exe


def test_arduino_examples_build_for_the_host_and_self_training_runs(sketches, host_objects,
                                                                    tmp_path):
    """Every example's application and glue compile from the package alone; the SelfTrain
    example, linked with the host board, prints the reference's lines, bit for bit."""
    for example in EXAMPLES:
        assert (host_objects / f"{example}_board_nano33ble.o").is_file()
        assert (host_objects / f"{example}_board_esp32.o").is_file()
        link_host(sketches, host_objects, example)
    exe = link_host(sketches, host_objects, "SelfTrain")
    run = subprocess.run([str(exe)], stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
                         check=False, cwd=tmp_path)
    model = load_ir_model()
    lines = run.stdout.decode().splitlines()
    expected = expected_lines(model.program, model.blob,
                              {**RUN, "inputs": model.inputs, "labels": model.labels.tolist()},
                              "host")
    assert lines == expected and run.returncode == 0


def test_arduino_device_loop_example_binds_its_model_on_the_host(sketches, host_objects,
                                                                 tmp_path):
    """The DeviceLoop example, built from the package with its model.h, answers HELLO with
    the model's blob id and the arena the header sized."""
    exe = link_host(sketches, host_objects, "DeviceLoop")
    model = load_ir_model()
    with start_host_board(exe, tmp_path) as run, \
            Link(PipeTransport(run.proc, "DeviceLoop on the host board")) as link:
        ready = Device(link).hello()
    assert ready.blob_id == blob_id(model.blob)
    header = (sketches / "examples" / "DeviceLoop" / "model.h").read_text()
    assert ready.arena_bytes == int(re.search(r"TP_MODEL_ARENA_BYTES (\d+)u", header).group(1))


def defined_symbols(nm: str, obj: Path) -> set[str]:
    out = subprocess.run([nm, "--defined-only", str(obj)], check=True, capture_output=True,
                         text=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


@pytest.mark.skipif(shutil.which("arm-none-eabi-g++") is None, reason="needs arm-none-eabi-g++")
def test_arduino_library_compiles_for_the_nano33ble_flags(sketches, host_objects):
    """src/ and every example (application, Nano glue, .ino) to Cortex-M4 objects with the
    flags PlatformIO's nordicnrf52 gives the Nano 33 BLE. The DSP kernels build there and not
    on the host (their __ARM_FEATURE_DSP): one library for both."""
    out = sketches.parent / "nano33ble"
    compile_all(object_commands(sketches, out, "arm-none-eabi-gcc", "arm-none-eabi-g++",
                                NANO_FLAGS))
    dsp = "kernels_arm_tp_conv_arm.c.o"
    assert "tp_arm_conv2d_s8" in defined_symbols("arm-none-eabi-nm", out / dsp)
    assert "tp_arm_conv2d_s8" not in defined_symbols("nm", host_objects / dsp)
    # GNU C contracts a * b + c into one rounding; the float paths stay NumPy's without the
    # flag, and the loss (softmax cross-entropy) would be fused without tinyprop.h's pragma
    objects = sorted(str(o) for o in out.glob("*.o"))
    code = subprocess.run(["arm-none-eabi-objdump", "-d", *objects], capture_output=True,
                          text=True, check=True).stdout
    assert not FUSED.search(code)
    loss = sketches.parent / "loss_without_pragma.c"
    loss.write_text(subprocess.run(["arm-none-eabi-gcc", *C_FLAGS, *NANO_FLAGS, "-E", "-P",
                                    f"-I{sketches / 'src'}", str(sketches / "src" / "tp_loss.c")],
                                   capture_output=True, text=True, check=True).stdout
                    .replace("#pragma GCC optimize", "// "))
    subprocess.run(["arm-none-eabi-gcc", *C_FLAGS, *NANO_FLAGS, "-c", str(loss), "-o",
                    str(loss.with_suffix(".o"))], check=True)
    assert FUSED.search(subprocess.run(["arm-none-eabi-objdump", "-d", str(loss.with_suffix(".o"))],
                                       capture_output=True, text=True, check=True).stdout)
