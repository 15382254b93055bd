"""`tinyprop convert --header` writes everything firmware needs to size its buffers: a device
built from that header alone binds the blob (no fallback to the default 96 KB / 72 KB)."""

from __future__ import annotations

import re

from tinyprop.cli import main
from tinyprop.compile.blob import blob_id, read_blob
from tinyprop.device.device import Device
from tinyprop.device.firmware import build_firmware
from tinyprop.device.link import Link, PipeTransport
from tinyprop.device.runners import start_host_board


def test_the_header_sizes_the_buffers_and_the_device_binds_it(vww_model_path, tmp_path):
    tpb, header = tmp_path / "m.tpb", tmp_path / "model_tpb.h"
    assert main(["convert", str(vww_model_path), "-o", str(tpb), "--scheme", "last:2",
                 "--header", str(header)]) == 0
    b = read_blob(tpb.read_bytes())
    defines = dict(re.findall(r"#define (TP_MODEL_\w+) (\w+)u\n", header.read_text()))
    assert defines["TP_MODEL_ARENA_BYTES"] == str(max(b.arena_bytes, b.train_arena_bytes))
    assert defines["TP_MODEL_PARAMS_BYTES"] == str(b.params_bytes)
    assert defines["TP_MODEL_INPUT_BYTES"] == str(96 * 96 * 3)
    exe = build_firmware("host", variables={"BLOB": str(header), "BLOB_TAG": "convert-header"})
    with start_host_board(exe, tmp_path) as run, \
            Link(PipeTransport(run.proc, "host board (convert --header)")) as link:
        ready = Device(link).hello()
    assert ready.blob_id == blob_id(tpb.read_bytes())
    assert ready.arena_bytes == max(b.arena_bytes, b.train_arena_bytes)
