"""The Cortex-M4 cycle model (tinyprop.bench.cycles): its instruction timings, the microbenchmarks
(firmware/apps/cyclebench, real compiled C on qemu-m4 under QEMU's execution trace) modelled to
exactly the cycles the Technical Reference Manual fixes, and the trace's instruction counts
equal to the board's -icount counter."""

from __future__ import annotations

import numpy as np
import pytest
from test_kernels_dsp import needs_qemu
from tinyprop.bench.cycles import (
    MICRO,
    TICK,
    Timing,
    decode,
    model,
    pair_cycles,
    traced,
    validate,
)
from tinyprop.errors import TinypropError

T = Timing()


def cost(text: str, t: Timing = T):
    i = decode(0x100, 2, text, t)
    return i.cycles, i.taken


def test_instruction_timings_are_the_trms():
    assert cost("ldr r1, [r1]") == (2, 0)
    assert cost("ldrsh.w r3, [r1, #6]") == (2, 0)
    assert cost("str r2, [r1, #8]") == (1, 0)  # STR Rx,[Ry,#imm]: always one cycle
    assert cost("str r2, [r1, r3]") == (2, 0)
    assert cost("ldrd r2, r3, [r1, #8]") == (3, 0)
    assert cost("push.w {r4, r5, r6, r7, r8, sb, sl, fp, lr}") == (10, 0)
    assert cost("pop {r4, r5, pc}") == (4, 3 + 1 + T.refill)  # 1+N+P
    assert cost("ldr pc, [sp], #4")[1] == 2 + T.refill
    assert cost("smlad r4, r2, r3, r4") == (1, 0)
    assert cost("umull r4, r5, r2, r3") == (1, 0)
    assert cost("sdiv r4, r2, r3") == (T.divide, 0)
    assert cost("bne #0x3b4") == (1, 1 + T.refill)
    assert cost("bl #0x113b8", Timing(refill=3, flash_wait=2)) == (1, 1 + 3 + 2)
    assert cost("vmla.f32 s0, s1, s2") == (3, 0)
    assert cost("vdiv.f32 s0, s1, s2") == (14, 0)
    assert cost("vldr d0, [r1, #8]") == (3, 0)
    assert cost("vpush {d8, d9}") == (5, 0)
    assert cost("vmov r3, s0") == (2, 0)
    assert cost("vmov.f32 s1, #1.0") == (1, 0)
    with pytest.raises(TinypropError, match="no timing for 'wfx r0'"):
        decode(0x100, 2, "wfx r0", T)


def test_load_store_pairs():
    def pair(a: str, b: str) -> int:
        return pair_cycles(decode(0, 2, a, T), decode(2, 2, b, T))

    assert pair("ldr r0, [r1]", "ldr r1, [r2]") == -1  # pipelined: no dependency
    assert pair("ldr r0, [r1]", "ldr r2, [r0]") == 0  # the address is the load's result
    assert pair("ldr r0, [r1, r2]", "str r1, [r3, r2]") == -1
    assert pair("ldr r0, [r1, r2]", "str r0, [r3, #20]") == 0  # already one cycle
    assert pair("str r0, [r1]", "ldr r2, [r3]") == 0  # nothing pipelines after a store
    assert pair("adds r2, r1, #4", "ldr r3, [r2]") == 1  # no forwarding to the address
    assert pair("ldr r0, [r1]", "ldm r2, {r3, r4}") == 0  # LDM never pipelines


@needs_qemu
def test_microbenchmarks_reproduce_the_trm_and_the_counter():
    """Each microbenchmark's iteration, modelled from QEMU's trace of the compiled program,
    costs exactly the cycles worked out by hand from the TRM, at the default parameters and at
    others; and the trace's instruction counts are exactly the board's -icount counter."""
    for t in (Timing(), Timing(refill=1, divide=2, flash_wait=1), Timing(refill=3)):
        v = validate(t=t)
        assert [r["name"] for r in v["rows"]] == list(MICRO)
        wrong = [(r["name"], r["trm"], r["model"]) for r in v["rows"] if r["model"] != r["trm"]]
        assert not wrong
        assert v["icount_exact"]
        assert all(abs(a - b) < TICK for a, b in zip(v["trace_instructions"],
                                                    v["board_instructions"], strict=True))


@needs_qemu
def test_trace_counts_the_harness_instructions(vww_model_path):
    """The kernels' harness running VWW's first two ops (real kernels, real QEMU) under the
    trace: its window between the counter reads holds the instructions the board counted, to
    the counter's tick, and models to more cycles than instructions."""
    from tinyprop.bench.kernels import FLAG_OPT_ONLY, Case, run_cases, subgraph, target_blob
    from tinyprop.device.firmware import build_firmware
    from tinyprop.frontend.tflite_reader import read_tflite

    g = subgraph(read_tflite(vww_model_path), 0, 1)
    x = np.random.default_rng(0).integers(-128, 128, (1, g.input.size), dtype=np.int8)
    elf = build_firmware("qemu-m4", "kerneltest")
    with traced(elf) as (args, finish):
        run = run_cases([Case(target_blob(g), x, FLAG_OPT_ONLY)], qemu_args=args)
    w = model(finish())
    (r,) = run.results
    assert r.status == 0 and r.cost_opt > 100_000
    assert len(w.instructions) == 1
    assert abs(int(w.instructions[0]) - r.cost_opt) < TICK
    assert w.instructions[0] < w.cycles[0] < 3 * w.instructions[0]


@needs_qemu
def test_a_model_without_some_layer_types(vww_model_path):
    """vww_cycles on a model lacking a layer type (VWW's last depthwise and pointwise convs and
    the tail: no first conv; ResNet-8 has no depthwise): its row is empty, not a division by
    zero, and the others are measured; its functions' cycles are listed costliest first."""
    from tinyprop.bench.cycles import vww_cycles
    from tinyprop.bench.kernels import subgraph
    from tinyprop.frontend.tflite_reader import read_tflite

    g = read_tflite(vww_model_path)
    tail = subgraph(g, len(g.ops) - 6, len(g.ops) - 1)
    assert [op.kind for op in tail.ops][:3] == ["DEPTHWISE_CONV_2D", "CONV_2D", "AVERAGE_POOL_2D"]
    x = np.random.default_rng(0).integers(-128, 128, tail.input.size).astype(np.int8)
    out = vww_cycles(tail, x)
    types, whole = out["types"], out["whole"]
    assert types["first conv"]["instructions"] == 0
    assert types["first conv"]["cycles_per_instruction"] is None
    assert types["pointwise"]["instructions"] > 10_000
    assert types["depthwise"]["instructions"] > 1_000
    assert whole["instructions"] < whole["cycles"] < 3 * whole["instructions"]
    # where the cycles go: the costliest functions first, the kernels' among them, within the
    # whole's
    fns = out["functions"]
    assert [f["cycles"] for f in fns] == sorted((f["cycles"] for f in fns), reverse=True)
    assert sum(f["cycles"] for f in fns) <= whole["cycles"]
    assert sum(f["instructions"] for f in fns) <= whole["instructions"]
    names = {f["function"] for f in fns}
    assert {"tp_arm_dw_band_s1", "tp_arm_conv_block_4x2"} & names, names
