"""The blob layout in one table (host/tinyprop/blob_layout.py): the packer's struct formats
come from it, the committed C header (firmware/core/tp_blob_layout.h) is what it generates, and
the C code reads the blob through the header's names, never at bare offsets."""

from __future__ import annotations

import re

from tinyprop import blob_layout
from tinyprop.compile.blob import HEADER, OP, TENSOR
from tinyprop.paths import REPO_ROOT

HEADER_FILE = REPO_ROOT / "firmware" / "core" / "tp_blob_layout.h"
# the C that reads blob bytes: the views, the checks, the interpreters, the fuzz harness
CORE = REPO_ROOT / "firmware" / "core"
BLOB_READERS = [*(CORE / n for n in ("tp_blob.h", "tp_blob.c", "tp_session.c", "tp_exec.c",
                                      "tp_forward.c", "tp_patch.c", "tp_train.c")),
                *(CORE / "blob").glob("*.[ch]"), REPO_ROOT / "tests" / "fuzz" / "fuzz_blob.c"]
# a blob field read at a number: tp_rd_u32(p + 12), rec[2], b->tile[4], view section + 8
BARE = re.compile(r"tp_rd_[uif](?:16|32)\([^;]*\+ *\d+u?\b|\b(?:p|rec|e|blob)\[\d+\]"
                  r"|->(?:tile|train|ops|tensors|inplace|scratch)\[[^\]]*\d"
                  r"|\b(?:rec|e|p|blob|tile|train|inplace) \+ \d+u?\b")


def test_committed_header_is_current():
    assert HEADER_FILE.read_text() == blob_layout.c_header(), (
        f"{HEADER_FILE.relative_to(REPO_ROOT)} is stale: blob_layout.py changed; regenerate it "
        f"with `PYTHONPATH=host {blob_layout.HEADER_COMMAND}` and commit it")


def test_records_are_the_documented_sizes_and_pack_what_they_unpack():
    assert (HEADER.size, TENSOR.size, OP.size) == (48, 40, 64)
    for record in blob_layout.RECORDS:
        values = [f.offset + 1 if f.type != "char4" else b"ABCD" for f in record.fields
                  for _ in range(1 if f.type == "char4" else f.count) if f.type != "pad"]
        raw = record.struct.pack(*values)
        assert len(raw) == record.size
        fields = record.unpack(raw)
        for f in record.fields:
            if f.type not in ("pad", "char4"):  # each value lands at its field's offset
                first = fields[f.name][0] if f.count > 1 else fields[f.name]
                assert first == f.offset + 1, f.name
                assert f.type == "f32" or raw[f.offset] == f.offset + 1, f.name


def test_c_reads_no_blob_field_at_a_bare_offset():
    bare = [f"{p.relative_to(REPO_ROOT)}:{n}: {line.strip()}" for p in BLOB_READERS
            if p.name != HEADER_FILE.name
            for n, line in enumerate(p.read_text().splitlines(), 1) if BARE.search(line)]
    assert not bare, "read these through tp_blob_layout.h's names:\n" + "\n".join(bare)
