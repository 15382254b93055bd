"""Only what pyproject.toml cannot say: an installed tinyprop builds C (the host engine, the
emulated boards' firmware, PlatformIO's board builds), so the wheel carries the sources it builds
from as package data, in tinyprop/_native/ laid out as the repository (tinyprop.paths.REPO_ROOT
of an installed package). MANIFEST.in puts the same files in the sdist, and names the package's
data files (setuptools includes those it lists)."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
# What board builds, `tinyprop flash` and `pio device monitor` need: the portable core and the
# applications, every board folder, the PlatformIO project and its monitor filter.
NATIVE = ("firmware", "boards", "platformio.ini", "monitor/filter_tinyprop.py")
NOT_SOURCES = shutil.ignore_patterns("__pycache__", "*.pyc", ".pio", "*.o", "*.d")


class BuildPyWithNative(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install builds from the checkout
            return
        dest = Path(self.build_lib) / "tinyprop" / "_native"
        shutil.rmtree(dest, ignore_errors=True)
        for name in NATIVE:
            source, target = ROOT / name, dest / name
            if source.is_dir():
                shutil.copytree(source, target, ignore=NOT_SOURCES)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)


setup(cmdclass={"build_py": BuildPyWithNative})
