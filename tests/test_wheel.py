"""A real package: a wheel built from the sdist (what `python -m build` does), installed into a
fresh venv and run from another folder, converts, trains on `host` and `qemu-m4`, evaluates,
replays a run, carries the PlatformIO project `tinyprop flash` builds and packages the Arduino
library; everything it builds goes into the cache, nothing into site-packages. Missing tools are
one-line errors there too.

The fresh venv gets only the dependencies (NumPy, TensorFlow, ...) from this one through a .pth
file, so nothing is downloaded; tinyprop itself comes from the wheel (checked)."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from tinyprop.data import assets

pytestmark = pytest.mark.slow

CHECKOUT = Path(__file__).resolve().parents[1]
SOURCE_TREE = CHECKOUT / "host"  # the package in the checkout: never what the wheel test runs
# what a fresh checkout gives the sdist (MANIFEST.in picks from it)
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "host", "firmware",
           "boards", "platformio.ini", "monitor")
DEPENDENCIES = ("numpy", "tflite", "flatbuffers", "serial", "rich", "textual", "matplotlib",
                "PIL", "tensorflow", "keras", "platformio")


def run(argv: list, cwd: Path, env: dict, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)
    if check and proc.returncode != 0:
        raise AssertionError(f"{argv} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        if (CHECKOUT / name).is_dir():
            shutil.copytree(CHECKOUT / name, src / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(CHECKOUT / name, src / name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TINYPROP_BUILD")}
    sdist = run([sys.executable, "-c", "import sys; from setuptools import build_meta; "
                 "print(build_meta.build_sdist(sys.argv[1]))", tmp / "dist"], src, env)
    with tarfile.open(tmp / "dist" / sdist.stdout.split()[-1]) as tar:
        tar.extractall(tmp / "sdist", filter="data")
    (unpacked,) = (tmp / "sdist").iterdir()
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
         tmp / "dist", unpacked], tmp, env)
    (wheel,) = (tmp / "dist").glob("tinyprop-*.whl")
    venv = tmp / "venv"
    run([sys._base_executable, "-m", "venv", "--without-pip", venv], tmp, env)
    python = venv / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps",
         "--no-index", wheel], tmp, env)
    site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                    tmp, env).stdout.strip())
    deps = sorted({str(Path(importlib.import_module(m).__file__).parents[1])
                   for m in DEPENDENCIES})
    # the checkout's own venv may lend its dependencies (CI's lives inside the checkout), never
    # the checkout's sources
    assert not [d for d in deps if Path(d).is_relative_to(SOURCE_TREE)]
    (site / "zz_dependencies.pth").write_text("".join(f"{d}\n" for d in deps))
    work = tmp / "work"
    work.mkdir()
    env.update(TINYPROP_CACHE=str(tmp / "cache"), PATH=f"{venv / 'bin'}:{env['PATH']}")
    env.pop("VIRTUAL_ENV", None)
    files = sorted(p for p in (site / "tinyprop").rglob("*") if "__pycache__" not in p.parts)
    return {"tmp": tmp, "wheel": wheel, "python": python, "site": site, "work": work,
            "env": env, "files": files}


def test_the_wheel_carries_the_sources_it_builds(installed):
    import zipfile

    names = zipfile.ZipFile(installed["wheel"]).namelist()
    native = {n.removeprefix("tinyprop/_native/") for n in names
              if n.startswith("tinyprop/_native/")}
    tracked = subprocess.run(["git", "ls-files", "firmware", "boards", "platformio.ini",
                              "monitor/filter_tinyprop.py"], cwd=CHECKOUT, capture_output=True,
                             text=True, check=True).stdout.split()
    assert native == set(tracked)
    assert "tinyprop/data/vww_mini.csv" in names


def test_it_runs_from_the_wheel_not_the_checkout(installed):
    probe = run([installed["python"], "-c", "import json, sys, tinyprop, tinyprop.paths as p; "
                 "print(json.dumps([tinyprop.__file__, p.IN_CHECKOUT, str(p.REPO_ROOT), "
                 "str(p.BUILD_ROOT), sys.path]))"], installed["work"], installed["env"])
    module, in_checkout, root, build, path = json.loads(probe.stdout)
    assert Path(module).is_relative_to(installed["site"]) and not in_checkout
    assert Path(root) == installed["site"] / "tinyprop" / "_native"
    assert Path(build).is_relative_to(installed["tmp"] / "cache" / "build")
    assert Path(build).name.startswith("0.1.0-")
    assert not [p for p in path if p and Path(p).resolve().is_relative_to(SOURCE_TREE)]


def test_convert_train_eval_monitor_and_the_platformio_project(installed, vww_model_path,
                                                               vww_data_dir):
    work, env, python = installed["work"], installed["env"], installed["python"]
    tinyprop = installed["python"].parent / "tinyprop"
    run([tinyprop, "convert", vww_model_path, "-o", "m.tpb", "--scheme", "last:2"], work, env)
    host = run([tinyprop, "train", "m.tpb", "--data", vww_data_dir, "--board", "host",
                "--steps", "5", "--plain", "--log", "run.jsonl", "--out", "tuned.tflite"],
               work, env)
    assert "summary steps 5 " in host.stdout and "wrote tuned.tflite" in host.stdout
    scores = json.loads(run([tinyprop, "eval", "tuned.tflite", "--data", vww_data_dir,
                             "--json"], work, env).stdout)
    assert scores["n"] == 121 and 0.5 < scores["accuracy"] < 1
    qemu = run([tinyprop, "train", "m.tpb", "--data", vww_data_dir, "--board", "qemu-m4",
                "--steps", "2", "--plain"], work, env)
    assert "start board qemu-m4" in qemu.stdout and "summary steps 2 " in qemu.stdout
    replay = run([tinyprop, "monitor", "run.jsonl", "--plain"], work, env)
    assert replay.stdout.count("step") >= 5
    # the PlatformIO project `tinyprop flash --build-only` builds: pio parses it, its library
    # and filter are there, and its workspace and the blob header go to the cache
    (work / "bin").mkdir()
    (work / "bin" / "pio").write_text(f"#!/bin/sh\nexec {python} -m platformio \"$@\"\n")
    (work / "bin" / "pio").chmod(0o755)
    # its platform taken as installed (offline, flash refuses a build PlatformIO cannot start)
    (work / "pio-core" / "platforms" / "nordicnrf52").mkdir(parents=True)
    pio_env = {**env, "PATH": f"{work / 'bin'}:{env['PATH']}",
               "PLATFORMIO_CORE_DIR": str(work / "pio-core")}
    out = run([python, "-c", "import json; from pathlib import Path; from tinyprop.device.flash "
               "import flash_job; from tinyprop.device.profiles import load_profile; j = "
               "flash_job(load_profile('nano33ble'), blob=Path('m.tpb'), build_only=True); "
               "print(json.dumps([j.command, j.env['PLATFORMIO_WORKSPACE_DIR'], "
               "j.env['PLATFORMIO_BUILD_FLAGS']]))"], work, pio_env)
    command, workspace, flags = json.loads(out.stdout)
    root = installed["site"] / "tinyprop" / "_native"
    assert command[1:] == ["run", "-d", str(root), "-e", "nano33ble"]
    build = installed["tmp"] / "cache" / "build"
    assert Path(workspace).is_relative_to(build) and str(build) in flags
    config = run(["pio", "project", "config", "-d", root, "--json-output"], work,
                 {**pio_env, "PLATFORMIO_WORKSPACE_DIR": workspace})
    envs = dict(json.loads(config.stdout))
    nano = dict(envs["env:nano33ble"])
    assert nano["lib_deps"] == ["tinyprop=symlink://firmware"]
    assert (root / "firmware" / "library.json").is_file()
    assert (root / "monitor" / "filter_tinyprop.py").is_file()
    assert (root / "boards" / "nano33ble" / "board.cpp").is_file()
    # nothing was written into the installed package (Python's own __pycache__ aside)
    after = sorted(p for p in (installed["site"] / "tinyprop").rglob("*")
                   if "__pycache__" not in p.parts)
    assert after == installed["files"]


def test_the_arduino_library_from_the_wheel(installed, tmp_path):
    """`tinyprop package` packages the sources the wheel carries: the files it writes are the
    ones a checkout writes."""
    from tinyprop.packaging import assemble

    run([installed["python"].parent / "tinyprop", "package", "arduino", "-o", "lib"],
        installed["work"], installed["env"])
    assemble("arduino", tmp_path / "lib")
    listed = [sorted(p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file())
              for d in (installed["work"] / "lib", tmp_path / "lib")]
    assert listed[0] == listed[1]


def test_missing_tools_are_one_line_from_the_wheel(installed, tmp_path, vww_data_dir):
    work, env = installed["work"], installed["env"]
    tinyprop = installed["python"].parent / "tinyprop"
    if not (work / "m.tpb").exists():
        run([tinyprop, "convert", assets.resolve_model(), "-o", "m.tpb", "--scheme", "last:2"],
            work, env)
    for missing, expect in (
        ("arm-none-eabi-gcc", "building for qemu-m4 needs arm-none-eabi-gcc, which is not "
         "installed; run `sudo apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi`"),
        ("qemu-system-arm", "running the qemu-m4 board needs qemu-system-arm, which is not "
         "installed; run `sudo apt-get install qemu-system-arm`"),
    ):
        bin_dir = tmp_path / f"no-{missing}"
        bin_dir.mkdir()
        for d in env["PATH"].split(":"):  # every program on PATH but the one
            for p in Path(d).glob("*") if Path(d).is_dir() else ():
                if p.name != missing and not (bin_dir / p.name).exists():
                    (bin_dir / p.name).symlink_to(p)
        proc = run([tinyprop, "train", "m.tpb", "--data", vww_data_dir, "--board", "qemu-m4",
                    "--steps", "1", "--plain"], work, {**env, "PATH": str(bin_dir)}, check=False)
        assert proc.returncode == 2
        assert proc.stderr.strip().splitlines() == [f"tinyprop train: error: {expect}"]
