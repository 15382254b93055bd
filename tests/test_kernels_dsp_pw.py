"""The Cortex-M DSP 1x1 CONV_2D gradient kernels (firmware/core/kernels/arm/tp_conv_*_grad_arm.c)
equal the reference kernels bit for bit, op by op, on qemu-m4: small graphs x -> 1x1 conv (bias
trained: the op under test must hand it an input gradient) -> the 1x1 conv under test -> MEAN
-> a 1x1 head, three training steps with the DSP kernels and three with the reference kernels, the
parameters' CRC after each step equal. The blobs hold a float32 velocity per trained parameter
(convert --momentum; the harness trains with momentum 0, so each velocity is the step's gradient):
the CRC covers every gradient bit for bit, not only the int8 parameters, whose stochastic
rounding would hide a gradient one unit off.

The cases reach every path of the kernels: trained rows held apart (a channel subset) and
contiguous weights (the op trains its bias only), output channels in one block and in several
with an odd last one (TP_PW_BLOCK is 32), output channels whose weight rows are all zero (left
out of the input gradient's blocks: scattered, every one, trained rows that leave zero), an odd
last pixel of a row, int8 maps (the SMMULR fold,
its channels that can meet ties folded again in int32, and the int32 fold of dY' below 15 bits
past 511 output channels) and int16 maps (tp_dsp_fold), the weight gradient over one block of
positions and over many (TP_WG_BLOCK is 64), with int16 maps on a 48x48 map whose sum |dY|
passes the int32 bounds. An op whose weights do not train reads its input gradient's weights from
the blob's PWIG section (its channels with a nonzero row, in pairs, the word a pair of inputs the
kernel multiplies by): one block and several, an odd last channel, scattered zero rows, ties, dead
channels, last pixels of one to three; each of those blobs has the section. Zero weight columns
(inputs whose pairs the input gradient leaves out, in runs of the others): trained and not, more
runs than the kernel keeps, every column zero. Inputs at their zero point everywhere (the first
conv's pruned channels): quads of four, of one other, of more; every input. Rows of two and three
pixels only (each path of the last pixels' asm), blocks of one, two and seven channels, ties at
the last two and three pixels, four pixels where no pair is left (the sums 0).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from opgen import _Builder
from test_kernels_dsp import BUILDS, VARIANTS, needs_qemu
from tinyprop import blob_layout
from tinyprop.bench.kernels import FLAG_OUTPUTS, FLAG_REF, FLAG_TRAIN, Case, run_cases, train_inputs
from tinyprop.compile.blob import inference_for, pack_blob
from tinyprop.compile.kernels import plan_scratch
from tinyprop.compile.scheme import LayerUpdate, SparseScheme
from tinyprop.compile.train_plan import build_program


def _coarse(b: _Builder, op: int) -> None:
    """Op `op`'s weight scales cut to 1..12 significant bits by channel (the bias scales to
    match): mantissas with many trailing zeros, whose folds can meet exact halves (ties)."""
    w, bias = b.ops[op].inputs[1], b.ops[op].inputs[2]
    m, e = np.frexp(b.tensors[w].scale.astype(np.float64))
    nbits = np.arange(len(m)) % 12 + 1
    s = np.ldexp(np.floor(np.ldexp(m, nbits)), e - nbits).astype(np.float32)
    s_in = np.float32(b.tensors[b.ops[op].inputs[0]].scale[0])
    b.tensors[w] = replace(b.tensors[w], scale=s)
    b.tensors[bias] = replace(b.tensors[bias], scale=(s_in * s).astype(np.float32))


def _case(name: str, seed: int, hwc, mid: int, cout: int, rows, grad: str, coarse=False,
          per_channel=True, zero=(), dead=(), columns=(), pruned=()):
    """x (hwc) -> 1x1 conv to `mid` channels (RELU, bias trained) -> 1x1 conv to `cout` (the op
    under test: bias, and weight rows `rows` unless None) -> MEAN -> 1x1 head of 3 (bias
    trained): every position gets its share of the gradient. `coarse`: the op's weight scales
    with few significant bits (_coarse); `per_channel` False: one weight scale; `zero`: the op's
    output channels whose weight rows are all zero (VWW's pruned channels; a trained one leaves
    zero after a step); `dead`: output channels held below their RELU by their bias (dY zero
    everywhere: the weight gradient adds nothing, the update leaves the row); `columns`: the
    op's input channels whose weight columns are all zero (VWW's inputs from pruned channels:
    dX zero there; a trained row's weights there leave zero after a step); `pruned`: the first
    conv's output channels held at their zero point (zero weights, a bias far below: VWW's pruned
    channels), the op's inputs that add nothing to its weight gradient."""
    r = np.random.default_rng(seed)
    b = _Builder(r)
    x = b.act("x", (1, *hwc))
    a = b.conv(x, "CONV_2D", k=(1, 1), cout=mid, act="RELU")
    y = b.conv(a, "CONV_2D", k=(1, 1), cout=cout, act="RELU", per_channel=per_channel)
    if coarse:
        _coarse(b, 1)
    w1 = b.ops[1].inputs[1]
    b.tensors[w1].data[list(zero)] = 0
    b.tensors[w1].data[..., list(columns)] = 0
    b.tensors[b.ops[0].inputs[1]].data[list(pruned)] = 0
    b.tensors[b.ops[0].inputs[2]].data[list(pruned)] = -(1 << 30)
    b.tensors[b.ops[1].inputs[2]].data[list(dead)] = -(1 << 30)
    m = b.act("mean", (1, 1, 1, cout))
    b.op("MEAN", [y, b.const_int32("axes", [1, 2])], m, keep_dims=True)
    logits = b.conv(m, "CONV_2D", k=(1, 1), cout=3)
    g = b.graph(x, logits, name)
    under = LayerUpdate(1, True, list(rows)) if rows is not None else LayerUpdate(1, True, [])
    scheme = SparseScheme(name, {0: LayerUpdate(0, True, []), 1: under,
                                 3: LayerUpdate(3, True, [])})
    prog = build_program(g, scheme, momentum=True, grad=grad)
    infer = inference_for(g, prog)
    scratch = plan_scratch(g, "cortex-m4", prog, prog.region_bytes, infer=infer)
    blob = pack_blob(g, seed, train=prog, scratch=scratch, infer=infer)
    xs = r.integers(-128, 128, (3, *hwc)).astype(np.int8)
    ys = r.integers(0, 3, 3)
    return f"{name} {grad}", blob, train_inputs(xs, ys)


def cases():
    out = []
    for grad in ("int8", "int16"):
        # held rows, several channel blocks with an odd last one, an odd last pixel
        out.append(_case("held-odd", 1, (5, 7, 12), 12, 37, [0, 3, 4, 17, 32, 36], grad))
        # contiguous weights (bias only), one block, odd channels, odd width
        out.append(_case("contiguous", 2, (6, 5, 8), 8, 9, None, grad))
        # contiguous weights over several blocks
        out.append(_case("contiguous-blocks", 3, (4, 6, 16), 16, 70, None, grad))
        # every row held, even shapes
        out.append(_case("held-all", 4, (6, 6, 32), 32, 32, range(32), grad))
        # the weight gradient over many position blocks (int16: past the int32 bounds)
        out.append(_case("positions", 5, (48, 48, 4), 4, 5, [0, 2, 4], grad))
        # weight scales with few significant bits: int8 folds whose channels can meet ties
        # (their own rounding within the SMMULR fold), several blocks, an odd last pixel
        out.append(_case("ties", 6, (4, 5, 16), 16, 43, [1, 2, 33], grad, coarse=True))
        out.append(_case("ties-all", 7, (3, 4, 8), 8, 24, range(24), grad, coarse=True))
        # over 511 output channels: dY' of fewer than 15 bits (int8: the int32 fold, not SMMULR;
        # one weight scale, so that every channel's shift is in its range)
        out.append(_case("wide", 8, (2, 3, 4), 4, 520, [0, 511], grad, per_channel=False))
        # zero weight rows (left out of the blocks), scattered: live channels over two blocks,
        # an odd last one; held zero rows that the first step makes live
        zero = [0, 1, 5, 6, 7, 8, 20, 31, 33, 34, 40, 44, 45, 48, 49]
        out.append(_case("zero-rows", 9, (3, 7, 12), 12, 50, [1, 6, 10, 44], grad, zero=zero))
        # every row zero: dX zero; trained or not (the held rows are live from step 2 on)
        out.append(_case("zero-all-held", 10, (4, 5, 8), 8, 6, [2, 5], grad, zero=range(6)))
        out.append(_case("zero-all", 11, (4, 5, 8), 8, 6, None, grad, zero=range(6)))
        # held rows of dead channels (VWW's pruned ones): one block of positions, and many
        out.append(_case("dead-held", 12, (4, 5, 16), 16, 20, [0, 1, 2, 3, 7], grad,
                         dead=[1, 3, 7, 9]))
        out.append(_case("dead-positions", 13, (48, 48, 4), 4, 5, [0, 1, 2], grad, dead=[1]))
        # PWIG's pairs (weights not trained): scattered zero rows over two blocks with an odd
        # last live channel and last pixels of three; ties; dead channels, last pixels of two
        out.append(_case("pairs-zero", 14, (3, 7, 12), 12, 50, None, grad, zero=zero[:14]))
        out.append(_case("pairs-ties", 15, (4, 5, 16), 16, 43, None, grad, coarse=True))
        out.append(_case("pairs-dead", 16, (4, 6, 8), 8, 20, None, grad, dead=[1, 3, 7, 9]))
        # zero weight columns (their pairs of inputs left out: runs of the others): held rows
        # (trained columns leave zero), and with zero rows; PWIG's pairs with more runs than
        # the kernel keeps (20 of 16: the last gaps taken) and last pixels of three; every
        # column zero (dX zero) in held rows, which the first step makes live
        cols = [0, 1, 4, 5, 6, 7, 9, 16, 17, 18, 19, 22, 23, 30, 31]
        out.append(_case("columns", 17, (3, 6, 32), 32, 20, [0, 2, 19], grad, columns=cols))
        out.append(_case("columns-rows", 18, (4, 5, 32), 32, 40, None, grad, zero=zero[:8],
                         columns=cols))
        out.append(_case("pairs-runs", 19, (3, 7, 80), 80, 12, None, grad,
                         columns=[i for i in range(80) if i % 4 >= 2]))
        out.append(_case("columns-all-held", 20, (2, 4, 8), 8, 6, [1, 4], grad,
                         columns=range(8)))
        # inputs at their zero point (the weight gradient sums zp dY without the products):
        # quads with none, one and more of the others; two blocks of positions with an odd last
        # one; every input
        pruned = [0, 1, 2, 3, 4, 5, 7, 8, 10, 12, 13, 14, 20, 21, 22, 23, 25, 26, 27, 29]
        out.append(_case("inputs-zp", 21, (9, 9, 32), 32, 12, [0, 3, 11], grad, pruned=pruned))
        out.append(_case("inputs-zp-all", 22, (3, 5, 8), 8, 6, [2, 5], grad, pruned=range(8)))
        # rows of two and three pixels only (no four-pixel step), trained rows and PWIG's pairs,
        # several blocks with an odd last one; blocks of one and two channels (one pair, no
        # pair past a sum's first one), rows of five and six pixels
        out.append(_case("narrow-2", 23, (5, 2, 16), 16, 37, [0, 9, 36], grad))
        out.append(_case("narrow-3", 24, (4, 3, 8), 8, 41, [3, 40], grad))
        out.append(_case("pairs-2", 25, (5, 2, 16), 16, 71, None, grad, zero=zero[:5]))
        out.append(_case("pairs-3", 26, (4, 3, 12), 12, 37, None, grad, dead=[2, 5]))
        out.append(_case("one-channel", 27, (3, 6, 8), 8, 1, [0], grad))
        out.append(_case("pairs-one", 28, (3, 7, 8), 8, 1, None, grad))
        out.append(_case("pairs-two", 29, (2, 5, 8), 8, 2, None, grad))
        out.append(_case("pairs-small", 30, (3, 6, 12), 12, 7, None, grad, zero=[1, 4]))
        # ties at the last pixels of three and two
        out.append(_case("ties-7", 31, (3, 7, 16), 16, 43, [1, 2, 33], grad, coarse=True))
        out.append(_case("pairs-ties-6", 32, (3, 6, 16), 16, 43, None, grad, coarse=True))
        # one live channel, its dY zero at some four pixels (no pair at a step: the sums 0)
        out.append(_case("pairs-no-pair", 33, (8, 8, 8), 8, 2, None, grad, dead=[1]))
        out.append(_case("no-pair", 34, (8, 8, 8), 8, 2, [0, 1], grad, dead=[1]))
        # two full blocks: a later block's sixteen pairs at a step (every pair unrolled)
        out.append(_case("pairs-full", 35, (4, 4, 8), 8, 64, None, grad))
        out.append(_case("full", 36, (4, 4, 8), 8, 64, [0, 40], grad))
    return out


PAIRED = ("contiguous", "contiguous-blocks", "pairs-zero", "pairs-ties", "pairs-dead",
          "columns-rows", "pairs-runs", "pairs-2", "pairs-3", "pairs-one", "pairs-two",
          "pairs-small", "pairs-ties-6", "pairs-no-pair", "pairs-full")


def paired_ops(blob: bytes) -> set[int]:
    """The ops PWIG lists (none without the section)."""
    head, sec = blob_layout.HEADER.unpack(blob), blob_layout.SECTION
    for i in range(head["n_sections"]):
        entry = sec.unpack(blob, blob_layout.HEADER.size + i * sec.size)
        if entry["id"] == b"PWIG":
            n = blob_layout.PWIG_HEADER.unpack(blob, entry["offset"])["n"]
            return {blob_layout.PWIG_OP.unpack(blob, entry["offset"] + blob_layout.PWIG_HEADER.size
                                               + k * blob_layout.PWIG_OP.size)["op"]
                    for k in range(n)}
    return set()


def test_blobs_whose_weights_do_not_train_have_pairs():
    """The op under test is in PWIG exactly in the cases whose path must take it."""
    for name, blob, _ in cases():
        assert (1 in paired_ops(blob)) == (name.split()[0] in PAIRED), name


def test_pairs_stay_within_the_flash_limit(vww_model_path):
    """PWIG copies weights the blob holds: within a room its ops are those of the largest maps
    (the most multiply-accumulates a byte), in op order, their bytes what pairs_section writes;
    the demo's blob keeps them all, far below blob.PWIG_FLASH_LIMIT."""
    from tinyprop.compile.blob import (
        PWIG_FLASH_LIMIT,
        pairs_bytes,
        pairs_ops,
        pairs_section,
        pairs_within,
    )
    from tinyprop.compile.build import build
    from tinyprop.frontend.tflite_reader import read_tflite

    g = read_tflite(vww_model_path)
    tb = build(vww_model_path, "bias-only", None)
    ops = pairs_ops(g, tb.program)
    assert len(ops) >= 4
    whole = len(pairs_section(g, ops))
    assert whole == len(pairs_section(g, [])) + sum(pairs_bytes(g, k) for k in ops)
    assert pairs_within(g, ops, PWIG_FLASH_LIMIT) == ops
    assert paired_ops(tb.blob) == set(ops)
    room = whole // 2
    kept = pairs_within(g, ops, room)
    assert kept == sorted(kept) and 0 < len(kept) < len(ops)
    assert len(pairs_section(g, kept)) <= room
    area = {k: int(np.prod(g.tensors[g.ops[k].outputs[0]].shape[1:-1])) for k in ops}
    assert min(area[k] for k in kept) >= max(area[k] for k in ops if k not in kept)
    assert pairs_within(g, ops, len(pairs_section(g, [])) - 1) == []


@needs_qemu
@pytest.mark.parametrize("variant", BUILDS)
def test_pointwise_gradient_kernels_on_qemu_m4_equal_reference(variant, tmp_path):
    made = cases()
    run_list = []
    for name, blob, inputs in made:
        run_list.append(Case(blob, inputs, FLAG_TRAIN | FLAG_OUTPUTS, f"{name} dsp"))
        run_list.append(Case(blob, inputs, FLAG_TRAIN | FLAG_OUTPUTS | FLAG_REF, f"{name} ref"))
    run = run_cases(run_list, workdir=tmp_path, variant=VARIANTS[variant])
    bad = []
    for i, (name, _, _) in enumerate(made):
        dsp, ref = run.of(2 * i), run.of(2 * i + 1)
        if [r.status for r in dsp + ref] != [0] * 6:
            bad.append(f"{name}: status {[r.status for r in dsp + ref]}")
        elif len({r.crc_opt for r in dsp}) != 3:
            bad.append(f"{name}: a step changed nothing")
        elif [r.crc_opt for r in dsp] != [r.crc_opt for r in ref]:
            bad.append(f"{name}: parameters differ from the reference kernels'")
        elif dsp[0].cost_opt >= ref[0].cost_opt:
            bad.append(f"{name}: the DSP kernels did not run ({dsp[0].cost_opt} vs "
                       f"{ref[0].cost_opt})")
    assert not bad, "\n".join(bad)


if __name__ == "__main__":
    pytest.main([__file__, "-q"])
