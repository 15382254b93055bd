"""The repository's C and C++ files follow the root's .clang-format (make -C firmware format-check).

Also checked: clang-format takes the configuration (every key known to it, and the root's file
the one it finds for a source). scripts/setup.sh installs clang-format; the generated
tp_blob_layout.h opts out (its generator lays it out).
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from tinyprop.paths import REPO_ROOT as REPO

needs_clang_format = pytest.mark.skipif(
    shutil.which("clang-format") is None,
    reason="needs clang-format (apt-get install clang-format)")


@needs_clang_format
def test_clang_format_takes_the_configuration():
    source = REPO / "firmware" / "core" / "tp_train.c"
    r = subprocess.run(["clang-format", "--dump-config", str(source)], capture_output=True,
                       text=True)
    assert r.returncode == 0, f".clang-format: {r.stderr.strip()}"
    found = dict(re.findall(r"^(\w+):\s+(\S+)$", r.stdout, re.M))
    assert (found["IndentWidth"], found["ColumnLimit"], found["BreakBeforeBraces"]) == (
        "4", "100", "Linux"), "clang-format did not take the root's .clang-format for firmware/"


@needs_clang_format
def test_c_sources_are_formatted():
    r = subprocess.run(["make", "-s", "-C", str(REPO / "firmware"), "format-check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, (
        "C sources differ from .clang-format (make -C firmware format rewrites them):\n"
        + r.stderr[-4000:])
