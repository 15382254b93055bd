"""The MicroPython binding (micropython/, docs/micropython.md), from the host.

MicroPython is built by hand, not here, so: every committed .exp of micropython/tests/ equals
what tests/micropython_reference.py computes from the NumPy reference; the CMake fragment
globs the sources firmware/sources.mk does; and the binding's frame code
(micropython/tinyprop/tp_mpy_link.c), built into a small C driver that trains as a script
would, feeds the real host monitor (live_source over exec:) frames whose losses equal the
reference's. With TINYPROP_MICROPYTHON naming a unix-port `micropython` built with the module,
the test scripts also run on it against their .exp, and the example trains under the monitor.
"""

from __future__ import annotations

import os
import re
import socket
import struct
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest
from micropython_reference import EXPECTED, expected_text, write_assets
from test_device_host import Model
from tinyprop.compile.blob import blob_id, read_blob
from tinyprop.device.device import write_bulk_file
from tinyprop.device.firmware import PROGRAM_FLAGS, core_cflags, core_library, core_sources
from tinyprop.device.link import open_link
from tinyprop.device.protocol import Hello, Ready, SetHparams
from tinyprop.errors import DeviceError
from tinyprop.monitor.sources import live_source
from tinyprop.reference.backward import ReferenceTrainer

REPO = Path(__file__).resolve().parents[1]
MODULE = REPO / "micropython" / "tinyprop"
TESTS = REPO / "micropython" / "tests"
EXAMPLE = REPO / "micropython" / "examples" / "train_vww.py"
DRIVER = REPO / "tests" / "c" / "mpy_link_driver.c"
MICROPYTHON = os.environ.get("TINYPROP_MICROPYTHON")
needs_micropython = pytest.mark.skipif(
    not MICROPYTHON, reason="set TINYPROP_MICROPYTHON to a unix-port micropython built with "
    "USER_C_MODULES=micropython (docs/micropython.md)")


def test_every_script_has_an_expectation():
    assert sorted(p.stem for p in TESTS.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_exp_equals_the_reference(name):
    path = TESTS / f"{name}.py.exp"
    assert path.read_text() == expected_text(name), (
        f"{path.relative_to(REPO)} is stale: run python tests/micropython_reference.py "
        "--write-exp, then the MicroPython tests on both ports (docs/micropython.md)")


@pytest.mark.parametrize("example", sorted((REPO / "micropython" / "examples").glob("*.py")),
                         ids=lambda p: p.name)
def test_example_parses(example):
    """The examples for boards this machine has not (a camera) at least parse."""
    compile(example.read_text(), str(example), "exec")


def test_cmake_globs_the_sources_of_sources_mk():
    """micropython.cmake cannot include sources.mk: it restates its globs."""
    cmake = (MODULE / "micropython.cmake").read_text()
    block = re.search(r"file\(GLOB TINYPROP_LIB_SOURCES(.*?)\)", cmake, re.S).group(1)
    patterns = re.findall(r"\$\{TINYPROP_FW\}/(\S+)", block)
    globbed = sorted({p for pattern in patterns for p in (REPO / "firmware").glob(pattern)})
    assert globbed == sorted(core_sources())


@pytest.fixture(scope="module")
def driver(tmp_path_factory) -> Path:
    """The driver built with the binding's frame code against the core as the host builds it
    (firmware/Makefile's library and flags)."""
    out = tmp_path_factory.mktemp("mpy") / "mpy_link_driver"
    cmd = ["gcc", *core_cflags(), *PROGRAM_FLAGS, f"-I{MODULE}", str(MODULE / "tp_mpy_link.c"),
           str(DRIVER), str(core_library(shared=False)), "-lm", "-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300)
    return out


def check_steps(events: list[dict], m: Model, lr: float, seed: int) -> None:
    """Every step event equals the reference's step on the same sample of m."""
    ref = ReferenceTrainer(m.program, lr, seed)
    inputs, labels = m.inputs, m.labels
    for i, event in enumerate(events):
        x, y = inputs[i % len(labels)], int(labels[i % len(labels)])
        r = ref.train_step(x, y)
        assert event["type"] == "step" and event["step"] == i
        assert np.float32(event["loss"]) == np.float32(r.loss)
        assert (event["label"], event["prediction"]) == (y, r.prediction)
        assert event["correct"] == (y == r.prediction) and not event["skipped"]
        assert event["memory"]["arena_peak"] == read_blob(m.blob).train_arena_bytes
        assert event["memory"]["trainable"] == m.program.region_bytes


def test_link_frames_reach_the_monitor(driver, small_model, tmp_path):
    """READY answers the monitor's HELLO; METRIC frames become step events equal to the
    reference's, then an evaluation, a LOG, and the disconnect when the script ends."""
    m = small_model
    (tmp_path / "m.tpb").write_bytes(m.blob)
    write_bulk_file(tmp_path / "s.bin", m.inputs, m.labels)
    events = list(live_source(f"exec:{driver} {tmp_path / 'm.tpb'} {tmp_path / 's.bin'} 6 0.05 7"))
    start, *steps, evaluated, log, end = events
    assert start == {"type": "start", "board": "mpy-host-driver", "sram": 262144,
                     "counter_unit": "us", "blob_id": f"{blob_id(m.blob):08x}"}
    check_steps(steps, m, 0.05, 7)
    assert len(steps) == 6 and all(e["counter"] >= 0 for e in steps)
    assert evaluated["type"] == "sample_eval" and evaluated["step"] == 6
    assert evaluated["label"] is None and evaluated["correct"] is None
    assert evaluated["memory"]["arena_peak"] == read_blob(m.blob).arena_bytes
    assert log == {"type": "log", "text": "done"}
    assert end["type"] == "disconnect"


def test_other_requests_are_refused_clearly(driver, small_model, tmp_path):
    """`tinyprop train --board PORT` on a MicroPython board: the script drives it, says so."""
    (tmp_path / "m.tpb").write_bytes(small_model.blob)
    write_bulk_file(tmp_path / "s.bin", small_model.inputs, small_model.labels)
    with open_link(f"exec:{driver} {tmp_path / 'm.tpb'} {tmp_path / 's.bin'} 1 0.05 7") as link:
        with pytest.raises(DeviceError, match=r"UNSUPPORTED: .*\(a MicroPython script drives"):
            link.request(SetHparams(0.1, 0.0, 0, 1), Ready)
        ready = link.request(Hello(), Ready)
        assert ready.blob_id == blob_id(small_model.blob) and ready.board == "mpy-host-driver"


# ---- the unix port, when one is built (docs/micropython.md) ---------------------------------


@pytest.fixture(scope="module")
def unix_assets(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("mpy-assets")
    write_assets(out, frozen=False)
    return out


@needs_micropython
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_unix_port_prints_the_exp(name, unix_assets):
    run = subprocess.run([MICROPYTHON, str(TESTS / f"{name}.py")], capture_output=True,
                         env={**os.environ, "MICROPYPATH": str(unix_assets)}, timeout=600)
    assert run.stdout.decode() == (TESTS / f"{name}.py.exp").read_text(), run.stderr.decode()


def serve_once(data: bytes) -> str:
    """HOST:PORT of a TCP server that sends data to its first connection (as
    micropython/samples.py --serve does)."""
    server = socket.create_server(("127.0.0.1", 0))

    def send() -> None:
        with server, server.accept()[0] as conn:
            conn.sendall(data)

    threading.Thread(target=send, daemon=True).start()
    return f"127.0.0.1:{server.getsockname()[1]}"


@needs_micropython
@pytest.mark.parametrize("source", ["file", "tcp"])
def test_unix_port_example_trains_under_the_monitor(source, vww_model, tmp_path, monkeypatch):
    """The example as a user runs it: `tinyprop monitor "exec:micropython train_vww.py ..."`,
    samples from a file or streamed over TCP; its steps and its checkpoint (the device store's
    record) equal the reference's."""
    m = vww_model
    (tmp_path / "vww.tpb").write_bytes(m.blob)
    write_bulk_file(tmp_path / "samples.bin", m.inputs, m.labels)
    samples = ("samples.bin" if source == "file"
               else serve_once((tmp_path / "samples.bin").read_bytes()))
    monkeypatch.chdir(tmp_path)  # the example saves params.bin in its working directory
    events = list(live_source(f"exec:{MICROPYTHON} {EXAMPLE} vww.tpb {samples}"))
    steps = [e for e in events if e["type"] == "step"]
    assert events[0]["type"] == "start" and len(steps) == len(m.labels)
    check_steps(steps, m, 0.005, 0)  # the example's LR and SEED
    ref = m.reference(len(m.labels), lr=0.005, seed=0)
    record = (tmp_path / "params.bin").read_bytes()
    assert struct.unpack_from("<IIII", record) == (0x52505054, blob_id(m.blob),
                                                   len(ref.params_bytes()), len(m.labels))
    assert record[24:] == ref.params_bytes()
