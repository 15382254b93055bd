"""A new op kind is a row in firmware/core/tp_ops.h and its entries, nothing else in C: the core
built with one extra row from the compiler (TP_OPS_EXTRA) and its check and forward entry from a
test file (tests/c/test_op_extra.c) loads, runs and trains a blob using it, bit for bit as the
op it stands in for; the kind stays unknown (refused by the loader) to the core without the row,
and a kind past the table is refused by the core with it."""

from __future__ import annotations

import struct
import subprocess
import zlib

from opgen import small_classifier
from tinyprop.compile.blob import HEADER, OP, SECTION, pack_blob
from tinyprop.compile.scheme import parse_scheme
from tinyprop.compile.train_plan import build_program as build_train_program
from tinyprop.device.firmware import PROGRAM_FLAGS, core_cflags, core_sources
from tinyprop.engines.native import blob_status
from tinyprop.frontend.ops import spec
from tinyprop.paths import REPO_ROOT as REPO

TEST_COPY = 11  # the extra row's code: the next after the list's
ROW = f"TP_OPS_EXTRA(X)=X(TEST_COPY, {TEST_COPY}, test_copy, 0, 1, 0, 0, 0)"


def with_kind(blob: bytes, old: int, new: int) -> bytes:
    """The blob with every op of kind `old` made kind `new`, its CRC trailer redone."""
    raw = bytearray(blob)
    n_sec = struct.unpack_from("<H", raw, 16)[0]
    for i in range(n_sec):
        sid, off, size = struct.unpack_from("<4sII", raw, HEADER.size + SECTION.size * i)
        if sid == b"OPS ":
            ops = [off + k for k in range(0, size, OP.size) if raw[off + k] == old]
    assert ops, f"no op of kind {old}"
    for at in ops:
        raw[at] = new
    raw[-4:] = struct.pack("<I", zlib.crc32(bytes(raw[:-4])))
    return bytes(raw)


def test_an_op_kind_added_by_a_row_loads_runs_and_trains(tmp_path):
    exe = tmp_path / "test_op_extra"
    subprocess.run(["gcc", *core_cflags(), *PROGRAM_FLAGS, f"-D{ROW}", "-o", str(exe),
                    str(REPO / "tests" / "c" / "test_op_extra.c"), *map(str, core_sources()),
                    "-lm"], check=True)
    graph = small_classifier()
    outputs = {}
    for grad in ("float32", "int8"):  # both gradient paths of the training table
        program = build_train_program(graph, parse_scheme(graph, "last:2"), grad=grad)
        blob = pack_blob(graph, zlib.crc32(graph.name.encode()), train=program)
        copy = with_kind(blob, spec("RESHAPE").code, TEST_COPY)
        past = with_kind(blob, spec("RESHAPE").code, TEST_COPY + 1)
        paths = []
        for name, b in (("reshape", blob), ("copy", copy), ("past", past)):
            paths.append(tmp_path / f"{grad}-{name}.tpb")
            paths[-1].write_bytes(b)
        out = subprocess.run([str(exe), *map(str, paths)], capture_output=True, text=True,
                             check=True, timeout=120).stdout.splitlines()
        reshape, copy_line, past_line = out
        # the same steps, losses, outputs and params; only the new entry counts its runs
        assert reshape.startswith("TP_OK step TP_OK") and reshape.endswith(" runs 0"), reshape
        assert copy_line.rsplit(" runs ", 1)[0] == reshape.rsplit(" runs ", 1)[0]
        assert int(copy_line.rsplit(" runs ", 1)[1]) == 4  # three steps' forward and one infer
        assert past_line == "TP_ERR_BLOB_INVALID", past_line
        # the core without the row does not know the kind: its loader refuses it
        assert blob_status(copy) == "TP_ERR_BLOB_INVALID"
        outputs[grad] = reshape
    assert outputs["float32"] != outputs["int8"]  # two programs, not one run twice
