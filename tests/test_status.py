"""One table of statuses (firmware/include/tp_status.h): the host reads it as the C library
names it, every status reaches the host as itself through a real host-board process, and
tp_set_hparams refuses bad hyper-parameters when they are set."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import numpy as np
import pytest
from opgen import random_input, stage_case
from test_device_host import load_ir_model
from tinyprop.compile.blob import c_header, pack_blob, read_blob
from tinyprop.compile.blobfile import TrainingBlob
from tinyprop.compile.patch import plan_stage, stage_splits
from tinyprop.compile.scheme import LayerUpdate, SparseScheme
from tinyprop.compile.train_plan import build_program
from tinyprop.device.boards import open_board
from tinyprop.device.device import Device, write_bulk_file
from tinyprop.device.firmware import build_firmware
from tinyprop.device.link import Link, PipeTransport
from tinyprop.device.protocol import Hello
from tinyprop.device.runners import start_host_board
from tinyprop.engines.native import load_library
from tinyprop.errors import DeviceError
from tinyprop.paths import REPO_ROOT
from tinyprop.reference.backward import ReferenceTrainer
from tinyprop.status import (
    LR_MAX,
    TABLE,
    Status,
    StatusError,
    check_hparams,
    status_message,
    status_name,
)

BOARD_H = REPO_ROOT / "firmware" / "include" / "tp_board.h"


def test_the_host_table_is_the_c_librarys():
    """tinyprop.status parses tp_status.h; the compiled core names every code the same, with
    the same message, and knows no other code."""
    lib = load_library()
    for code in range(0x100):
        name, message = lib.tp_status_name(code).decode(), lib.tp_status_message(code).decode()
        if code in TABLE:
            assert (name, message) == (status_name(code), status_message(code)), hex(code)
        else:
            assert name == "TP_ERR_UNKNOWN", hex(code)
    assert len(TABLE) == len(Status) and LR_MAX == np.float32(1e30)


def test_one_numbering_in_disjoint_ranges_and_every_message_says_what_to_do():
    core, proto, board = range(0x00, 0x40), range(0x40, 0x60), range(0x60, 0x80)
    for status in Status:
        assert status in core or status in proto or status in board, status
        kind, message = TABLE[status][1], TABLE[status][2]
        assert kind == "OK" or (kind in ("INPUT", "FAULT") and ": " in message), status
    assert [s.name for s in Status if TABLE[s][1] == "OK"] == ["TP_OK", "TP_STEP_PENDING",
                                                              "TP_PROTO_MORE"]
    assert {Status.TP_ERR_BLOB_CRC, Status.TP_ERR_BAD_LR} <= {s for s in Status if s in core}
    assert {Status.TP_ERR_BAD_CRC, Status.TP_ERR_BAD_STATE} <= {s for s in Status if s in proto}
    # the board HAL returns minus its statuses (its non-negative results are counts)
    minus = dict(re.findall(r"#define (TP_BOARD_ERR_\w+) \(-\(int\)(TP_ERR_\w+)\)",
                            BOARD_H.read_text()))
    assert len(minus) == 6 and all(Status[s] in board or s == "TP_ERR_ARG"
                                   for s in minus.values())


@pytest.mark.parametrize(("lr", "momentum", "optimizer", "status"), [
    (float("nan"), 0.0, True, Status.TP_ERR_BAD_LR),
    (-1e-9, 0.0, True, Status.TP_ERR_BAD_LR),
    (2e30, 0.0, True, Status.TP_ERR_BAD_LR),
    (0.01, 1.0, True, Status.TP_ERR_BAD_MOMENTUM),
    (0.01, float("nan"), True, Status.TP_ERR_BAD_MOMENTUM),
    (0.01, 0.9, False, Status.TP_ERR_NO_OPTIMIZER),
])
def test_check_hparams_names_the_input_and_the_fix(lr, momentum, optimizer, status):
    with pytest.raises(StatusError) as err:
        check_hparams(lr, momentum, optimizer, "run.tpb")
    assert err.value.status == status and err.value.exit_code == 2
    assert str(err.value).startswith("run.tpb: lr ") and status.name in str(err.value)
    assert "\n" not in str(err.value) and "--" in str(err.value)  # the flag to change
    check_hparams(1e30, 0.0, None)  # the limits themselves pass; optimizer None: not known


# ---- through a real host-board process ----


def row_band_blob() -> tuple[TrainingBlob, np.ndarray, np.ndarray]:
    """A small blob that reads its input in row bands (convert --input-rows), two samples."""
    g = stage_case(3).graph
    head = len(g.ops) - 2
    rows = list(range(g.tensors[g.ops[head].inputs[1]].shape[0]))
    scheme = SparseScheme("test", {head: LayerUpdate(head, True, rows)})
    stage = next(st for n in stage_splits(g) for grid in ((2, 2), (3, 2), (1, 3))
                 if (st := plan_stage(g, n, grid, True)) is not None)
    prog = build_program(g, scheme, patch=stage)
    rng = np.random.default_rng(3)
    xs = np.stack([random_input(g, rng) for _ in range(2)])
    return TrainingBlob(g, prog, pack_blob(g, 3, train=prog), source=Path("rows")), xs, \
        np.array([0, 1])


@pytest.mark.slow  # builds the host board with the blob
def test_a_core_bad_input_reaches_the_host_as_itself(tmp_path):
    """The row source of a row-band blob fails (its bulk file cut short after BULK_OPEN): the
    core's TP_ERR_BAD_INPUT comes back in the ERROR frame as it is (it was INTERNAL), and the
    host shows its message; the board keeps serving."""
    tb, xs, ys = row_band_blob()
    write_bulk_file(tmp_path / "rows.bin", xs, ys)
    with open_board("host", tb.blob, tmp_path) as dev:
        assert dev.bulk_open("rows.bin") == 2
        (tmp_path / "rows.bin").write_bytes((tmp_path / "rows.bin").read_bytes()[:40])
        with pytest.raises(DeviceError) as err:
            dev.train_bulk(0)
        assert err.value.status == Status.TP_ERR_BAD_INPUT and err.value.exit_code == 2
        assert f"TP_ERR_BAD_INPUT: {status_message(Status.TP_ERR_BAD_INPUT)}" in str(err.value)
        assert dev.hello().blob_id == struct.unpack("<I", tb.blob[-4:])[0]


@pytest.mark.slow  # builds the host board with an arena 8 bytes short
def test_arena_too_small_reaches_the_host_as_itself(tmp_path):
    """Firmware whose arena is smaller than its blob needs: the core's TP_ERR_ARENA_TOO_SMALL
    answers every request as it is (it was 0x0100 + 8), with its message."""
    blob = load_ir_model().blob
    need = read_blob(blob)
    arena = max(need.arena_bytes, need.train_arena_bytes) - 8
    header = tmp_path / "model_tpb.h"
    header.write_text(f"{c_header(blob)}#define TP_MODEL_ARENA_BYTES {arena}u\n"
                      f"#define TP_MODEL_PARAMS_BYTES {need.params_bytes}u\n")
    exe = build_firmware("host", variables={"BLOB": str(header), "BLOB_TAG": "arena-short"})
    with start_host_board(exe, tmp_path) as run, \
            Link(PipeTransport(run.proc, "host board (arena short)")) as link:
        dev = Device(link)
        assert dev.hello().blob_id == 0  # nothing bound
        assert any("TP_ERR_ARENA_TOO_SMALL" in text for text in link.logs)
        with pytest.raises(DeviceError) as err:
            dev.set_hparams(0.05)
        assert err.value.status == Status.TP_ERR_ARENA_TOO_SMALL
        assert status_message(Status.TP_ERR_ARENA_TOO_SMALL) in str(err.value)
        assert link.request(Hello(), 0x81).board == "host"


@pytest.mark.slow  # builds the host board with the blob
def test_a_bad_hparam_is_refused_at_set_time_by_the_board(tmp_path):
    """SET_HPARAMS with a bad learning rate or momentum: tp_set_hparams' own status in the
    ERROR frame (exit code 2), and the board trains on with the hyper-parameters it had, bit
    for bit as the reference does."""
    m = load_ir_model()
    ref = ReferenceTrainer(m.program, 0.05, 7)
    with open_board("host", m.blob, tmp_path) as dev:
        dev.set_hparams(0.05, 7)
        for lr, momentum, status in [(float("nan"), 0.0, Status.TP_ERR_BAD_LR),
                                     (-1.0, 0.0, Status.TP_ERR_BAD_LR),
                                     (0.05, 0.9, Status.TP_ERR_NO_OPTIMIZER)]:
            with pytest.raises(DeviceError) as err:
                dev.set_hparams(lr, 7, momentum=momentum)
            assert err.value.status == status and err.value.exit_code == 2, (lr, momentum)
            assert status_message(status) in str(err.value)
        got, want = dev.train(m.inputs[0], int(m.labels[0])), ref.train_step(m.inputs[0],
                                                                             int(m.labels[0]))
        assert np.float32(got["loss"]) == np.float32(want.loss)
