"""Blob v2: the Python writer/reader round trip, and the C loader (firmware/core/blob/) on good,
truncated, bit-flipped, oversized and field-corrupted blobs, run under ASan+UBSan through a small C
driver (tests/c/test_blob_loader.c): every bad blob gets its own status, nothing crashes, and
whatever the loader accepts runs through tp_infer without a memory error."""

from __future__ import annotations

import struct
import subprocess
import zlib

import numpy as np
import pytest
from tinyprop.compile.blob import HEADER, OP, SECTION, TENSOR, VERSION, pack_blob, read_blob
from tinyprop.device.firmware import build_program
from tinyprop.engines.native import blob_status
from tinyprop.frontend.opparams import all_op_params
from tinyprop.frontend.ops import spec
from tinyprop.frontend.tflite_reader import read_tflite
from tinyprop.paths import REPO_ROOT as REPO
from tinyprop.status import status_code

DRIVER = REPO / "tests" / "c" / "test_blob_loader.c"


@pytest.fixture(scope="module")
def vww(vww_model_path):
    graph = read_tflite(vww_model_path)
    return graph, pack_blob(graph, zlib.crc32(vww_model_path.read_bytes()))


@pytest.fixture(scope="module")
def san_driver():
    return build_program(DRIVER, sanitize=True)


def run_driver(exe, blobs: list[bytes], tmp_path) -> list[tuple[int, int]]:
    """(requirements status, infer status or -1) for each blob, from the sanitized driver."""
    bundle = tmp_path / "bundle.bin"
    bundle.write_bytes(b"".join(struct.pack("<I", len(b)) + b for b in blobs))
    proc = subprocess.run([str(exe), str(bundle), "7"], capture_output=True, text=True,
                          check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [tuple(map(int, line.split()[:2])) for line in proc.stdout.splitlines()]
    assert len(rows) == len(blobs)
    return rows


def with_crc(raw: bytearray) -> bytes:
    raw[-4:] = struct.pack("<I", zlib.crc32(bytes(raw[:-4])))
    return bytes(raw)


def byte_corrupted(raw: bytes, where: tuple[int, int], rng, i: int) -> bytes:
    """raw with one byte of its span where = (offset, size) replaced (odd i) or one bit of it
    flipped (even i), the CRC made right again: the field checks, not the CRC, must see it."""
    b = bytearray(raw)
    pos = where[0] + int(rng.integers(0, where[1]))
    b[pos] = int(rng.integers(0, 256)) if i % 2 else b[pos] ^ (1 << int(rng.integers(0, 8)))
    return with_crc(b)


def refused_or_safe(rows: list[tuple[int, int]]) -> set[int]:
    """The driver's rows of corrupted blobs: each refused with a blob status, or, loaded, it
    infers without a fault (under the sanitizers); returns the refusals' statuses."""
    from tinyprop.status import status_code

    ok = status_code("TP_OK")
    refused = {st for st, _ in rows if st != ok}
    assert refused <= {status_code("TP_ERR_BLOB_BOUNDS"), status_code("TP_ERR_BLOB_INVALID")}
    assert all(inf == ok for st, inf in rows if st == ok)
    return refused


def test_round_trip_matches_graph(vww):
    graph, raw = vww
    blob = read_blob(raw)
    assert blob.blob_id == zlib.crc32(raw[:-4]) == int.from_bytes(raw[-4:], "little")
    assert (blob.input, blob.output, blob.n_classes) == (graph.inputs[0], graph.outputs[0], 2)
    for t, bt in zip(graph.tensors, blob.tensors, strict=True):
        if t.dtype not in ("int8", "int32"):
            continue
        assert bt.shape == t.shape
        if t.scale.size:
            assert bt.scale == pytest.approx(float(t.scale[0]), rel=1e-7)
            assert bt.zero_point == int(t.zero_point[0])
        if t.is_const:
            assert blob.data(bt.offset, t.size, t.data.dtype).tobytes() == t.data.tobytes()
            if t.scale.size > 1:
                assert np.array_equal(blob.data(bt.scales_offset, bt.n_scales, np.float32),
                                      t.scale.astype(np.float32))
    for op, bop, p in zip(graph.ops, blob.ops, all_op_params(graph), strict=True):
        assert bop.kind == spec(op.kind).code and bop.output == op.outputs[0]
        assert [i for i in bop.inputs if i != 0xFFFF] == [i for i in op.inputs if i >= 0]
        assert (bop.in_zp, bop.out_zp, bop.act_min, bop.act_max) == (
            p.in_zp, p.out_zp, p.act_min, p.act_max)
        n = bop.n_mult
        if n:
            arr = blob.data(bop.mult_offset, 2 * n, np.int32)
            assert np.array_equal(arr[:n], np.concatenate([p.mult, p.mult2]))
            assert np.array_equal(arr[n:], np.concatenate([p.shift, p.shift2]))
        if "stride" in p.geometry:
            assert bop.stride == p.geometry["stride"] and bop.pad == p.geometry["pad"]


def test_c_loader_accepts_and_reports_requirements(vww, san_driver, tmp_path):
    _, raw = vww
    assert blob_status(raw) == "TP_OK"
    (st, inf), = run_driver(san_driver, [raw], tmp_path)
    assert (st, inf) == (status_code("TP_OK"), status_code("TP_OK"))


def test_truncated_oversized_and_header_errors(vww, san_driver, tmp_path):
    _, raw = vww
    rng = np.random.default_rng(1)
    cuts = sorted({0, 1, 3, 4, 20, 47, 51, 52, 60, len(raw) - 1, len(raw) - 4,
                   *rng.integers(53, len(raw) - 1, 25).tolist()})
    cases = [(raw[:c], "TP_ERR_BLOB_TRUNCATED") for c in cuts]
    cases[0:1] = [(b"", "TP_ERR_BLOB_TRUNCATED")]
    huge = bytearray(raw)
    huge[8:12] = struct.pack("<I", 0xFFFFFFF0)  # declares more than the buffer holds
    cases += [
        (bytes(huge), "TP_ERR_BLOB_TRUNCATED"),
        (raw + bytes(16), "TP_ERR_BLOB_SIZE"),  # buffer longer than declared
        (b"TFL3" + raw[4:], "TP_ERR_BLOB_MAGIC"),
        (raw[:4] + struct.pack("<H", VERSION + 1) + raw[6:], "TP_ERR_BLOB_VERSION"),
        (with_crc(bytearray(raw[:6] + struct.pack("<H", 40) + raw[8:])), "TP_ERR_BLOB_INVALID"),
        (raw[:-1] + bytes([raw[-1] ^ 1]), "TP_ERR_BLOB_CRC"),
    ]
    rows = run_driver(san_driver, [b for b, _ in cases], tmp_path)
    for (blob, want), (st, _) in zip(cases, rows, strict=True):
        assert st == status_code(want), (len(blob), want, st)


def test_random_bit_flips_are_refused(vww, san_driver, tmp_path):
    _, raw = vww
    rng = np.random.default_rng(2)
    blobs = []
    for _ in range(40):
        b = bytearray(raw)
        for pos in rng.integers(0, len(raw), rng.integers(1, 4)):
            b[pos] ^= 1 << int(rng.integers(0, 8))
        blobs.append(bytes(b))
    rows = run_driver(san_driver, blobs, tmp_path)
    assert all(st != status_code("TP_OK") for st, _ in rows)
    assert sum(st == status_code("TP_ERR_BLOB_CRC") for st, _ in rows) >= 30


def test_field_corruption_with_valid_crc_never_crashes(vww, san_driver, tmp_path):
    """Flips inside the header, section table, TENS and OPS records with the CRC recomputed: the
    field checks themselves must hold. Accepted blobs run tp_infer under the sanitizers."""
    _, raw = vww
    blob = read_blob(raw)
    n_sec = struct.unpack_from("<H", raw, 16)[0]
    table = HEADER.size + n_sec * SECTION.size
    tens_off = raw.index(blob.sections["TENS"][:TENSOR.size])
    ops_off = raw.index(blob.sections["OPS"][:OP.size])
    regions = [(0, table), (tens_off, len(blob.sections["TENS"])),
               (ops_off, len(blob.sections["OPS"]))]
    rng = np.random.default_rng(3)
    blobs = []
    for i in range(150):
        start, size = regions[i % 3]
        b = bytearray(raw)
        pos = start + int(rng.integers(0, size))
        b[pos] = int(rng.integers(0, 256)) if i % 2 else b[pos] ^ (1 << int(rng.integers(0, 8)))
        blobs.append(with_crc(b))
    rows = run_driver(san_driver, blobs, tmp_path)
    refused = {st for st, _ in rows if st != status_code("TP_OK")}
    assert refused <= {status_code(n) for n in ("TP_ERR_BLOB_TRUNCATED", "TP_ERR_BLOB_VERSION",
                                           "TP_ERR_BLOB_SIZE", "TP_ERR_BLOB_MAGIC",
                                           "TP_ERR_BLOB_BOUNDS", "TP_ERR_BLOB_INVALID")}
    assert {status_code("TP_ERR_BLOB_INVALID"), status_code("TP_ERR_BLOB_BOUNDS")} <= refused
    # -1: the driver skipped a run whose corrupted header asks for more than 64 MB
    ok = status_code("TP_OK")
    assert all(inf in (ok, -1) for st, inf in rows if st == ok)


def test_training_program_format_and_sinks_are_checked():
    """TRAN names the gradient format and marks sinks (program.F2_*): the loader refuses an
    unknown format, sinks with float32 maps, a sink without its reducing writer and a reducing
    writer without its sink."""
    from opgen import small_classifier
    from tinyprop.compile.scheme import parse_scheme
    from tinyprop.compile.train_plan import build_program
    from tinyprop.engines.native import blob_status
    from tinyprop.program import F2_REDUCE_IN0, F2_REDUCED, TRAN_HEADER, TRAN_OP

    graph = small_classifier()
    prog = build_program(graph, parse_scheme(graph, "bias-only"), grad="int16")
    assert prog.ops[0].flags2 == F2_REDUCED and prog.ops[1].flags2 & F2_REDUCE_IN0
    raw = pack_blob(graph, 1, train=prog)
    assert blob_status(raw) == "TP_OK"
    tran = raw.index(prog.pack())
    records = tran + TRAN_HEADER.size + 8 * len(graph.tensors)
    order = sorted(prog.ops)

    def patched(offset: int, value: int) -> bytes:
        b = bytearray(raw)
        b[offset] = value
        return with_crc(b)

    assert blob_status(patched(tran + 6, 3)) == "TP_ERR_BLOB_INVALID"  # no such format
    # float32 with sinks: its maps no longer fit the plan, or the sink is refused
    assert blob_status(patched(tran + 6, 0)) in ("TP_ERR_BLOB_BOUNDS", "TP_ERR_BLOB_INVALID")
    sink = records + TRAN_OP.size * order.index(0) + 3
    writer = records + TRAN_OP.size * order.index(1) + 3
    assert blob_status(patched(sink, 0)) == "TP_ERR_BLOB_INVALID"
    assert blob_status(patched(writer, 0)) == "TP_ERR_BLOB_INVALID"
    assert blob_status(patched(writer, 0x80)) == "TP_ERR_BLOB_INVALID"  # unknown flag
