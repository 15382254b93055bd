"""A refused blob says which check refused it, in one line (tp_fault_text): the same line from
the host C library (the ctypes engine raises with it) and from a board (the device's ERROR text).
Also tp_session_init's memory contract: an arena or params region that is not 8-byte aligned is
refused with TP_ERR_ARG and the check that says so."""

from __future__ import annotations

import ctypes
import re
import struct
import zlib

import pytest
from test_device_host import load_ir_model
from tinyprop import blob_layout
from tinyprop.device.boards import BOOT_TIMEOUT
from tinyprop.device.device import Device
from tinyprop.device.firmware import build_device_firmware
from tinyprop.device.link import Link, PipeTransport
from tinyprop.device.runners import start_host_board
from tinyprop.engines.base import BlobModel
from tinyprop.engines.native import (
    NativeEngine,
    NativeError,
    Requirements,
    aligned_buffer,
    blob_fault,
    fault_text,
    load_library,
    status_name,
)
from tinyprop.errors import DeviceError

TRAN_GRAD_IN0 = 8  # TP_TRAN_GRAD_IN0 (tp_blob.h): the record propagates to its op's input 0


def section(blob: bytes, sid: bytes) -> dict:
    """A section's table entry (id, offset, size)."""
    table, entry = blob_layout.HEADER.size, blob_layout.SECTION
    entries = (entry.unpack(blob, table + i * entry.size)
               for i in range(blob_layout.HEADER.unpack(blob)["n_sections"]))
    return next(s for s in entries if s["id"] == sid)


def patched(blob: bytes, at: int, fmt: str, value) -> bytes:
    """The blob with one field rewritten at `at` and its CRC made right again: the field checks,
    not the CRC, must refuse it."""
    raw = bytearray(blob)
    struct.pack_into(fmt, raw, at, value)
    raw[-4:] = struct.pack("<I", zlib.crc32(bytes(raw[:-4])))
    return bytes(raw)


def field_at(blob: bytes, sid: bytes, record: blob_layout.Record, index: int, name: str,
             header: int = 0) -> int:
    """The offset in the blob of field `name` of record `index` of a section (after `header`
    bytes of it)."""
    return section(blob, sid)["offset"] + header + record.size * index + record.field(name).offset


def tran_records(blob: bytes) -> int:
    """Where TRAN's op records start in the section: after its header and offset arrays."""
    n_tensors = blob_layout.TRAN_HEADER.unpack(blob, section(blob, b"TRAN")["offset"])["n_tensors"]
    return blob_layout.TRAN_HEADER.size + 2 * blob_layout.TRAN_OFFSET.size * n_tensors


def corrupted() -> dict[str, tuple[bytes, str]]:
    """Three blobs, each with one field wrong, and the line the loader must refuse it with."""
    blob = load_ir_model().blob
    data_len = section(blob, b"DATA")["size"]
    return {
        # op 2, a 3x3 depthwise convolution, claims a 2-row kernel: its weights are 3x3
        "op shape": (patched(blob, field_at(blob, b"OPS ", blob_layout.OP, 2, "k"), "<B", 2),
                     "TP_ERR_BLOB_INVALID: OPS record 2: the operands' shapes, quantization or "
                     "parameter counts do not fit the op's kind (check op_shapes)"),
        # tensor 7, op 2's weights, placed at the end of DATA
        "tensor bounds": (patched(blob, field_at(blob, b"TENS", blob_layout.TENSOR, 7, "offset"),
                                  "<I", data_len),
                          "TP_ERR_BLOB_BOUNDS: TENS record 7 field offset: a constant's data "
                          "outside DATA (check tensor_data)"),
        # TRAN record 3 (op 6, the classifier) says it trains one row; its op holds two
        "training record": (patched(blob, field_at(blob, b"TRAN", blob_layout.TRAN_OP, 3, "n_sel",
                                                   tran_records(blob)), "<I", 1),
                            "TP_ERR_BLOB_INVALID: TRAN record 3 field n_sel: n_sel differs from "
                            "the op's held rows (check tran_n_sel)"),
    }


CASES = sorted(corrupted())


@pytest.mark.parametrize("case", CASES)
def test_host_library_names_the_check(case):
    blob, line = corrupted()[case]
    assert blob_fault(blob) == line
    with pytest.raises(NativeError, match=re.escape(f"refused to load it: {line})")):
        NativeEngine(BlobModel("corrupted", blob))


def test_records_out_of_order_are_refused():
    """The training step walks the TRAN records beside the ops: they must ascend."""
    blob = load_ir_model().blob
    at = field_at(blob, b"TRAN", blob_layout.TRAN_OP, 2, "op", tran_records(blob))
    assert blob_fault(patched(blob, at, "<H", 3)) == (
        "TP_ERR_BLOB_INVALID: TRAN record 2 field op: records not of ascending ops in "
        "[first, last] after the tiled stage (check tran_order)")


def test_overlapping_gradient_buffers_are_refused():
    """An op's input gradient buffer must not overlap its output's, which the backward reads
    while it writes the input's (the fuzzer's find: a row copy over itself), unless it is the
    same buffer (the planner's in-place RESHAPE)."""
    blob = load_ir_model().blob
    tran = section(blob, b"TRAN")["offset"]
    n_tensors = blob_layout.TRAN_HEADER.unpack(blob, tran)["n_tensors"]
    grad_offset = tran + blob_layout.TRAN_HEADER.size + blob_layout.TRAN_OFFSET.size * n_tensors
    n_ops = blob_layout.TRAN_HEADER.unpack(blob, tran)["n_ops"]
    j, record = next((j, r) for j in range(n_ops) if (r := blob_layout.TRAN_OP.unpack(
        blob, tran + tran_records(blob) + j * blob_layout.TRAN_OP.size))["flags"] & TRAN_GRAD_IN0)
    op = blob_layout.OP.unpack(blob, section(blob, b"OPS ")["offset"] +
                               record["op"] * blob_layout.OP.size)
    at = grad_offset + 4 * op["output"]
    input_grad = struct.unpack_from("<I", blob, grad_offset + 4 * op["inputs"][0])[0]
    assert blob_fault(blob) == "TP_OK" and struct.unpack_from("<I", blob, at)[0] != input_grad
    # the output's (smaller) buffer 8 bytes into the input's: inside the arena, overlapping
    assert blob_fault(patched(blob, at, "<I", input_grad + 8)) == (
        f"TP_ERR_BLOB_INVALID: TRAN record {j} field flags: an input's gradient buffer overlaps "
        "its op's output's, other than as the same buffer (check tran_gradient_overlap)")


def test_pairs_that_do_not_match_their_weights_are_refused(tmp_path):
    """PWIG (the DSP 1x1 input gradient's weights in pairs) is read whole by the loader: a
    pair's word that is not its rows' weights, a channel list that leaves a nonzero row out, a
    record on an op without an input gradient are each refused by their check; random
    corruption of the section is refused with a blob status, or the blob infers without a
    fault under ASan and UBSan."""
    import numpy as np
    from test_blob import DRIVER, byte_corrupted, refused_or_safe, run_driver
    from test_kernels_dsp_pw import _case
    from tinyprop.device.firmware import build_program as build_c_program
    from tinyprop.status import status_code

    _, blob, _ = _case("pairs-zero", 14, (3, 7, 12), 12, 50, None, "int8",
                       zero=[0, 1, 5, 6, 7, 8, 20, 31, 33, 34, 40, 44, 45, 48])
    sec = section(blob, b"PWIG")
    rec = sec["offset"] + blob_layout.PWIG_HEADER.size
    first = blob_layout.PWIG_OP.unpack(blob, rec)
    assert blob_fault(blob) == "TP_OK" and first["op"] == 1
    end = sec["offset"] + sec["size"] - 1  # the last pair's last byte
    assert blob_fault(patched(blob, end, "<B", blob[end] ^ 1)) == (
        "TP_ERR_BLOB_INVALID: PWIG record 0 field offset: a pair's words are not the listed "
        "rows' weights (check pairs_weights)")
    # the first listed channel made 0, a zero row: channel 2's nonzero row left out
    assert blob_fault(patched(blob, sec["offset"] + first["offset"], "<H", 0)) == (
        "TP_ERR_BLOB_INVALID: PWIG record 0 field n_live: channels not ascending inside the "
        "op's, or an unlisted nonzero row (check pairs_channels)")
    # op 0 reads the model's input: no input gradient
    assert blob_fault(patched(blob, rec, "<H", 0)) == (
        "TP_ERR_BLOB_INVALID: PWIG record 0 field op: ops not ascending, or a record without "
        "its op's TRAN input gradient (check pairs_order)")
    rng = np.random.default_rng(7)
    where = (sec["offset"], sec["size"])
    blobs = [byte_corrupted(blob, where, rng, i) for i in range(120)]
    rows = run_driver(build_c_program(DRIVER, sanitize=True), blobs, tmp_path)
    refused_or_safe(rows)
    assert sum(st != status_code("TP_OK") for st, _ in rows) > 100


@pytest.mark.parametrize("case", CASES)
def test_board_sends_the_same_line(case, tmp_path):
    blob, line = corrupted()[case]
    firmware = build_device_firmware("host", blob)
    with start_host_board(firmware, tmp_path, timeout=60) as run, \
            Link(PipeTransport(run.proc, "host board")) as link:
        dev = Device(link)
        assert dev.hello(BOOT_TIMEOUT).blob_id == 0  # nothing bound
        with pytest.raises(DeviceError) as refused:
            dev.reset()
    assert str(refused.value).endswith(f"({line})")  # the ERROR text, after its status
    assert any(text == f"model blob rejected at boot: {line}" for text in link.logs)


def session_init(blob: bytes, arena_shift: int, params_shift: int) -> tuple[str, str]:
    """(status, fault line) of tp_session_init given arena and params `shift` bytes past an
    8-byte boundary."""
    lib = load_library()
    req = Requirements()
    assert lib.tp_blob_requirements(blob, len(blob), ctypes.byref(req)) == 0
    arena, params = aligned_buffer(req.arena_train + 8), aligned_buffer(req.params + 8)
    session = ctypes.create_string_buffer(lib.tp_session_size())
    st = lib.tp_session_init(session, blob, len(blob),
                             ctypes.addressof(arena) + arena_shift, req.arena_train,
                             ctypes.addressof(params) + params_shift, req.params)
    return status_name(st), fault_text(lib.tp_session_fault(session).contents)


def test_session_init_refuses_misaligned_memory():
    blob = load_ir_model().blob
    assert session_init(blob, 0, 0) == ("TP_OK", "TP_OK")
    for shift in (1, 4):
        assert session_init(blob, shift, 0) == (
            "TP_ERR_ARG", "TP_ERR_ARG: memory: the arena does not start at a multiple of "
            "TP_MEMORY_ALIGN (8) (check arena_align)")
        assert session_init(blob, 0, shift) == (
            "TP_ERR_ARG", "TP_ERR_ARG: memory: the params region does not start at a multiple "
            "of TP_MEMORY_ALIGN (8) (check params_align)")
