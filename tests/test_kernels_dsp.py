"""The Cortex-M DSP kernels (firmware/core/kernels/arm/) equal the reference kernels bit for bit.

- Op level, on qemu-m4: opgen's random CONV_2D, DEPTHWISE_CONV_2D and AVERAGE_POOL_2D cases
  (shapes, strides, paddings, zero points, depth multipliers, activations, per-channel shifts of
  both signs) and corner cases (maps wider and taller than a depthwise strip and band, depthwise
  rows of every length modulo 4 and channel counts beyond and below its four planes, 1x1 with
  stride 2, the 3x3 convolution over three channels (the first conv's kernel) with windows across
  every border, odd pixel and channel counts, every remainder of the 1x1 kernel's tiles, channels
  whose weights are all zero (VWW's pruned channels: constant outputs, among live ones or all of
  them), input channels no live row uses (VWW's later pointwise convolutions: the 1x1 tiles then
  run over the used ones alone), accumulators too wide for the fast requantization, left shifts),
  each run in one harness process with the reference and the DSP kernels and both outputs compared
  with the NumPy reference. The same cases on this machine with the intrinsics emulated in C, under
  ASan and UBSan, with every arena exactly the size the blob asks (a kernel stepping outside its
  planned scratch is caught).
- Whole models, on qemu-m4: the 26 generated models, and VWW over all 397 vww-mini images.
- Gradients, op level: small graphs around a 3x3 DEPTHWISE_CONV_2D (every stride pair, SAME and
  VALID padding, maps wider than the DSP kernel's planes or than its weight-gradient planes,
  weight scales whose folds can fall halfway or saturate, an op whose output gradient is all
  zero, a depth multiplier), int16 and int8 maps, each blob without a scratch plan and planned
  for the Cortex-M4 (the forward's DSP kernels and their scratch in the training arena, as
  `tinyprop convert` packs it): training steps with the DSP kernels leave the params region
  (parameters and padding alike) the reference kernels and the NumPy trainer leave, on qemu-m4
  and emulated under the sanitizers, each run's memory filled with its own pattern first (a
  byte left over from an earlier case or run shows).
- The host's mirror of the kernels (tinyprop.compile.kernels): scratch sizes equal the C functions',
  and its prediction of which ops the DSP kernels take matches what the board does.
"""

from __future__ import annotations

import ctypes
import io
import shutil
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest
from opgen import _Builder, forward_case, random_input
from tinyprop.bench.kernels import (
    FLAG_OPT_ONLY,
    FLAG_OUTPUTS,
    FLAG_REF,
    FLAG_TRAIN,
    TRAIN_LR,
    TRAIN_SEED,
    Case,
    Run,
    read_records,
    run_cases,
    train_inputs,
    write_cases,
)
from tinyprop.compile.blob import inference_for, pack_blob
from tinyprop.compile.kernels import plan_scratch, scratch_bytes
from tinyprop.compile.scheme import LayerUpdate, SparseScheme
from tinyprop.compile.train_plan import build_program as build_train_program
from tinyprop.device.firmware import build_program
from tinyprop.engines.native import load_library
from tinyprop.frontend.graph import Graph
from tinyprop.frontend.opparams import op_params
from tinyprop.paths import REPO_ROOT as REPO
from tinyprop.reference.backward import ReferenceTrainer
from tinyprop.reference.forward import Forward

needs_qemu = pytest.mark.skipif(
    shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
    reason="needs qemu-system-arm and arm-none-eabi-gcc (scripts/setup.sh installs them)")

# The harness built as debug builds and LLVM toolchains build the library (slow): everything at
# -O0, and the DSP kernels compiled by clang (linked by GCC's toolchain; -fshort-enums: the
# arm-none-eabi ABI's enums, as GCC lays them out). Both take tp_conv_input_grad_arm's C loop
# where the -O2 GCC build runs its asm.
ARM_NEWLIB_INCLUDE = Path("/usr/lib/arm-none-eabi/include")
VARIANTS = {"gcc -O2": None, "gcc -O0": {"VARIANT": "O0", "OPT": "-O0"},
            "clang kernels": {"VARIANT": "clang-kernels", "KERNELS_CC":
                              f"clang --target=arm-none-eabi -fshort-enums -isystem "
                              f"{ARM_NEWLIB_INCLUDE}"}}
needs_clang = pytest.mark.skipif(
    shutil.which("clang") is None or not ARM_NEWLIB_INCLUDE.is_dir(),
    reason=f"needs clang and arm-none-eabi's newlib headers in {ARM_NEWLIB_INCLUDE}")
BUILDS = ["gcc -O2", pytest.param("gcc -O0", marks=pytest.mark.slow),
          pytest.param("clang kernels", marks=[pytest.mark.slow, needs_clang])]

RANDOM = 60  # opgen cases per kind (each a few milliseconds on the board)
DRIVER = REPO / "tests" / "c" / "test_kernels_dsp.c"
FOLD_DRIVER = REPO / "tests" / "c" / "test_fold_dsp.c"
MBQM_DRIVER = REPO / "tests" / "c" / "test_mbqm_dsp.c"
FOLD_SUMMARY = "fold cases 2436, values 9977856, mismatches 0"
BIAS_DRIVER = REPO / "tests" / "c" / "test_bias_sums_dsp.c"
BIAS_SUMMARY = "bias sums 15405, mismatches 0"
ROWS_DRIVER = REPO / "tests" / "c" / "test_gm_rows.c"
ROWS_SUMMARY = "map rows, values 364256, mismatches 0"
SUMS_DRIVER = REPO / "tests" / "c" / "test_fold_sums.c"
SUMS_SUMMARY = "fold sums, maps 160, mismatches 0"
SUMS_SUMMARY_M4 = "fold sums and scans, maps 800, mismatches 0"  # 4 direct scans a map
UPDATE_DRIVER = REPO / "tests" / "c" / "test_update_rows.c"
UPDATE_SUMMARY = "update rows, weights 576000, mismatches 0"
MASK_DRIVER = REPO / "tests" / "c" / "test_relu_mask.c"
MASK_SUMMARY = "relu masks, values 34078200, mismatches 0"


def _conv_case(name: str, shape, kind: str, seed: int, tweak=None, **conv) -> tuple[str, Graph]:
    b = _Builder(np.random.default_rng(seed))
    x = b.act("x", (1, *shape))
    y = b.conv(x, kind, **conv)
    g = b.graph(x, y, name)
    if tweak is not None:
        tweak(g)
    return f"{name} {shape} {conv}", g


def _rows(g: Graph, c: int) -> np.ndarray:
    """Output channel c's weights, as a writable view."""
    op = g.ops[-1]
    w = g.tensors[op.inputs[1]].data
    return w[..., c] if op.kind == "DEPTHWISE_CONV_2D" else w[c]


def _dead_channels(g: Graph) -> None:
    """VWW's pruned channels: all-zero weights, biases of +-2^30 (a constant output)."""
    bias = g.tensors[g.ops[-1].inputs[2]].data
    for c, sign in ((0, 1), (2, -1)):
        _rows(g, c)[...] = 0
        bias[c] = sign * (1 << 30)


def _zero_rows_any_bias(g: Graph) -> None:
    """Half the channels with all-zero weights and biases of 2^30 and beyond (int32's extremes
    included), each one's weight scale set so that its bias requantizes into int8's range (some
    at a nominal half): each output a constant, computed by tp_dsp_prepare's 32-bit form (with
    _left_shift after it, the reference's for the channel it shifts left)."""
    op = g.ops[-1]
    bias = g.tensors[op.inputs[2]].data
    w = g.tensors[op.inputs[1]]
    s_in = float(g.tensors[op.inputs[0]].scale[0])
    s_out = float(g.tensors[op.outputs[0]].scale[0])
    w.scale = w.scale.copy()
    biases = [-(1 << 31), (1 << 31) - 1, -(1 << 30), 1 << 30]
    reals = [-100.5, 90.5, -0.5, 3.25, -57.75, 126.5, -2.5, 64.0]
    rng = np.random.default_rng(len(bias))
    for c in range(0, len(bias), 2):
        _rows(g, c)[...] = 0
        k = c // 2
        b = biases[k] if k < len(biases) else int(rng.integers(1 << 30, 1 << 31))
        v = reals[k % len(reals)]
        bias[c] = -abs(b) if v < 0 else min(abs(b), (1 << 31) - 1)  # the sign of v
        w.scale[c] = np.float32(v * s_out / (int(bias[c]) * s_in))


def _wide_bias(g: Graph) -> None:
    """An accumulator bound past 2^30: the DSP kernel must run the reference instead."""
    g.tensors[g.ops[-1].inputs[2]].data[1] = (1 << 30) - 5


def _left_shift(g: Graph) -> None:
    """A channel whose real scale exceeds 1 (a left shift) and one far below (a right shift
    10 more)."""
    w = g.tensors[g.ops[-1].inputs[1]]
    w.scale = w.scale.copy()
    w.scale[0] *= np.float32(64.0)
    w.scale[1] *= np.float32(2.0 ** -10)


def _right_shifts(g: Graph) -> None:
    """An output scale 256 times wider: every channel shifts right (with an activation of
    int8's whole range, the fast requantization)."""
    y = g.tensors[g.ops[-1].outputs[0]]
    y.scale = (y.scale * np.float32(256.0)).astype(np.float32)


def _pruned(live):
    """Every channel but `live` pruned as VWW's are (all-zero weights, a bias of +-2^30: a
    constant output), with right shifts: the DSP kernel groups the live channels by four,
    consecutive or not, a last group short of four."""
    def tweak(g: Graph) -> None:
        bias = g.tensors[g.ops[-1].inputs[2]].data
        for c in range(len(bias)):
            if c not in live:
                _rows(g, c)[...] = 0
                bias[c] = (1 << 30) if c % 2 else -(1 << 30)
        _right_shifts(g)
    return tweak


def _unused_inputs(live, used):
    """_pruned(live), and every input channel but `used` zero in every row: the pruned
    channels of the layer before, as VWW's later pointwise convolutions have them. When `used`
    is at most half the input channels the DSP kernel runs its tiles over those alone."""
    prune = _pruned(live)

    def tweak(g: Graph) -> None:
        prune(g)
        w = g.tensors[g.ops[-1].inputs[1]].data
        for c in range(w.shape[-1]):
            if c not in used:
                w[..., c] = 0
    return tweak


def corner_cases() -> list[tuple[str, Graph]]:
    c = []
    c.append(_conv_case("pw-s2", (20, 20, 12), "CONV_2D", 1, k=(1, 1), stride=(2, 2),
                        padding="VALID", cout=9))
    c.append(_conv_case("pw-odd", (7, 5, 9), "CONV_2D", 2, k=(1, 1), cout=5, act="RELU6"))
    c.append(_conv_case("im2col-big", (30, 70, 5), "CONV_2D", 3, k=(3, 3), cout=7,
                        stride=(1, 2)))
    c.append(_conv_case("im2col-valid", (17, 9, 3), "CONV_2D", 4, k=(5, 3), padding="VALID",
                        cout=8, stride=(2, 1), act="RELU"))
    c.append(_conv_case("dw-strips-bands", (40, 70, 3), "DEPTHWISE_CONV_2D", 5, mult=2))
    c.append(_conv_case("dw-s2-odd", (37, 65, 4), "DEPTHWISE_CONV_2D", 6, stride=(2, 2)))
    c.append(_conv_case("dw-s12", (19, 33, 6), "DEPTHWISE_CONV_2D", 7, stride=(1, 2),
                        act="RELU6"))
    c.append(_conv_case("dw-s21-valid", (19, 33, 6), "DEPTHWISE_CONV_2D", 8, stride=(2, 1),
                        padding="VALID", mult=3))
    # the 1x1 kernel's remainders: an odd last block (35 pixels), input channels past a
    # multiple of 4, output channels short of a group of four; VWW's first pointwise (8 input
    # channels) and a single quad of K (3), each with the fast requantization; pruned channels
    # (live ones in consecutive groups and scattered, a last group short of four; all of them
    # pruned), clamped or not
    c.append(_conv_case("pw-tails", (5, 7, 9), "CONV_2D", 12, k=(1, 1), cout=7, act="RELU6"))
    c.append(_conv_case("pw-cin8", (6, 6, 8), "CONV_2D", 13, _right_shifts, k=(1, 1), cout=16))
    c.append(_conv_case("pw-k3-odd", (3, 3, 3), "CONV_2D", 14, _right_shifts, k=(1, 1), cout=6))
    c.append(_conv_case("pw-pruned", (3, 5, 20), "CONV_2D", 15, _pruned([1, 2, 3, 4, 6, 11]),
                        k=(1, 1), cout=13))
    c.append(_conv_case("pw-pruned-relu6", (3, 5, 20), "CONV_2D", 16, _pruned([0, 5, 6, 12]),
                        k=(1, 1), cout=13, act="RELU6"))
    c.append(_conv_case("pw-pruned-all", (4, 5, 8), "CONV_2D", 17, _pruned([]), k=(1, 1),
                        cout=5))
    # input channels no live row uses: 13 of 40 (a last quad of one), live channels consecutive
    # and scattered; exactly half (16 of 32) and one more (17: the full K); clamped
    c.append(_conv_case("pw-unused", (5, 7, 40), "CONV_2D", 24,
                        _unused_inputs([0, 1, 2, 3, 5, 8, 9, 10, 11, 14],
                                       [1, 2, 3, 7, 9, 15, 16, 22, 30, 31, 33, 38, 39]),
                        k=(1, 1), cout=16))
    c.append(_conv_case("pw-unused-half", (4, 5, 32), "CONV_2D", 25,
                        _unused_inputs(range(8), range(0, 32, 2)), k=(1, 1), cout=8))
    c.append(_conv_case("pw-unused-17", (4, 5, 32), "CONV_2D", 26,
                        _unused_inputs(range(8), [*range(0, 32, 2), 5]), k=(1, 1), cout=8))
    c.append(_conv_case("pw-unused-relu6", (3, 3, 24), "CONV_2D", 27,
                        _unused_inputs([0, 2, 4, 6, 7], [0, 4, 5, 11, 12, 13, 20, 21, 23]),
                        k=(1, 1), cout=9, act="RELU6"))
    # depthwise rows of 4k + 1, 2, 3 outputs (a pass of four, then two, then a spare), both
    # strides, channel counts beyond and below the four planes gathered at once
    c.append(_conv_case("dw-rem1", (9, 9, 8), "DEPTHWISE_CONV_2D", 17))
    c.append(_conv_case("dw-rem2", (10, 10, 5), "DEPTHWISE_CONV_2D", 18, act="RELU6"))
    c.append(_conv_case("dw-rem3", (7, 7, 9), "DEPTHWISE_CONV_2D", 19, mult=2))
    c.append(_conv_case("dw-s2-rem3", (13, 13, 7), "DEPTHWISE_CONV_2D", 20, stride=(2, 2)))
    c.append(_conv_case("dw-s2-rem1", (10, 10, 12), "DEPTHWISE_CONV_2D", 21, stride=(2, 2),
                        act="RELU"))
    c.append(_conv_case("dw-s2-valid", (12, 14, 4), "DEPTHWISE_CONV_2D", 22, stride=(2, 2),
                        padding="VALID"))
    c.append(_conv_case("dw-narrow", (33, 3, 2), "DEPTHWISE_CONV_2D", 23, stride=(2, 2)))
    # the same remainders with every channel in the fast form (the band routines in assembly):
    # passes of four, two and a spare at both strides, several rows and bands, a multiplier
    c.append(_conv_case("dw-fast-s1", (21, 11, 6), "DEPTHWISE_CONV_2D", 28, _right_shifts,
                        mult=2))
    c.append(_conv_case("dw-fast-s2", (15, 13, 5), "DEPTHWISE_CONV_2D", 29, _right_shifts,
                        stride=(2, 2)))
    c.append(_conv_case("dw-fast-rem2", (9, 6, 8), "DEPTHWISE_CONV_2D", 30, _right_shifts))
    c.append(_conv_case("dw-fast-s2-rem1", (10, 9, 4), "DEPTHWISE_CONV_2D", 31, _right_shifts,
                        stride=(2, 2)))
    # rows of 4k + 2 at stride 1 end in a pass of six (10: a four first; 2: a pair alone), at
    # stride 2 in a pair (6)
    c.append(_conv_case("dw-fast-ten", (5, 10, 4), "DEPTHWISE_CONV_2D", 32, _right_shifts))
    c.append(_conv_case("dw-fast-two", (4, 2, 4), "DEPTHWISE_CONV_2D", 33, _right_shifts))
    c.append(_conv_case("dw-fast-s2-six", (11, 12, 4), "DEPTHWISE_CONV_2D", 34, _right_shifts,
                        stride=(2, 2)))
    # the 3x3 convolution over three channels (tp_conv3x3_rgb_arm.c): VWW's first conv, odd
    # pixel and channel counts, both paddings and strides, windows across every border
    c.append(_conv_case("rgb-vww", (24, 20, 3), "CONV_2D", 12, stride=(2, 2), cout=8))
    c.append(_conv_case("rgb-odd", (9, 7, 3), "CONV_2D", 13, cout=5, act="RELU6"))
    c.append(_conv_case("rgb-valid", (12, 11, 3), "CONV_2D", 14, padding="VALID", stride=(2, 1),
                        cout=3))
    c.append(_conv_case("rgb-s12", (16, 41, 3), "CONV_2D", 15, stride=(1, 2), cout=1,
                        act="RELU"))
    c.append(_conv_case("rgb-flat", (2, 9, 3), "CONV_2D", 16, cout=8))
    # the fast form with a group of four and one of two (an odd pixel count over several
    # batches of eight pairs), and with one of three
    c.append(_conv_case("rgb-fast-6", (19, 13, 3), "CONV_2D", 17, _right_shifts, cout=6))
    c.append(_conv_case("rgb-fast-7", (11, 9, 3), "CONV_2D", 18, _right_shifts, stride=(2, 2),
                        cout=7))
    for kind, shape in (("CONV_2D", (6, 6, 16)), ("DEPTHWISE_CONV_2D", (6, 6, 16)),
                        ("CONV_2D", (7, 5, 3))):
        tag = "dw" if kind == "DEPTHWISE_CONV_2D" else "pw" if shape[2] == 16 else "rgb"
        k = (1, 1) if tag == "pw" else (3, 3)
        c.append(_conv_case(f"{tag}-dead", shape, kind, 9, _dead_channels, k=k, cout=16))
        c.append(_conv_case(f"{tag}-wide", shape, kind, 10, _wide_bias, k=k, cout=16))
        c.append(_conv_case(f"{tag}-shifts", shape, kind, 11, _left_shift, k=k, cout=16))
        c.append(_conv_case(f"{tag}-zero-rows", shape, kind, 35, _zero_rows_any_bias, k=k,
                            cout=16))
        c.append(_conv_case(f"{tag}-zero-rows-left", shape, kind, 36,
                            lambda g: (_zero_rows_any_bias(g), _left_shift(g)), k=k, cout=16))
    return c


def all_cases() -> list[tuple[str, Graph]]:
    cases = [(f.name, f.graph) for kind in ("CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D")
             for f in (forward_case(kind, s) for s in range(RANDOM))]
    return cases + corner_cases()


def harness_cases(cases, exact_only: bool = True) -> tuple[list[Case], list[list[np.ndarray]]]:
    """Blobs planned for the Cortex-M4 (with exact_only False, an op the host predicts the DSP
    kernel gives back to the reference gets its scratch all the same), two inputs each, and
    the NumPy reference's outputs."""
    out, expect = [], []
    for i, (name, g) in enumerate(cases):
        rng = np.random.default_rng(i)
        xs = np.stack([random_input(g, rng) for _ in range(2)])
        blob = pack_blob(g, zlib.crc32(name.encode()),
                         scratch=plan_scratch(g, "cortex-m4", exact_only=exact_only))
        out.append(Case(blob, xs.reshape(2, -1), FLAG_OUTPUTS, name))
        f = Forward(g)
        expect.append([f.run(x).ravel() for x in xs])
    return out, expect


def check_run(cases, run, expect) -> None:
    assert len(run.results) == sum(len(c.inputs) for c in cases)
    bad = []
    for r in run.results:
        want = expect[r.case][r.input]
        if r.status != 0 or not np.array_equal(r.out_opt, want) or \
                not np.array_equal(r.out_ref, want):
            bad.append(f"{cases[r.case].name} input {r.input}: status {r.status}, "
                       f"{np.count_nonzero(r.out_opt != want) if r.out_opt is not None else '-'}"
                       f" of {want.size} outputs differ")
    assert not bad, "\n".join(bad)


@needs_qemu
@pytest.mark.parametrize("variant", BUILDS)
def test_dsp_kernels_on_qemu_m4_equal_reference(variant, tmp_path):
    cases, expect = harness_cases(all_cases())
    run = run_cases(cases, workdir=tmp_path, variant=VARIANTS[variant])
    check_run(cases, run, expect)
    # the DSP kernels did run: the opgen convolutions cost a fraction of the reference's (at
    # -O0, where every intrinsic is a call, 0.81 of it)
    ref = sum(r.cost_ref for r in run.results)
    opt = sum(r.cost_opt for r in run.results)
    assert opt < (0.9 if variant == "gcc -O0" else 0.5) * ref, (opt, ref)


@needs_qemu
def test_the_host_predicts_which_ops_fall_back(tmp_path):
    """Where the host's mirror of tp_dsp_prepare says the DSP kernel would give the op back to
    the reference (accumulators too wide), the board, handed the scratch anyway, does so: the
    same bits at the reference's cost; everywhere else the DSP kernel runs, far cheaper."""
    cases = corner_cases()
    predicted = [plan_scratch(g, "cortex-m4").ops[-1].runs("infer") for _, g in cases]
    assert sum(p == "reference" for p in predicted) == 3  # the three "-wide" cases
    blobs, expect = harness_cases(cases, exact_only=False)
    run = run_cases(blobs, workdir=tmp_path)
    check_run(blobs, run, expect)
    for r in run.results:
        ratio = r.cost_opt / r.cost_ref
        if predicted[r.case] == "reference":
            assert 0.95 < ratio < 1.05, (cases[r.case][0], ratio)
        else:
            assert ratio < 0.6, (cases[r.case][0], ratio)


def run_sanitized(cases: list[Case], tmp_path: Path) -> Run:
    """The cases' records from the driver with the intrinsics emulated, under ASan and UBSan."""
    write_cases(tmp_path / "cases.bin", cases)
    exe = build_program(DRIVER, sanitize=True, dsp_emulation=True)
    proc = subprocess.run([str(exe), str(tmp_path / "cases.bin")], capture_output=True,
                          check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    return read_records(io.BytesIO(proc.stdout), cases)


def test_dsp_kernels_emulated_under_sanitizers_equal_reference(tmp_path):
    cases, expect = harness_cases(all_cases(), exact_only=False)
    check_run(cases, run_sanitized(cases, tmp_path), expect)


def _host_summary(driver: Path, summary: str, dsp_emulation: bool = False) -> None:
    """A test driver built here under ASan and UBSan exits 0 with `summary` its only line."""
    exe = build_program(driver, sanitize=True, dsp_emulation=dsp_emulation)
    proc = subprocess.run([str(exe)], capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.strip() == summary


def _board_check(driver: Path, entry: str, summary: str, tmp_path: Path) -> None:
    """The same driver as a qemu-m4 application ends in `summary` and exits 0."""
    lines, status = _board_summary(driver, entry, summary.split(",")[0].encode(), tmp_path)
    assert lines[-1] == summary.encode() + b"\n", lines[-9:]
    assert status == 0


def _board_summary(driver: Path, entry: str, last: bytes, tmp_path: Path) -> tuple[list, int]:
    """A test driver's lines as a qemu-m4 application, up to its summary line, and its exit
    status."""
    from tinyprop.device.firmware import build_firmware
    from tinyprop.device.runners import start_qemu

    elf = build_firmware("qemu-m4", str(driver), {"APP_ENTRY": entry})
    with start_qemu(elf, workdir=tmp_path, timeout=300) as run, run.connect(240) as link:
        lines = []  # line by line: a read past the last byte would meet the closed link
        while not lines or not lines[-1].startswith(last):
            line = link.read_until(b"\n")
            assert line.endswith(b"\n"), f"qemu-m4 stopped after {lines[-3:]}: {run.log()[-500:]}"
            lines.append(line)
        return lines, run.wait(60)


def test_dsp_folds_equal_the_definition_value_by_value():
    """Every dY' the DSP input-gradient kernels fold (1x1 and 3x3 depthwise, both strides, int8
    and int16 dY, every path of the folds) equals the reference kernels' and round half to
    even of q m / 2^sh, seen through dX = dY' in an int16 map (tests/c/test_fold_dsp.c): a tie
    rounded the other way is one unit off, which a training step's int8 map may round away.
    With the fold's no_clamp set where no dY' reaches the clamp, the kernels' unclamped paths
    too; and tp_gm_fold_of's no_clamp at its edge (a largest |dY| that rounds to 2^15 needs the
    clamp)."""
    _host_summary(FOLD_DRIVER, FOLD_SUMMARY, dsp_emulation=True)


def test_dsp_constant_channel_requantization_equals_the_reference():
    """tp_dsp_prepare's 32-bit requantization of a pruned channel's bias (tp_dsp_mbqm32)
    equals tp_mbqm on int32's extremes, every right shift and multipliers whose products land
    exactly halfway (tests/c/test_mbqm_dsp.c, under ASan and UBSan)."""
    _host_summary(MBQM_DRIVER, "mbqm cases 409600, mismatches 0", dsp_emulation=True)


def test_dsp_bias_sums_equal_the_reference():
    """The bias gradients' sums four int8 channels a word in halfword lanes
    (tp_arm_bias_sums_q) equal the reference's and the definition's: the lanes' extremes over
    runs of 256 positions and past them, channel counts and first channels that are not
    multiples of 4, an int16 map (tests/c/test_bias_sums_dsp.c, under ASan and UBSan)."""
    _host_summary(BIAS_DRIVER, BIAS_SUMMARY, dsp_emulation=True)


@needs_qemu
def test_dsp_bias_sums_on_qemu_m4_equal_the_reference(tmp_path):
    """The same driver with the Cortex-M4's own SXTAB16."""
    _board_check(BIAS_DRIVER, "bias_test_main", BIAS_SUMMARY, tmp_path)


def test_map_rows_equal_the_definition():
    """The map writer's int32 rows (tp_gm_row_i32, tp_gm_end) equal gradmap.produce's
    definition, value by value: rows whose largest magnitude is -2^B (one bit longer than the
    OR of x ^ (x >> 31) says), values rounding up to +-2^bits, exact ties, int32's extremes,
    int8 and int16 maps; a sink's masked channel sums, rows of whole pixels and others
    (tests/c/test_gm_rows.c: the C passes, under ASan and UBSan)."""
    _host_summary(ROWS_DRIVER, ROWS_SUMMARY)


@needs_qemu
def test_map_rows_on_qemu_m4_equal_the_definition(tmp_path):
    """The same driver on qemu-m4: the int8 rows' Thumb-2 assembly passes, the sums' SMLAL."""
    _board_check(ROWS_DRIVER, "gm_rows_main", ROWS_SUMMARY, tmp_path)


def test_update_rows_equal_the_definition():
    """The weight rows' update, QAS's delta settled from the reciprocal of the scale where that
    cannot change the update (tp_optim.c), equals the definition's division and stochastic
    rounding: gradients aimed at the update's thresholds (delta = n + r + j 2^-24), zeros,
    infinities, NaN, momentum and plain SGD (tests/c/test_update_rows.c, under ASan and
    UBSan)."""
    _host_summary(UPDATE_DRIVER, UPDATE_SUMMARY)


@needs_qemu
def test_update_rows_on_qemu_m4_equal_the_definition(tmp_path):
    """The same driver on qemu-m4: the Cortex-M4 FPU's fixed-point VCVT (saturating, NaN to 0)."""
    _board_check(UPDATE_DRIVER, "update_rows_main", UPDATE_SUMMARY, tmp_path)


def test_fold_sums_equal_the_definition():
    """The fold's scan with the channel sums (tp_gm_fold_sums_of) on this machine: without the
    DSP extension it makes none, and its fold and masked map are tp_gm_fold_of's
    (tests/c/test_fold_sums.c, under ASan and UBSan)."""
    _host_summary(SUMS_DRIVER, SUMS_SUMMARY)


@needs_qemu
def test_fold_sums_on_qemu_m4_equal_the_definition(tmp_path):
    """The same driver on qemu-m4: the scan's assembly makes every channel's sum of its masked
    values (runs past the halfword lanes' 256 positions, values of -128 and 127), hands them
    eight at a time in order, and leaves the fold and the map as tp_gm_fold_of does; and
    tp_fold_scan8 itself, called directly (masks of the map's, 0xFF, 0x00 and none; every
    channel equal; running maxima from nonzero starts), leaves each channel's largest magnitude
    (-128's 128), halfword sum and masked values as their definitions."""
    _board_check(SUMS_DRIVER, "fold_sums_main", SUMS_SUMMARY_M4, tmp_path)


def test_relu_masks_equal_the_definition():
    """The RELU mask (tp_gm_relu_mask) sets exactly the bits of the values the RELU passed,
    lo <= y < hi, for every window a RELU or RELU6 can leave and every int8 value, from an aligned
    buffer and an unaligned one (tests/c/test_relu_mask.c: the SWAR C, under ASan and UBSan)."""
    _host_summary(MASK_DRIVER, MASK_SUMMARY)


@needs_qemu
def test_relu_masks_on_qemu_m4_equal_the_definition(tmp_path):
    """The same driver on qemu-m4: the Cortex-M4's assembly (SSUB8 or USUB8 twice, MRS) on the
    aligned buffer in turns of 32 values, USUB8 and SEL on the rest and the unaligned one."""
    _board_check(MASK_DRIVER, "relu_mask_main", MASK_SUMMARY, tmp_path)


@needs_qemu
def test_dsp_folds_on_qemu_m4_equal_the_definition_value_by_value(tmp_path):
    """The same driver as a qemu-m4 application: the folds with the Cortex-M4's own SMMULR,
    SMLAD, SSAT and QSUB16, not their C emulation."""
    _board_check(FOLD_DRIVER, "fold_test_main", FOLD_SUMMARY, tmp_path)


def _tie_scales(g: Graph) -> None:
    """Depthwise weight scales whose mantissas end in 4 to 19 zero bits: q m can fall halfway
    between two folded values (the fold's exact int32 path, not its SMMULR one)."""
    w = g.tensors[g.ops[1].inputs[1]]
    w.scale = np.array([(1.0 + 2.0 ** -(23 - 4 - i % 16)) * 2.0 ** -(6 + i % 3)
                        for i in range(w.scale.size)], np.float32)


def _exact_ties(g: Graph) -> None:
    """Depthwise channel 0 with a large scale and zero weights (it sets the fold's top), the
    others 1.5 * 2^-(11..18) of it with one weight, the centre tap's +-1: dY' = q times 0.75,
    0.375, ... (depending on max |q| of channel 0, which bounds the fold's top), so that a
    quarter to a half of the q of some channels fold to exact halves, and dX, a dY' a
    position, fits an int8 map with at most a one-bit shift. A tie the DSP fold rounds
    otherwise than the reference then changes dX, so the bias gradient of the trained 1x1 conv
    below, its velocity and the params' CRC."""
    w = g.tensors[g.ops[1].inputs[1]]
    c = w.scale.size
    w.scale = np.array([2.0 ** -2] + [1.5 * 2.0 ** -(11 + i % 8) for i in range(1, c)],
                       np.float32)
    w.data[:] = 0
    w.data[0, 1, 1, 1:] = np.where(np.arange(1, c) % 2 == 1, 1, -1)


def _full_mantissas(g: Graph) -> None:
    """Depthwise weight scales of mantissa 2^24 - 1: the top channel's fold of q = -128 would
    saturate (the fold's saturating path)."""
    w = g.tensors[g.ops[1].inputs[1]]
    w.scale = np.array([(2.0 - 2.0 ** -23) * 2.0 ** -(7 + i % 2) for i in range(w.scale.size)],
                       np.float32)


def _dead_output(g: Graph) -> None:
    """Every depthwise output below its RELU: its output gradient is zero (a dead fold)."""
    g.tensors[g.ops[1].inputs[2]].data[:] = -(1 << 30)


def _dead_channels_dw(g: Graph) -> None:
    """Depthwise channels 0, 3 and 5 below their RELU (VWW's pruned channels sit at theirs):
    their output gradient is all zero, the other channels' is not."""
    g.tensors[g.ops[1].inputs[2]].data[[0, 3, 5]] = -(1 << 30)


def _pruned_inputs_dw(g: Graph) -> None:
    """The first conv's channels 1, 2 and 6 held at their zero point (zero weights, a bias far
    below their RELU: VWW's pruned channels): the depthwise rows of those channels read x = zp
    everywhere, so each of their weight gradients is 0."""
    g.tensors[g.ops[0].inputs[1]].data[[1, 2, 6]] = 0
    g.tensors[g.ops[0].inputs[2]].data[[1, 2, 6]] = -(1 << 30)


def dw_training_cases() -> list[tuple[str, Graph, SparseScheme]]:
    """x -> 1x1 conv (trained) -> 3x3 depthwise (bias and some rows trained) -> 1x1 head."""
    spec = [("s1", (6, 6, 16), {}, None), ("s2-odd-pad", (7, 9, 5), {"stride": (2, 2)}, None),
            ("s2-even", (8, 8, 4), {"stride": (2, 2)}, None),
            ("s1-valid", (9, 11, 6), {"padding": "VALID"}, None),
            ("s2-valid", (10, 13, 3), {"stride": (2, 2), "padding": "VALID"}, None),
            ("s12", (7, 12, 5), {"stride": (1, 2)}, None),
            ("s21", (9, 7, 4), {"stride": (2, 1)}, None),
            ("s12-valid", (6, 11, 3), {"stride": (1, 2), "padding": "VALID"}, None),
            ("wider-than-planes", (3, 130, 4), {}, None),
            ("weight-planes-full", (12, 12, 8), {}, _tie_scales),
            ("weight-planes-over", (13, 13, 4), {"stride": (2, 2)}, None),
            ("saturating", (5, 40, 6), {}, _full_mantissas),
            ("ties-s2", (11, 9, 12), {"stride": (2, 2)}, _tie_scales),
            ("tiny", (3, 3, 32), {}, None), ("odd-width", (5, 1, 3), {}, None),
            ("mult2", (6, 6, 3), {"mult": 2}, None),
            ("dead", (6, 6, 8), {"act": "RELU"}, _dead_output),
            ("dead-channels", (7, 9, 8), {"act": "RELU"}, _dead_channels_dw),
            ("dead-channels-s2", (9, 9, 8), {"stride": (2, 2), "act": "RELU"},
             _dead_channels_dw),
            ("dead-channels-many", (4, 5, 260), {"act": "RELU"}, _dead_channels_dw),
            ("pruned-inputs", (7, 9, 8), {}, _pruned_inputs_dw),
            ("pruned-inputs-s2", (9, 8, 8), {"stride": (2, 2)}, _pruned_inputs_dw),
            ("exact-ties", (6, 6, 16), {}, _exact_ties),
            ("exact-ties-s2", (9, 8, 16), {"stride": (2, 2)}, _exact_ties)]
    out = []
    for i, (name, shape, conv, tweak) in enumerate(spec):
        r = np.random.default_rng(1000 + i)
        b = _Builder(r)
        x = b.act("x", (1, *shape))
        a = b.conv(x, "CONV_2D", k=(1, 1), cout=shape[2], act="RELU")
        y = b.conv(a, "DEPTHWISE_CONV_2D", **conv)
        logits = b.conv(y, "CONV_2D", k=(1, 1), cout=3)
        g = b.graph(x, logits, f"dw-grad-{name}")
        if tweak is not None:
            tweak(g)
        n_dw = b.tensors[y].shape[3]
        rows = sorted(r.choice(n_dw, size=max(1, n_dw // 2), replace=False).tolist())
        layers = {0: LayerUpdate(0, True, [0]), 1: LayerUpdate(1, True, rows),
                  2: LayerUpdate(2, True, [0, 1, 2])}
        out.append((f"dw-grad-{name} {shape} {conv}", g, SparseScheme("test", layers)))
    return out


def dw_training_blobs(grad: str, target: str | None = None) -> tuple[list[Case], list[list[int]]]:
    """Each case's blob, without a scratch plan (target None: the forward runs the reference
    kernels) or planned for `target`'s kernels as `tinyprop convert` plans it (the Cortex-M4's:
    the forward's DSP kernels, their scratch in the training arena), three training samples,
    and the NumPy trainer's params CRC32 after each step. With a velocity per trained
    parameter (momentum 0: the step's float32 gradient), so that the CRC sees every gradient."""
    cases, want = [], []
    for i, (name, g, scheme) in enumerate(dw_training_cases()):
        prog = build_train_program(g, scheme, momentum=True, grad=grad)
        if target is None:
            blob = pack_blob(g, 0, train=prog)
        else:
            infer = inference_for(g, prog)
            plan = plan_scratch(g, target, prog, prog.region_bytes, infer=infer)
            assert plan.ops[0].runs("train") != "reference", name  # the forward's DSP kernels
            blob = pack_blob(g, 0, train=prog, infer=infer, scratch=plan)
        rng = np.random.default_rng(i)
        xs = np.stack([random_input(g, rng) for _ in range(3)])
        ys = rng.integers(0, 3, 3)
        cases.append(Case(blob, train_inputs(xs, ys), FLAG_TRAIN,
                          f"{name} {grad} {target or 'unplanned'}"))
        trainer = ReferenceTrainer(prog, lr=TRAIN_LR, seed=TRAIN_SEED)
        crcs = []
        for x, y in zip(xs, ys, strict=True):
            trainer.train_step(x, int(y))
            crcs.append(zlib.crc32(trainer.params_bytes()))
        want.append(crcs)
    return cases, want


def check_train_run(cases, run, ref_run=None, want=None) -> None:
    """Every step's params region (parameters and the padding after held rows) alike with the
    DSP and the reference kernels, and with the NumPy trainer's (`want`, per case and step), and
    changed by each step."""
    assert len(run.results) == sum(len(c.inputs) for c in cases)
    bad = []
    for k, r in enumerate(run.results):
        ref = ref_run.results[k].crc_opt if ref_run is not None else r.crc_ref
        if r.status != 0 or r.crc_opt != ref:
            bad.append(f"{cases[r.case].name} step {r.input}: status {r.status}, crc "
                       f"{r.crc_opt:08x}, with the reference kernels {ref:08x}")
        if want is not None and ref != want[r.case][r.input]:
            bad.append(f"{cases[r.case].name} step {r.input}: crc with the reference kernels "
                       f"{ref:08x}, the NumPy trainer's {want[r.case][r.input]:08x}")
    assert not bad, "\n".join(bad)
    assert len({r.crc_opt for r in run.results}) == len(run.results)


@needs_qemu
@pytest.mark.parametrize("variant", BUILDS)
@pytest.mark.parametrize("target", [None, "cortex-m4"])
@pytest.mark.parametrize("grad", ["int16", "int8"])
def test_depthwise_gradients_on_qemu_m4_equal_reference(grad, target, variant, tmp_path):
    """The DSP run of case i and the reference run of case n + i share nothing but the blob
    (the harness fills each case's memory with its own pattern first)."""
    cases, want = dw_training_blobs(grad, target)
    ref_cases = [Case(c.blob, c.inputs, c.flags | FLAG_REF, c.name) for c in cases]
    run = run_cases(cases + ref_cases, workdir=tmp_path, variant=VARIANTS[variant])
    n = sum(len(c.inputs) for c in cases)
    check_train_run(cases, Run(run.results[:n]), Run(run.results[n:]), want)


@pytest.mark.parametrize("target", [None, "cortex-m4"])
@pytest.mark.parametrize("grad", ["int16", "int8"])
def test_depthwise_gradients_emulated_under_sanitizers_equal_reference(grad, target, tmp_path):
    cases, want = dw_training_blobs(grad, target)
    check_train_run(cases, run_sanitized(cases, tmp_path), want=want)


class ConvParams(ctypes.Structure):
    _fields_ = [("stride", ctypes.c_uint8 * 2), ("pad", ctypes.c_uint8 * 2),
                ("k", ctypes.c_uint8 * 2), ("depth_multiplier", ctypes.c_int32),
                ("in_zp", ctypes.c_int32), ("out_zp", ctypes.c_int32),
                ("act_min", ctypes.c_int32), ("act_max", ctypes.c_int32)]


class Shape(ctypes.Structure):
    _fields_ = [("h", ctypes.c_int32), ("w", ctypes.c_int32), ("c", ctypes.c_int32)]


def test_host_scratch_sizes_equal_the_kernels(vww_model_path):
    """kernels.scratch_bytes mirrors tp_arm_*_scratch_bytes (plain C on every target)."""
    from tinyprop.frontend.tflite_reader import read_tflite

    lib = load_library()
    graphs = [g for _, g in all_cases()] + [read_tflite(vww_model_path)]
    checked = 0
    for g in graphs:
        for op in g.ops:
            if op.kind not in ("CONV_2D", "DEPTHWISE_CONV_2D"):
                continue
            geo = op_params(g, op).geometry
            p = ConvParams((ctypes.c_uint8 * 2)(*geo["stride"]), (ctypes.c_uint8 * 2)(*geo["pad"]),
                           (ctypes.c_uint8 * 2)(*geo["k"]), op.options.get("depth_multiplier", 1),
                           0, 0, -128, 127)
            si, so = (Shape(*g.tensors[i].shape[1:]) for i in (op.inputs[0], op.outputs[0]))
            fn = lib.tp_arm_conv2d_s8_scratch_bytes if op.kind == "CONV_2D" else \
                lib.tp_arm_depthwise_conv2d_s8_scratch_bytes
            fn.restype = ctypes.c_uint32
            c = fn(ctypes.byref(p), ctypes.byref(si), ctypes.byref(so))
            assert scratch_bytes("cortex-m4", g, op) == c, (g.name, op.index, geo)
            checked += 1
    assert checked > 2 * RANDOM


@needs_qemu
def test_generated_models_on_qemu_m4_bit_exact(tmp_path):
    pytest.importorskip("tensorflow")
    modelgen = pytest.importorskip("modelgen")
    from tinyprop.frontend.tflite_reader import read_tflite

    cases, expect = [], []
    for name in modelgen.MODELS:
        path = modelgen.build_tflite(name)
        g = read_tflite(path)
        xs = modelgen.sample_inputs(path, 6, seed=11)
        blob = pack_blob(g, zlib.crc32(path.read_bytes()), scratch=plan_scratch(g, "cortex-m4"))
        cases.append(Case(blob, np.stack([x.ravel() for x in xs]), FLAG_OUTPUTS, name))
        f = Forward(g)
        expect.append([f.run(x).ravel() for x in xs])
    assert len(cases) == len(modelgen.MODELS) >= 26
    check_run(cases, run_cases(cases, workdir=tmp_path), expect)


@needs_qemu
@pytest.mark.slow
def test_vww_every_image_on_qemu_m4_bit_exact(vww_model_path, vww_data_dir, tmp_path):
    """VWW's blob (333 KB, compiled into the harness's flash) over all 397 vww-mini images with
    the DSP kernels, against the NumPy reference."""
    from tinyprop.data.datasets import load_split
    from tinyprop.frontend.tflite_reader import read_tflite

    g = read_tflite(vww_model_path)
    xs, labels, names = load_split(vww_data_dir, "all", g.input.s, g.input.zp)
    assert len(xs) == 397
    blob = pack_blob(g, zlib.crc32(vww_model_path.read_bytes()),
                     scratch=plan_scratch(g, "cortex-m4"))
    cases = [Case(None, xs.reshape(len(xs), -1), FLAG_OUTPUTS | FLAG_OPT_ONLY, "vww")]
    run = run_cases(cases, builtin=blob, workdir=tmp_path)
    f = Forward(g)
    got = np.stack([r.out_opt for r in run.results])
    want = np.stack([f.run(x).ravel() for x in xs])
    bad = [names[i] for i in np.flatnonzero((got != want).any(axis=1))]
    assert not bad, f"{len(bad)} images differ, first {bad[:3]}"
    assert (got.argmax(axis=1) == labels).mean() > 0.75


@pytest.mark.slow
@needs_qemu
def test_vww_costs_per_layer_type(vww_model_path, vww_data_dir):
    """bench --only kernels' measurement: both kernel sets agree on every part (the harness
    compares their outputs' CRCs), every layer type's parts add up to the whole model within
    the counter's tick per measurement, and the DSP kernels run every convolution."""
    from tinyprop.bench.kernels import LAYER_TYPES, vww_costs
    from tinyprop.data.datasets import load_split
    from tinyprop.frontend.tflite_reader import read_tflite

    g = read_tflite(vww_model_path)
    x = load_split(vww_data_dir, "holdout", g.input.s, g.input.zp)[0][0]
    out = vww_costs(g, x)
    assert set(out["types"]) == set(LAYER_TYPES)
    assert sum(t["macs"] for t in out["types"].values()) == out["whole"]["macs"] == 7_489_664
    for kernels in ("ref", "opt"):
        parts = sum(t[kernels] for t in out["types"].values())
        # each one-op measurement and its RESHAPE twin are exact to a 40-instruction tick;
        # the whole model runs its interpreter's loop once, not 28 times
        assert abs(parts - out["whole"][kernels]) < 0.002 * out["whole"][kernels]
    for row in out["ops"]:
        if row["kind"] in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            assert row["opt"] < row["ref"] / 2, row


def _deep_scheme(path):
    """Biases of every weighted op (gradient maps down to 48x48, through every depthwise stride)
    and weights of 1x1 convolutions at 48x48, 6x6 and 3x3 and of a depthwise layer (few rows
    of the wide ones: with a velocity each, params and arena fit the harness on qemu-m4)."""
    import json

    path.write_text(json.dumps({"bias_last": 29, "weights": [
        {"op": 2, "fraction": 0.25}, {"op": 20, "fraction": 0.125}, {"op": 25, "fraction": 0.125},
        {"op": 26, "fraction": 0.125}]}))
    return str(path)


@needs_qemu
@pytest.mark.parametrize("grad", ["int16", pytest.param("int8", marks=pytest.mark.slow)])
def test_gradient_kernels_train_bit_exact_on_qemu_m4(grad, vww_model_path, vww_data_dir,
                                                     tmp_path):
    """Training steps on qemu-m4 with the DSP gradient kernels (integer maps) leave the same
    parameters, step by step, as with the reference kernels, and the profile's parts add up to
    the step (tinyprop bench --only step reads them). The velocities (momentum 0: each the
    step's gradient) are in the CRC: every gradient is compared, not only the int8 parameters."""
    from tinyprop.bench.kernels import FLAG_BUILTIN, FLAG_REF, FLAG_TRAIN, StepProfile, train_inputs
    from tinyprop.compile.build import build
    from tinyprop.data.datasets import load_split
    from tinyprop.frontend.tflite_reader import read_tflite

    g = read_tflite(vww_model_path)
    xs, ys, _ = load_split(vww_data_dir, "train", g.input.s, g.input.zp, shift="haze")
    tb = build(vww_model_path, _deep_scheme(tmp_path / "deep.json"), None, momentum=True,
               grad=grad)
    inputs = train_inputs(xs[:3], ys[:3])
    cases = [Case(None, inputs, FLAG_TRAIN | FLAG_OUTPUTS | FLAG_BUILTIN, "dsp"),
             Case(None, inputs, FLAG_TRAIN | FLAG_OUTPUTS | FLAG_BUILTIN | FLAG_REF, "ref")]
    run = run_cases(cases, builtin=tb.blob, workdir=tmp_path)
    dsp, ref = run.of(0), run.of(1)
    assert [r.status for r in dsp + ref] == [0] * 6
    assert len({r.crc_opt for r in dsp}) == 3  # every step changes the parameters
    assert [r.crc_opt for r in dsp] == [r.crc_opt for r in ref]
    for r in dsp:
        p = StepProfile.of(r)
        parts = int(p.ops.sum()) + p.loss_cost
        assert abs(parts - r.cost_opt) < p.hook_calls * (p.hook_cost + 40)
    assert dsp[0].cost_opt < ref[0].cost_opt / 2
