"""Integer gradient maps: the C core's primitives (firmware/core/tp_gradmap.c, called through
the host library) equal tinyprop.reference.gradmap's on random and corner cases, and the rules
keep their promises: the exponent of a map is the one its exact maximum asks for, rounding is
to nearest (half to even) within one unit of the map's last place, a fold's products fit int32.

Whole training steps with integer maps (C == NumPy, bit for bit) are tests/test_kernels.py's and
tests/test_training.py's."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from tinyprop.engines.native import load_library
from tinyprop.program import GRAD_FORMATS
from tinyprop.reference import gradmap as gm

i64, i32, u32, u64, f32c = (ctypes.c_int64, ctypes.c_int32, ctypes.c_uint32, ctypes.c_uint64,
                            ctypes.c_float)


@pytest.fixture(scope="module")
def lib():
    lib = load_library()
    for name, args, res in (
            ("tp_gm_rshift", [i64, i32], i64), ("tp_gm_rdiv", [i64, i64], i64),
            ("tp_gm_to_f32", [i64, i32, f32c], f32c), ("tp_gm_round_f32", [f32c], i64),
            ("tp_gm_bitlen", [u64], u32), ("tp_gm_fold_bits", [u32], u32),
            ("tp_gm_scale_parts", [f32c, ctypes.POINTER(u32), ctypes.POINTER(i32)], None),
            ("tp_gm_begin", [ctypes.c_void_p, ctypes.c_void_p, u32, u32, u32, u32,
                             ctypes.c_void_p, i32], None),
            ("tp_gm_row_i32", [ctypes.c_void_p, u32, ctypes.c_void_p], None),
            ("tp_gm_begin_sums", [ctypes.c_void_p, ctypes.c_void_p, u32, u32, u32,
                                  ctypes.c_void_p, i32], None),
            ("tp_gm_end", [ctypes.c_void_p], None)):
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, res
    return lib


def _ints(rng, n: int, bits: int) -> np.ndarray:
    mags = rng.integers(0, bits + 1, n)
    return np.array([int(rng.integers(-(1 << int(b)), (1 << int(b)) + 1)) for b in mags], np.int64)


def test_rounding_shifts_and_divisions_equal_numpy(lib):
    rng = np.random.default_rng(1)
    v = np.concatenate([_ints(rng, 3000, 61), [0, 1, -1, 2, -2, 3, -3, 5, -5, 6, -6, 7, -7]])
    s = rng.integers(-20, 70, v.size)
    s = np.where(np.abs(v) >= (1 << 40), np.maximum(s, 0), s)  # left shifts stay exact
    want = gm.rshift(v, s)
    got = [lib.tp_gm_rshift(int(a), int(b)) for a, b in zip(v, s, strict=True)]
    assert np.array_equal(want, got)
    # ties go to the even neighbour, both signs
    assert list(gm.rshift(np.array([1, 3, -1, -3, 5, -5]), 1)) == [0, 2, 0, -2, 2, -2]
    n = rng.integers(1, 50, v.size)
    a = v >> 8
    assert np.array_equal(gm.rdiv(a, n), [lib.tp_gm_rdiv(int(x), int(d))
                                          for x, d in zip(a, n, strict=True)])
    assert list(gm.rdiv(np.array([9, -9, 27, -27, 4]), 18)) == [0, 0, 2, -2, 0]


def test_float_conversions_equal_numpy(lib):
    rng = np.random.default_rng(2)
    s = np.concatenate([_ints(rng, 3000, 62), (1 << 24) + np.arange(-4, 5),
                        [(1 << 25) + 1, (1 << 25) + 3, -((1 << 25) + 1), 0, 1 << 62]])
    e = rng.integers(-160, 10, s.size)
    scale = (np.float32(10.0) ** rng.uniform(-6, 2, s.size)).astype(np.float32)
    for si, ei, sc in zip(s, e, scale, strict=True):
        want = gm.to_f32(np.array([si]), int(ei), sc)[0]
        got = np.float32(lib.tp_gm_to_f32(int(si), int(ei), float(sc)))
        assert want.tobytes() == got.tobytes(), (si, ei, sc, want, got)
    x = np.concatenate([rng.uniform(-2**30, 2**30, 2000).astype(np.float32),
                        np.arange(-8, 8, 0.5, dtype=np.float32)])
    assert np.array_equal(gm.round_f32(x), [lib.tp_gm_round_f32(float(v)) for v in x])
    bits = np.concatenate([rng.integers(0, 0x7F800000, 2000), [0, 1, 0x7FFFFF, 0x800000]])
    m, k = gm.scale_parts(bits.astype(np.uint32).view(np.float32))
    for b, mm, kk in zip(bits, m, k, strict=True):
        cm, ck = u32(), i32()
        lib.tp_gm_scale_parts(float(np.uint32(b).view(np.float32)), ctypes.byref(cm),
                              ctypes.byref(ck))
        assert (cm.value, ck.value) == (mm, kk)
        assert np.float64(mm) * 2.0 ** int(kk) == np.float64(np.uint32(b).view(np.float32))


def test_fold_bits_keep_int32_sums_exact(lib):
    for n in (1, 2, 9, 127, 128, 255, 256, 1000, 2304, 9 * 1024, 1 << 20, 1 << 30):
        bits = gm.fold_bits(n)
        assert lib.tp_gm_fold_bits(n) == bits
        if bits > 1:
            assert n * 127 * ((1 << bits) - 1) < 1 << 31, n
    assert gm.fold_bits(256) == 15  # VWW's widest pointwise layer keeps all of int16


def _c_produce(lib, fmt: str, v: np.ndarray, e_v: int, old: gm.GradMap | None) -> gm.GradMap:
    rows = v.shape[1] if v.ndim == 4 else 1
    n = v.size
    dtype = gm.MAP_DTYPE[fmt]
    buf = np.zeros(8 + n * np.dtype(dtype).itemsize, np.uint8)
    if old is not None:
        buf[:4] = np.frombuffer(np.int32(old.e).tobytes(), np.uint8)
        buf[8:] = np.frombuffer(old.q.astype(dtype).tobytes(), np.uint8)
    writer, shifts = ctypes.create_string_buffer(256), ctypes.create_string_buffer(rows)
    lib.tp_gm_begin(writer, buf.ctypes.data, GRAD_FORMATS[fmt], rows, n // rows,
                    int(old is not None), shifts, e_v)
    acc = np.ascontiguousarray(v.reshape(rows, -1), np.int32)
    for r in range(rows):
        lib.tp_gm_row_i32(writer, r, acc[r].ctypes.data)
    lib.tp_gm_end(writer)
    q = np.frombuffer(buf[8:].tobytes(), dtype).astype(np.int64).reshape(v.shape)
    return gm.GradMap(q, int(np.frombuffer(buf[:4].tobytes(), np.int32)[0]))


@pytest.mark.parametrize("fmt", ["int16", "int8"])
def test_writing_a_map_equals_numpy_and_rounds_to_the_exact_maximum(lib, fmt):
    rng = np.random.default_rng(3)
    bits = gm.MAP_BITS[fmt]
    for case in range(60):
        shape = (1, int(rng.integers(1, 7)), int(rng.integers(1, 6)), int(rng.integers(1, 5)))
        # rows of very different magnitudes: each row's own shift, then the map's
        v = np.concatenate([_ints(rng, int(np.prod(shape[2:])), int(b)) for b in
                            rng.integers(0, 31, shape[1])]).reshape(shape)
        e_v = int(rng.integers(-40, 5))
        old = None
        if case % 3 == 0:  # accumulating onto a map already there, sometimes far apart
            old = gm.GradMap(rng.integers(-(1 << bits) + 1, 1 << bits, shape),
                             e_v + int(rng.integers(-40, 40)))
        want = gm.produce(v, e_v, fmt, old)
        got = _c_produce(lib, fmt, v, e_v, old)
        assert got.e == want.e and np.array_equal(got.q, want.q), case
        exact, e_c = gm.combine(v, e_v, old)
        top = int(np.abs(exact).max())
        if top:
            # the map's exponent is the smallest that fits the exact maximum in `bits`
            assert want.e == e_c + max(gm.bitlen(top) - bits, 0)
            # each value within one unit of the last place of the exact one (two roundings)
            err = np.abs(want.q.astype(np.float64) * 2.0 ** (want.e - e_c) - exact)
            assert err.max() <= 2.0 ** (want.e - e_c), case


@pytest.mark.parametrize("fmt", ["int16", "int8"])
def test_writing_long_rows_and_extreme_values_equals_numpy(lib, fmt):
    """The writer's fast paths: rows stored as they are (shift 0), rounded in 32 bits after a
    clamp (values up to +-(2^31 - 1)), the slow path a -2^31 takes; the end re-rounding rows by
    every shift, int8 rows 4 values a word with a tail, and rows rounding to all zeros."""
    rng = np.random.default_rng(5)
    lo, hi = -(1 << 31), (1 << 31) - 1
    for case in range(80):
        rows, w = int(rng.integers(2, 12)), int(rng.integers(1, 40))
        v = np.concatenate([np.clip(_ints(rng, w, int(b)), lo, hi) for b in
                            rng.integers(0, 32, rows)]).reshape(1, rows, w, 1)
        if case % 4 == 0:  # the largest magnitudes and ties to even at every row shift
            v[0, 0, : min(w, 3), 0] = [hi, lo + 1, hi - 1][: min(w, 3)]
        if case % 8 == 1:
            v[0, -1, 0, 0] = lo
        if case % 8 == 2:  # one row far above the others: they round to zero
            v[0, 0] = hi
            v[0, 1:] = np.clip(v[0, 1:], -(1 << 12), 1 << 12)
        e_v = int(rng.integers(-40, 5))
        want = gm.produce(v, e_v, fmt, None)
        got = _c_produce(lib, fmt, v, e_v, None)
        assert got.e == want.e and np.array_equal(got.q, want.q), case


def test_int8_rows_saturate_and_re_round_every_value_as_numpy(lib):
    """int8 maps' fast paths: rows rounded 4 values a word by every shift 1..23, the values that
    round to +-128 (ties included) saturated wherever they sit (in a word or in the 1-3 values
    after), rows with none; then every int8 value re-rounded by every shift 1..7 at the end (4
    and 8 values a step, the rest one by one)."""
    for s in range(1, 24):
        t = 255 << (s - 1)  # 127.5 2^s: the first magnitude that rounds to 128
        for w in (4, 5, 7, 8, 11):
            for at in range(w):
                row = np.zeros(w, np.int64)
                row[at] = [t, -t, t - 1, -(t - 1), t + 1, -(t + 1)][(at + s) % 6]
                row[(at + 1) % w] = (1 << (s + 7)) - 1 if w > 1 and at % 2 else 1
                v = row.reshape(1, 1, w, 1)
                want = gm.produce(v, 0, "int8")
                got = _c_produce(lib, "int8", v, 0, None)
                assert got.e == want.e and np.array_equal(got.q, want.q), (s, w, at)
    q = np.arange(-127, 128, dtype=np.int64)
    for s in range(1, 8):
        for w in (255, 252, 250):
            v = np.zeros((1, 2, w, 1), np.int64)
            v[0, 0, :, 0] = q[:w]  # shift 0, then re-rounded by s
            v[0, 1, 0, 0] = (1 << (7 + s)) - 1  # the map's shift: s
            want = gm.produce(v, -3, "int8")
            got = _c_produce(lib, "int8", v, -3, None)
            assert got.e == want.e and np.array_equal(got.q, want.q), (s, w)


def test_fold_scales_by_the_channel_and_fits(lib):
    rng = np.random.default_rng(4)
    for _ in range(30):
        q = rng.integers(-32767, 32768, (1, 3, 4, 6))
        q[..., 2] = 0  # a channel with no gradient
        s_w = (np.float32(10.0) ** rng.uniform(-4, -1, 6)).astype(np.float32)
        s_w[4] = np.float32(1e-30)  # a dead channel's scale
        dy = gm.GradMap(q, int(rng.integers(-30, -10)))
        n_terms = int(rng.integers(1, 3000))
        f = gm.fold(dy, s_w, n_terms)
        lim = (1 << gm.fold_bits(n_terms)) - 1
        assert np.abs(f.q).max() <= lim and np.abs(f.q).max() > lim // 4
        real = dy.real() * s_w.astype(np.float64)
        err = np.abs(f.real() - real)
        assert err.max() <= 2.0 ** f.e  # within one unit of dY''s last place


class _Weights(ctypes.Structure):  # tp_weights (firmware/core/kernels/tp_kernels.h)
    _fields_ = [("data", ctypes.c_void_p), ("held_map", ctypes.c_void_p),
                ("held", ctypes.c_void_p), ("n_out", u32), ("row_len", u32),
                ("depthwise", ctypes.c_uint8), ("scales", ctypes.c_void_p), ("n_scales", u32),
                ("scale", f32c)]


class _Map(ctypes.Structure):  # tp_gmap
    _fields_ = [("q", ctypes.c_void_p), ("bytes", u32), ("e", i32)]


class _Fold(ctypes.Structure):  # tp_gm_fold (TP_GM_DEAD_C 256: 8 words of dead channels)
    _fields_ = [("top", i32), ("e", i32), ("bits", u32), ("live", u32), ("no_clamp", u32),
                ("dead", u32 * 8)]


def fold_no_clamp(q: np.ndarray, s_w: np.ndarray, top: int, bits: int, eight: bool) -> bool:
    """tp_gm_fold_of's no_clamp where its int8 passes give ORs (no DSP extension): every live
    channel's bound (the OR of its magnitudes in a pass of 8, else its largest) times m_o,
    shifted by top - k_o and rounded half up, stays below 2^bits."""
    m, k = gm.scale_parts(s_w)
    n_out = q.shape[1]
    mag = np.abs(q.astype(np.int64))
    for o in range(n_out):
        ored = eight and o < n_out // 8 * 8
        b = int(np.bitwise_or.reduce(mag[:, o])) if ored else int(mag[:, o].max())
        sh = top - int(k[o])
        v = b * int(m[o])
        if v == 0:
            continue
        folded = v << -sh if sh <= 0 else (v + (1 << (sh - 1))) >> sh
        if folded >= 1 << bits:
            return False
    return True


@pytest.mark.parametrize("fmt", ["int8", "int16"])
def test_fold_exponent_of_many_channels_equals_numpy(lib, fmt):
    """tp_gm_fold_of's channel classes: int8 maps 8 channels a pass from the OR of the
    magnitudes (a class known to within one, the exact maximum taken for the channels that
    could still raise the largest: few, or more than its list holds), the last channels and
    int16 maps one by one; -128, dead channels and scales, one scale for all. The channels whose
    dY is zero everywhere are marked dead (f.dead). An int8 map of 8k channels with a RELU mask:
    the fold's scan zeroes the values whose mask bit is 0, in place, and the fold is that of
    the masked map. f.no_clamp says whether the channels' bounds fold below 2^bits
    (fold_no_clamp)."""
    rng = np.random.default_rng(9)
    dtype = gm.MAP_DTYPE[fmt]
    lim = 1 << gm.MAP_BITS[fmt]
    for case in range(120):
        n_out = int(rng.choice([1, 7, 8, 13, 16, 40, 64, 128]))
        positions = int(rng.integers(1, 30))
        low = case % 8 == 1  # every class the lower of its two: 90 x 1.4 < 128
        if case % 4 == 1:  # maxima of one bit length: more wait than the list holds
            tops = rng.integers(lim // 2, lim * 45 // 64 if low else lim, n_out)
            q = rng.integers(-tops, tops + 1, (positions, n_out))
        else:
            q = rng.integers(-lim + 1, lim, (positions, n_out)) >> rng.integers(0, 8, n_out)
        if case % 3 == 0:
            q[rng.integers(0, positions), rng.integers(0, n_out)] = -lim  # -128 / -32768
        q[:, rng.random(n_out) < 0.1] = 0
        if case % 2:  # scales of few exponents: many channels of the largest class
            s_w = (2.0 ** rng.integers(-9, -7, n_out) * rng.uniform(1, 1.4 if low else 2, n_out))
        else:
            s_w = 10.0 ** rng.uniform(-4, -1, n_out)
        s_w = s_w.astype(np.float32)
        s_w[rng.random(n_out) < 0.05] = 0.0
        if case % 5 == 4:
            s_w[:] = s_w[0]
        n_terms = int(rng.integers(1, 3000))
        qb = np.ascontiguousarray(q, dtype)
        mask = None
        if fmt == "int8" and n_out % 8 == 0 and case % 3 != 2:  # the RELU mask, in the scan
            kept = rng.random(q.shape) < 0.6
            mask = np.packbits(kept.ravel(), bitorder="little")
            q = np.where(kept, q, 0)
        dy = gm.GradMap(q.astype(np.int64), int(rng.integers(-30, -10)))
        want = gm.fold(dy, s_w, n_terms)
        live = bool(((np.abs(q).max(axis=0, initial=0) * gm.scale_parts(s_w)[0]) > 0).any())
        sc = np.ascontiguousarray(s_w, "<f4")
        w = _Weights(None, None, None, n_out, 1, 0, sc.ctypes.data,
                     n_out if case % 5 != 4 else 1, float(s_w[0]))
        m = _Map(qb.ctypes.data, np.dtype(dtype).itemsize, dy.e)
        f = _Fold()
        lib.tp_gm_fold_of(ctypes.byref(f), ctypes.byref(m), positions, ctypes.byref(w), n_terms,
                          None if mask is None else ctypes.c_void_p(mask.ctypes.data))
        assert np.array_equal(qb, q), case  # the mask applied in place
        assert bool(f.live) == live, case
        if live:
            assert f.e == want.e and f.bits == gm.fold_bits(n_terms), case
            top = want.e - dy.e
            assert f.no_clamp == fold_no_clamp(q, s_w, top, f.bits, fmt == "int8"), case
        dead = np.unpackbits(np.array(f.dead, "<u4").view(np.uint8), bitorder="little")
        assert np.array_equal(dead[:n_out].astype(bool), ~q.any(axis=0)), case
        assert not dead[n_out:].any(), case


def test_sink_sums_equal_numpy(lib):
    """A sink's channel sums of the values whose mask bit is set: channels and rows multiples of
    8 (a channel's mask bits one bit of every few bytes), other counts, rows that begin within
    a pixel, no mask."""
    rng = np.random.default_rng(11)
    lo, hi = -(1 << 31), (1 << 31) - 1
    for case in range(60):
        channels = int(rng.choice([1, 3, 8, 12, 16, 24]))
        rows = int(rng.integers(1, 6))
        row_elems = channels * int(rng.integers(1, 7)) if case % 4 else int(rng.integers(1, 30))
        n = rows * row_elems
        v = rng.integers(lo, hi + 1, n) >> rng.integers(0, 31, n)
        v[rng.integers(0, n)] = lo
        bits = rng.random(n) < 0.6
        use_mask = case % 5 != 0
        mask = np.packbits(bits, bitorder="little") if use_mask else None
        buf = np.zeros(8 + 8 * channels, np.uint8)
        writer = ctypes.create_string_buffer(256)
        lib.tp_gm_begin_sums(writer, buf.ctypes.data, rows, row_elems, channels,
                             None if mask is None else mask.ctypes.data, -7)
        acc = np.ascontiguousarray(v.reshape(rows, row_elems), np.int32)
        for r in range(rows):
            lib.tp_gm_row_i32(writer, r, acc[r].ctypes.data)
        got = np.frombuffer(buf[8:].tobytes(), "<i8")
        keep = bits if use_mask else np.ones(n, bool)
        want = np.array([int(v[(np.arange(n) % channels == c) & keep].sum())
                         for c in range(channels)], np.int64)
        assert np.array_equal(got, want), case
        assert int(np.frombuffer(buf[:4].tobytes(), np.int32)[0]) == -7
