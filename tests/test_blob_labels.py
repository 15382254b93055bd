"""The LABL section: a blob carries its class names. The Python writer and reader round trip
them, the C loader (host library, through ctypes) accepts a blob with them and tp_class_name
returns each, refuses each corrupted LABL naming its check, and a blob without LABL has the
bytes it always had and no names."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from opgen import small_classifier
from test_blob_faults import patched, section
from tinyprop import blob_layout
from tinyprop.compile.blob import pack_blob, read_blob
from tinyprop.compile.scheme import parse_scheme
from tinyprop.compile.train_plan import build_program
from tinyprop.engines.base import BlobModel
from tinyprop.engines.native import NativeEngine, blob_fault, load_library
from tinyprop.errors import TinypropError

NAMES = ("no_person", "persön")  # a non-ASCII name: UTF-8 through C and back


def blob_of(labels=None) -> bytes:
    graph = small_classifier()
    program = build_program(graph, parse_scheme(graph, "last:2"))
    return pack_blob(graph, zlib.crc32(graph.name.encode()), train=program, labels=labels)


def test_round_trip_and_c_names():
    blob = blob_of(NAMES)
    assert read_blob(blob).labels == NAMES
    engine = NativeEngine(BlobModel("labelled", blob))
    assert engine.class_names() == NAMES
    assert load_library().tp_class_name(engine._session, len(NAMES)) is None  # out of range
    without = NativeEngine(BlobModel("plain", blob_of()))
    assert without.class_names() is None and read_blob(blob_of()).labels is None
    x = np.random.default_rng(1).integers(-128, 128, engine.input_shape[1:]).astype(np.int8)
    assert np.array_equal(engine.infer(x), without.infer(x))  # names change no computation


def test_labels_add_one_section_only():
    """LABL comes last and alone: every other section of a labelled blob is the plain one's
    (and the plain blob has no LABL: fingerprint.py checks its bytes against main's)."""
    plain, labelled = read_blob(blob_of()), read_blob(blob_of(NAMES))
    assert "LABL" not in plain.sections
    assert {k: v for k, v in labelled.sections.items() if k != "LABL"} == plain.sections


def test_writer_refuses_a_wrong_count():
    with pytest.raises(TinypropError, match="3 class names for a model with 2 outputs"):
        blob_of(("a", "b", "c"))


def lines() -> dict[str, tuple[bytes, str]]:
    """A labelled blob broken three ways (CRC made right), and the line the loader refuses
    each with."""
    blob = blob_of(("ab", "cd"))  # LABL: header, "ab\0cd\0"
    labl = section(blob, b"LABL")["offset"]
    body = labl + blob_layout.LABL_HEADER.size
    return {
        "count": (patched(blob, labl, "<H", 3),
                  "TP_ERR_BLOB_INVALID: LABL field n_labels: shorter than its header, reserved "
                  "not 0, or n_labels is not n_classes (check labels_count)"),
        "unterminated": (patched(blob, body + 5, "<B", ord("e")),  # "cde" runs to the end
                         "TP_ERR_BLOB_INVALID: LABL record 1: a class name empty or not "
                         "NUL-terminated inside the section (check labels_text)"),
        "trailing": (patched(blob, body + 4, "<B", 0),  # "ab", "c", then one byte more
                     "TP_ERR_BLOB_INVALID: LABL: bytes after the last class name "
                     "(check labels_trailing)"),
    }


@pytest.mark.parametrize("case", sorted(lines()))
def test_corrupted_labels_are_refused(case):
    blob, line = lines()[case]
    assert blob_fault(blob) == line
    with pytest.raises(TinypropError, match="class names .LABL. are corrupted"):
        read_blob(blob)
