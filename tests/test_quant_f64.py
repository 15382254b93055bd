"""FULLY_CONNECTED's double requantization without floating point (tp_f64 in
firmware/core/tp_quant.c): the integer binary64 equals the machine's double, bit for bit, on
millions of scales and accumulators (tests/c/test_quant_f64.c, under ASan and UBSan), and no
Cortex-M4 build links a soft-double helper."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from tinyprop.device.firmware import CORE_BUILD, build_lock, build_program
from tinyprop.paths import REPO_ROOT as REPO

DRIVER = REPO / "tests" / "c" / "test_quant_f64.c"


@pytest.mark.parametrize("seed", [1, 2])
def test_integer_binary64_equals_the_double_computation(seed):
    exe = build_program(DRIVER, sanitize=True)
    out = subprocess.run([str(exe), "300000", str(seed)], capture_output=True, text=True,
                         check=False)
    assert out.returncode == 0 and out.stdout.startswith("ok "), out.stdout + out.stderr
    assert int(out.stdout.split()[1]) > 1_500_000


@pytest.mark.skipif(shutil.which("arm-none-eabi-nm") is None, reason="needs arm-none-eabi-gcc")
def test_the_m4_core_links_no_soft_double():
    """The M4F has a single-precision FPU: a double operation would be a libgcc call."""
    with build_lock(CORE_BUILD):  # as tinyprop's builds of the core: other test workers build there
        subprocess.run(["make", "-s", "-C", str(REPO / "firmware"), f"BUILD={CORE_BUILD}", "arm"],
                       check=True, capture_output=True)
    out = subprocess.run(["arm-none-eabi-nm", "-u", str(CORE_BUILD / "arm" / "libtinyprop.a")],
                         capture_output=True, text=True, check=True).stdout
    doubles = sorted({s for s in out.split() if s.startswith(("__aeabi_d", "__aeabi_f2d",
                                                             "__aeabi_l2d", "__aeabi_i2d",
                                                             "__aeabi_ui2d", "__aeabi_ul2d"))})
    assert not doubles, f"soft double helpers referenced: {doubles}"
