"""The POSIX host board: the same self-test app as on qemu-m4, built with gcc, over real pipes
and a real pty."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
import serial
from test_qemu_board import STATUS_NOT_FOUND, Selftest
from tinyprop.device.firmware import build_firmware
from tinyprop.device.link import PipeTransport
from tinyprop.device.runners import start_host_board, start_qemu

STACK_BYTES = 512 * 1024  # boards/host/board.c


@pytest.fixture(scope="module")
def selftest_exe() -> Path:
    return build_firmware("host", "selftest")


def over_pipes(run) -> Selftest:
    """The self-test client on the host board's stdin/stdout."""
    return Selftest(PipeTransport(run.proc, "host"))


def test_info_names_board_counter_and_ram(selftest_exe, tmp_path):
    with start_host_board(selftest_exe, tmp_path) as run:
        info = over_pipes(run).info()
    assert info == {"tag": "info", "name": "host", "unit": "us", "sram": "262144"}


def test_pipe_echoes_every_byte_value(selftest_exe, tmp_path):
    data = bytes(range(256)) + random.Random(1).randbytes(100000)
    with start_host_board(selftest_exe, tmp_path) as run:
        board = over_pipes(run)
        board.send(b"e", len(data), data=data)
        assert board.read(len(data)) == data


@pytest.mark.parametrize("command", [b"x", b"q"])
def test_exit_status_is_the_process_status(selftest_exe, tmp_path, command):
    with start_host_board(selftest_exe, tmp_path) as run:
        over_pipes(run).transport.write(command + bytes([3]))
        assert run.wait(10) == 3


def test_closed_input_ends_the_board(selftest_exe, tmp_path):
    with start_host_board(selftest_exe, tmp_path) as run:
        over_pipes(run).transport.close()
        assert run.wait(10) == 0  # tp_board_read reported the link closed


def test_counter_advances_in_microseconds(selftest_exe, tmp_path):
    with start_host_board(selftest_exe, tmp_path) as run:
        board = over_pipes(run)
        small, large = board.work(100_000), board.work(10_000_000)
    assert 0 <= int(small["cost"]) < int(large["cost"])


def test_stack_overflow_faults_with_134(selftest_exe, tmp_path):
    with start_host_board(selftest_exe, tmp_path) as run:
        over_pipes(run).transport.write(b"o" + (STACK_BYTES // 64).to_bytes(4, "little"))
        assert run.wait(10) == 134


def test_stack_peak_is_plausible(selftest_exe, tmp_path):
    with start_host_board(selftest_exe, tmp_path) as run:
        board = over_pipes(run)
        idle = board.stack_peak()
        board.send(b"o", 1000)
        deep = int(board.line()["peak"])
    assert 0 < idle < 16384
    assert idle + 1000 * 64 <= deep < STACK_BYTES


def test_bulk_reads_file_bytes(selftest_exe, tmp_path):
    content = random.Random(2).randbytes(10000)
    (tmp_path / "samples.bin").write_bytes(content)
    with start_host_board(selftest_exe, tmp_path) as run:
        board = over_pipes(run)
        reply, data = board.bulk("samples.bin", 1234, 2000)
        assert (reply["size"], data) == ("10000", content[1234:3234])
        assert board.bulk("samples.bin", 9000, 2000)[1] == content[9000:]
        assert int(board.bulk("missing.bin", 0, 10)[0]["size"]) == STATUS_NOT_FOUND


def test_store_survives_a_restart_at_the_env_path(selftest_exe, tmp_path, monkeypatch):
    store = tmp_path / "params" / "saved.bin"
    store.parent.mkdir()
    monkeypatch.setenv("TINYPROP_STORE", str(store))
    record = random.Random(3).randbytes(3000)
    with start_host_board(selftest_exe, tmp_path) as run:
        board = over_pipes(run)
        assert board.load() == (STATUS_NOT_FOUND, b"")
        assert board.save(record) == 0
    assert store.read_bytes() == record
    with start_host_board(selftest_exe, tmp_path) as run:
        assert over_pipes(run).load() == (0, record)


def test_pty_link_works_with_pyserial(selftest_exe, tmp_path):
    with start_host_board(selftest_exe, tmp_path, pty=True) as run:
        assert run.url.startswith("/dev/")
        with serial.Serial(run.url, timeout=10) as port:
            assert Selftest.over_serial(port).info()["name"] == "host"


@pytest.mark.skipif(
    shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
    reason="needs qemu-system-arm and gcc-arm-none-eabi",
)
def test_same_arithmetic_result_as_qemu_m4(selftest_exe, tmp_path):
    # Integer and float work must give the same bits on the host and the Cortex-M4 FPU.
    with start_host_board(selftest_exe, tmp_path) as run:
        on_host = over_pipes(run).work(12345)["result"]
    elf = build_firmware("qemu-m4", "selftest")
    with start_qemu(elf, workdir=tmp_path) as run, run.connect() as link:
        assert Selftest.over_serial(link).work(12345)["result"] == on_host
