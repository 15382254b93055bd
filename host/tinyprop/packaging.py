"""The C library packaged for the board users' own tools, assembled from the repository's files
(tinyprop.paths.REPO_ROOT, so an installed tinyprop packages what it carries):

- arduino: a library of Arduino's Library Specification 1.5. src/ is firmware/sources.mk's
  library, firmware/include/ and firmware/core/ merged into src/ (the two folders the make
  builds put on the include path; Arduino puts only src/ there), core's subfolders kept, so no
  #include is rewritten. Arduino compiles src/ once for every sketch, with no per-sketch
  defines: the parts a sketch configures (the application with its compiled-in model, the
  board glue) are copied into each example, mirroring the repository's paths, and compiled by
  the sketch's tinyprop_app.c and tinyprop_board.cpp (firmware/packages/arduino/sketch/).
- esp-idf: an ESP-IDF component, firmware/ as it is (library and device loop) with the ESP-IDF
  board (boards/esp-idf/), its CMakeLists.txt listing sources.mk's sources, and an example
  project (firmware/packages/esp-idf/examples/).
- platformio: what `pio pkg pack firmware` publishes (firmware/ filtered by library.json's
  export rules) and the Arduino examples, listed in the package's library.json.

firmware/library.json holds the facts every manifest repeats (name, version, description,
authors, URL, license).
"""

from __future__ import annotations

import json
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .errors import TinypropError
from .paths import REPO_ROOT

FIRMWARE = REPO_ROOT / "firmware"
TEMPLATES = FIRMWARE / "packages"
KINDS = ("arduino", "esp-idf", "platformio")
# the file a folder written by `tinyprop package KIND` has at its top: --force replaces only such
MANIFESTS = {"arduino": "library.properties", "esp-idf": "idf_component.yml",
             "platformio": "library.json"}

# Arduino: the boards the examples run on (library.properties' architectures: the Nano 33 BLE's
# mbed core, Arduino-ESP32) and their glue; each example's application (repository paths).
ARDUINO_ARCHITECTURES = ("mbed_nano", "esp32")
ARDUINO_GLUE = ("boards/arduino/tp_arduino.h", "boards/arduino/tp_arduino.cpp",
                "boards/nano33ble/board.cpp", "boards/esp32/board.cpp",
                "boards/esp-idf/tp_esp_heap.h")
ARDUINO_CAMERA_GLUE = ("boards/nano33ble/camera.cpp", "boards/esp32/camera.cpp")
ARDUINO_EXAMPLES = {
    "DeviceLoop": ("firmware/apps/device/tp_device.c",),
    "CameraLearn": ("firmware/apps/learn/learn.c", *ARDUINO_CAMERA_GLUE),
    "SelfTrain": ("firmware/apps/selftrain/selftrain.c",),
}
# the library the camera example needs on the Nano 33 BLE Sense (Arduino-ESP32 has its camera)
ARDUINO_DEPENDS = ("Arduino_OV767X",)
ARDUINO_CATEGORY = "Data Processing"

# ESP-IDF: the device loop and the board the component adds to sources.mk's library
IDF_EXTRA_SOURCES = ("firmware/apps/device/tp_device.c", "boards/esp-idf/board.c")
IDF_BOARD = "boards/esp-idf"
IDF_VERSION = ">=5.3"  # the UART driver as a component of its own (esp_driver_uart)
IDF_REQUIRES = ("esp_driver_uart", "esp_timer", "esp_partition")


@dataclass(frozen=True)
class Package:
    kind: str
    folder: Path
    files: int  # every file written
    sources: int  # the C and C++ sources among them
    zip_path: Path | None


def library_manifest() -> dict:
    """firmware/library.json: the facts the other manifests repeat."""
    return json.loads((FIRMWARE / "library.json").read_text())


def library_sources() -> list[str]:
    """sources.mk's library sources (make print-sources), relative to firmware/."""
    from .device.firmware import core_sources

    return sorted(p.resolve().relative_to(FIRMWARE.resolve()).as_posix()
                  for p in core_sources())


def library_headers() -> list[str]:
    """The headers of firmware/include/ and firmware/core/, relative to firmware/."""
    return sorted(p.relative_to(FIRMWARE).as_posix()
                  for folder in ("include", "core") for p in (FIRMWARE / folder).rglob("*.h"))


def arduino_src_path(firmware_path: str) -> str:
    """Where a file of the library (relative to firmware/) goes in the Arduino library: include/
    and core/ merged into src/, proto/ under it."""
    first, _, rest = firmware_path.partition("/")
    return f"src/{rest}" if first in ("include", "core") else f"src/{firmware_path}"


def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)




def _arduino_properties(lib: dict) -> str:
    sentence, _, paragraph = lib["description"].partition(": ")
    names = [a["name"] for a in lib["authors"]]
    maintainer = next(a["name"] for a in lib["authors"] if a.get("maintainer"))
    fields = {
        "name": lib["name"],
        "version": lib["version"],
        "author": ", ".join(names),
        "maintainer": maintainer,
        "sentence": sentence + ".",
        "paragraph": paragraph[:1].upper() + paragraph[1:],
        "category": ARDUINO_CATEGORY,
        "url": lib["homepage"],
        "architectures": ",".join(ARDUINO_ARCHITECTURES),
        "depends": ",".join(ARDUINO_DEPENDS),
        "includes": "tinyprop.h",
    }
    return "".join(f"{key}={value}\n" for key, value in fields.items())


def _write_arduino(out: Path) -> None:
    lib = library_manifest()
    (out / "library.properties").write_text(_arduino_properties(lib))
    files = library_sources() + library_headers()
    targets = [arduino_src_path(f) for f in files]
    clash = sorted({t for t in targets if targets.count(t) > 1})
    if clash:  # include/ and core/ merged: a name in both would be one file
        raise TinypropError(f"firmware/include and firmware/core both have {clash[0]}: the "
                            "Arduino library merges them into src/; rename one")
    for name, target in zip(files, targets, strict=True):
        _copy(FIRMWARE / name, out / target)
    _write_arduino_examples(out)


def _write_arduino_examples(out: Path) -> None:
    """examples/<Name>/: each Arduino example with its application and board glue (the
    Arduino library's and the PlatformIO package's)."""
    sketch = TEMPLATES / "arduino" / "sketch"
    for example, own in ARDUINO_EXAMPLES.items():
        folder = out / "examples" / example
        shutil.copytree(TEMPLATES / "arduino" / "examples" / example, folder, dirs_exist_ok=True)
        shutil.copytree(sketch, folder, dirs_exist_ok=True)
        for name in (*ARDUINO_GLUE, *own):
            _copy(REPO_ROOT / name, folder / name)


def _idf_component_yml(lib: dict) -> str:
    # JSON strings are YAML scalars
    fields = {"version": lib["version"], "description": lib["description"],
              "url": lib["homepage"], "license": lib["license"]}
    lines = [f"{key}: {json.dumps(value)}" for key, value in fields.items()]
    return "\n".join([*lines, "dependencies:", f"  idf: {json.dumps(IDF_VERSION)}", ""])


def _idf_cmakelists(sources: list[str]) -> str:
    listed = "\n".join(f'        "{s}"' for s in sources)
    return (
        "# The tinyprop library (firmware/sources.mk's sources), the device loop and the\n"
        "# ESP-IDF board, written by `tinyprop package esp-idf`. The device loop takes its arena\n"
        "# and params record from the heap (TP_DEVICE_BOARD_BUFFERS: app_main() allocates\n"
        "# them); floats unfused, as on every tinyprop board, so a step equals the host's.\n"
        "idf_component_register(\n"
        f"    SRCS\n{listed}\n"
        f'    INCLUDE_DIRS "include" "{IDF_BOARD}"\n'
        '    PRIV_INCLUDE_DIRS "core"\n'
        f"    PRIV_REQUIRES {' '.join(IDF_REQUIRES)})\n"
        "target_compile_definitions(${COMPONENT_LIB} PUBLIC TP_DEVICE_BOARD_BUFFERS)\n"
        "target_compile_options(${COMPONENT_LIB} PRIVATE -ffp-contract=off)\n"
    )


def _write_esp_idf(out: Path) -> None:
    lib = library_manifest()
    library = library_sources() + library_headers()
    for name in library:
        _copy(FIRMWARE / name, out / name)
    extras = [*IDF_EXTRA_SOURCES, *(f"{IDF_BOARD}/{p.name}"
                                   for p in sorted((REPO_ROOT / IDF_BOARD).glob("*.h")))]
    for name in extras:
        _copy(REPO_ROOT / name, out / name.removeprefix("firmware/"))
    sources = [*library_sources(), *(s.removeprefix("firmware/") for s in IDF_EXTRA_SOURCES)]
    (out / "CMakeLists.txt").write_text(_idf_cmakelists(sources))
    (out / "idf_component.yml").write_text(_idf_component_yml(lib))
    shutil.copytree(TEMPLATES / "esp-idf" / "examples", out / "examples", dirs_exist_ok=True)


def platformio_files() -> list[str]:
    """What `pio pkg pack` publishes of firmware/: library.json's export.include (files, or
    folders with everything under them), relative to firmware/."""
    found = set()
    for entry in library_manifest()["export"]["include"]:
        path = FIRMWARE / entry
        found.update([path] if path.is_file() else (p for p in path.rglob("*") if p.is_file()))
    return sorted(p.relative_to(FIRMWARE).as_posix() for p in found
                  if "__pycache__" not in p.parts)


def _write_platformio(out: Path) -> None:
    """library.json's export, plus the Arduino examples (their board glue lives outside
    firmware/, so `pio pkg pack firmware` alone would publish none), which the manifest lists
    for the registry."""
    for name in platformio_files():
        _copy(FIRMWARE / name, out / name)
    _write_arduino_examples(out)
    lib = library_manifest()
    lib["examples"] = [
        {"name": example, "base": f"examples/{example}",
         "files": sorted(p.relative_to(out / "examples" / example).as_posix()
                         for p in (out / "examples" / example).rglob("*") if p.is_file())}
        for example in ARDUINO_EXAMPLES]
    (out / "library.json").write_text(json.dumps(lib, indent=2) + "\n")


WRITERS = {"arduino": _write_arduino, "esp-idf": _write_esp_idf,
           "platformio": _write_platformio}


def _prepare(kind: str, out: Path, force: bool) -> None:
    """An empty folder at out: a new one, an empty one, or (force) a package folder of this
    kind emptied; anything else is refused, never deleted."""
    if out.is_file() or out.is_symlink():
        raise TinypropError(f"-o {out}: is a file; name a folder for the package")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise TinypropError(f"-o {out}: the folder exists and is not empty; pass --force to "
                                "replace a package written there, or name a new folder")
        if not (out / MANIFESTS[kind]).is_file():
            raise TinypropError(f"-o {out}: --force replaces only a folder `tinyprop package "
                                f"{kind}` wrote (with {MANIFESTS[kind]}); this one has none, so "
                                "it is left alone: name a new folder")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)


def write_zip(folder: Path, top: str) -> Path:
    """folder as folder.zip with one top folder, `top` (Arduino's "Add .ZIP Library" installs
    the library under that name)."""
    zip_path = folder.with_name(folder.name + ".zip")
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            z.write(path, f"{top}/{path.relative_to(folder).as_posix()}")
    return zip_path


def assemble(kind: str, out: Path, zip_it: bool = False, force: bool = False) -> Package:
    """The `kind` package in the folder out (and out.zip with zip_it)."""
    if kind not in KINDS:
        raise TinypropError(f"unknown kind '{kind}'; use one of {', '.join(KINDS)}")
    _prepare(kind, out, force)
    WRITERS[kind](out)
    written = [p for p in out.rglob("*") if p.is_file()]
    sources = sum(p.suffix in (".c", ".cpp") for p in written)
    zip_path = write_zip(out, library_manifest()["name"]) if zip_it else None
    return Package(kind, out, len(written), sources, zip_path)
