"""The qemu-m4 board on real QEMU: the self-test firmware (firmware/apps/selftest/selftest.c), built
with arm-none-eabi-gcc, driven over its UART on a real loopback socket."""

from __future__ import annotations

import random
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import serial
from tinyprop.device.firmware import build_firmware
from tinyprop.device.link import SerialTransport, Transport
from tinyprop.device.runners import start_qemu
from tinyprop.errors import TinypropError
from tinyprop.paths import REPO_ROOT
from tinyprop.status import Status

needs_qemu = pytest.mark.skipif(
    shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
    reason="needs qemu-system-arm and gcc-arm-none-eabi (scripts/setup.sh installs them)",
)
pytestmark = needs_qemu

RAM_END = 0x20040000
STACK_BYTES = 16384  # the Makefile's default STACK_SIZE
STATUS_NOT_FOUND = -Status.TP_ERR_NOT_FOUND  # TP_BOARD_ERR_NOT_FOUND: minus its tp_status


class Selftest:
    """Client for the self-test app's one-byte commands over a link transport
    (tinyprop.device.link: PipeTransport for the host board, SerialTransport for a UART)."""

    def __init__(self, transport: Transport, timeout: float = 10.0) -> None:
        self.transport = transport
        self.timeout = timeout
        self._pending = bytearray()

    @classmethod
    def over_serial(cls, port: serial.SerialBase) -> Selftest:
        return cls(SerialTransport(port, port.name or "uart"))

    def send(self, command: bytes, *words: int, data: bytes = b"") -> None:
        args = b"".join(w.to_bytes(4, "little") for w in words)
        self.transport.write(command + args + data)

    def read(self, n: int) -> bytes:
        deadline = time.monotonic() + self.timeout
        while len(self._pending) < n and (left := deadline - time.monotonic()) > 0:
            self._pending += self.transport.read(left)
        data, self._pending = bytes(self._pending[:n]), self._pending[n:]
        assert len(data) == n, f"expected {n} bytes from the board, got {len(data)}"
        return data

    def line(self) -> dict[str, str]:
        """Next reply line as {"tag": first word, key: value, ...}."""
        text = bytearray()
        while not text.endswith(b"\n"):
            text += self.read(1)
        tag, *pairs = text.decode().split()
        return {"tag": tag, **dict(pair.split("=", 1) for pair in pairs)}

    def info(self) -> dict[str, str]:
        self.send(b"i")
        return self.line()

    def work(self, n: int) -> dict[str, str]:
        self.send(b"k", n)
        return self.line()

    def stack_peak(self) -> int:
        self.send(b"p")
        return int(self.line()["peak"])

    def bulk(self, name: str, offset: int, n: int) -> tuple[dict[str, str], bytes]:
        self.send(b"b" + name.encode() + b"\0", offset, n)
        reply = self.line()
        return reply, self.read(max(0, int(reply["got"])))

    def save(self, data: bytes) -> int:
        self.send(b"s", len(data), data=data)
        return int(self.line()["status"])

    def load(self) -> tuple[int, bytes]:
        self.send(b"l")
        reply = self.line()
        status = int(reply["status"])
        return status, self.read(int(reply["n"])) if status == 0 else b""


@pytest.fixture(scope="module")
def selftest_elf() -> Path:
    return build_firmware("qemu-m4", "selftest")


def run_commands(elf: Path, workdir: Path, *commands: bytes) -> tuple[int, str]:
    """Send raw commands, wait for QEMU to end; returns (exit status, QEMU log)."""
    with start_qemu(elf, workdir=workdir, timeout=30) as run, run.connect() as link:
        link.write(b"".join(commands))
        return run.wait(30), run.log()


def test_info_names_board_counter_and_ram(selftest_elf, tmp_path):
    with start_qemu(selftest_elf, workdir=tmp_path) as run, run.connect() as link:
        info = Selftest.over_serial(link).info()
    assert info == {"tag": "info", "name": "qemu-m4", "unit": "instructions", "sram": "262144"}


def test_uart_echoes_every_byte_value(selftest_elf, tmp_path):
    data = bytes(range(256)) + random.Random(1).randbytes(20000)
    with start_qemu(selftest_elf, workdir=tmp_path) as run, run.connect() as link:
        board = Selftest.over_serial(link)
        # 20 KB each way through the emulated UART: under 3 s alone, past 10 s on a loaded machine
        board.timeout = 60.0
        board.send(b"e", len(data), data=data)
        assert board.read(len(data)) == data
        assert board.info()["tag"] == "info"  # still in step after the echo


@pytest.mark.parametrize("command", [b"x", b"q"])  # tp_board_exit(), return from the entry
@pytest.mark.parametrize("status", [0, 3, 77])
def test_exit_status_reaches_qemu(selftest_elf, tmp_path, command, status):
    assert run_commands(selftest_elf, tmp_path, command + bytes([status]))[0] == status


def test_counter_counts_instructions_deterministically(selftest_elf, tmp_path):
    costs = []
    for _ in range(2):  # two QEMU runs of the same work
        with start_qemu(selftest_elf, workdir=tmp_path) as run, run.connect() as link:
            board = Selftest.over_serial(link)
            replies = [board.work(n) for n in (20000, 40000, 20000)]
        assert len({r["result"] for r in replies[::2]}) == 1
        costs.append([int(r["cost"]) for r in replies])
    flat = [c for run_costs in costs for c in run_costs]
    assert all(c % 40 == 0 for c in flat)  # one FPGAIO tick = 40 instructions
    # Exact to one tick: where in a tick the work starts depends on when the host's input came.
    small = [c for run_costs in costs for c in run_costs[::2]]
    large = [run_costs[1] for run_costs in costs]
    assert max(small) - min(small) <= 40 and max(large) - min(large) <= 40
    assert small[0] > 20000  # more than one instruction an iteration
    # The loop dominates: twice the iterations, twice the instructions (to 1 %).
    assert large[0] == pytest.approx(2 * small[0], rel=0.01)


def test_write_just_past_256k_faults_with_134(selftest_elf, tmp_path):
    status, log = run_commands(selftest_elf, tmp_path, b"w" + RAM_END.to_bytes(4, "little"))
    assert status == 134
    assert f"mmfar={RAM_END:08x}" in log


def test_write_inside_256k_succeeds(selftest_elf, tmp_path):
    with start_qemu(selftest_elf, workdir=tmp_path) as run, run.connect() as link:
        board = Selftest.over_serial(link)
        board.send(b"w", RAM_END - STACK_BYTES - 1024)  # free RAM between .bss and the stack
        assert board.line()["tag"] == "wrote"
        board.send(b"x\0")
        assert run.wait(10) == 0


def test_write_to_flash_faults(selftest_elf, tmp_path):
    assert run_commands(selftest_elf, tmp_path, b"w" + (0x1000).to_bytes(4, "little"))[0] == 134


def test_stack_overflow_faults_in_the_guard(selftest_elf, tmp_path):
    status, log = run_commands(selftest_elf, tmp_path, b"o" + (1000).to_bytes(4, "little"))
    assert status == 134
    fault_address = int(re.search(r"mmfar=([0-9a-f]{8})", log).group(1), 16)
    stack_limit = RAM_END - STACK_BYTES
    assert stack_limit - 32 <= fault_address < stack_limit  # the 32-byte MPU guard


def test_stack_peak_is_plausible(selftest_elf, tmp_path):
    with start_qemu(selftest_elf, workdir=tmp_path) as run, run.connect() as link:
        board = Selftest.over_serial(link)
        idle = board.stack_peak()
        board.send(b"o", 100)
        deep = int(board.line()["peak"])
    assert 0 < idle < 2048
    assert idle + 100 * 64 <= deep < STACK_BYTES  # 100 frames of at least 64 bytes


def test_bulk_reads_host_file_bytes(selftest_elf, tmp_path):
    content = random.Random(2).randbytes(10000)
    (tmp_path / "samples.bin").write_bytes(content)
    with start_qemu(selftest_elf, workdir=tmp_path) as run, run.connect() as link:
        board = Selftest.over_serial(link)
        reply, data = board.bulk("samples.bin", 1234, 2000)
        assert (reply["size"], data) == ("10000", content[1234:3234])
        reply, data = board.bulk("samples.bin", 9000, 2000)  # short read at end of file
        assert data == content[9000:]
        reply, _ = board.bulk("missing.bin", 0, 10)
        assert int(reply["size"]) == STATUS_NOT_FOUND


def test_store_survives_a_restart(selftest_elf, tmp_path):
    record = random.Random(3).randbytes(3000)
    with start_qemu(selftest_elf, workdir=tmp_path) as run, run.connect() as link:
        board = Selftest.over_serial(link)
        assert board.load() == (STATUS_NOT_FOUND, b"")
        assert board.save(record) == 0
        board.send(b"x\0")
        assert run.wait(10) == 0
    assert (tmp_path / "tinyprop.store").read_bytes() == record
    with start_qemu(selftest_elf, workdir=tmp_path) as run, run.connect() as link:
        assert Selftest.over_serial(link).load() == (0, record)


def test_hung_guest_is_killed_at_the_time_limit(selftest_elf, tmp_path):
    with start_qemu(selftest_elf, workdir=tmp_path, timeout=1.0) as run, run.connect() as link:
        link.write(b"e" + (100).to_bytes(4, "little"))  # waits forever for 100 bytes
        assert run.wait(10) != 0
        assert run.timed_out


def test_qemu_is_stopped_when_the_block_exits(selftest_elf, tmp_path):
    with start_qemu(selftest_elf, workdir=tmp_path) as run:
        assert run.proc.poll() is None
    assert run.proc.poll() is not None


def test_concurrent_boards_get_their_own_ports(selftest_elf, tmp_path):
    with (
        start_qemu(selftest_elf, workdir=tmp_path / "a") as first,
        start_qemu(selftest_elf, workdir=tmp_path / "b") as second,
        first.connect() as link_a,
        second.connect() as link_b,
    ):
        assert first.url != second.url
        names = [Selftest.over_serial(link).info()["name"] for link in (link_a, link_b)]
        assert names == ["qemu-m4", "qemu-m4"]


def test_build_is_skipped_when_nothing_changed(selftest_elf):
    before = selftest_elf.stat().st_mtime_ns
    assert build_firmware("qemu-m4", "selftest") == selftest_elf
    assert selftest_elf.stat().st_mtime_ns == before


def test_size_is_recorded_within_the_part(selftest_elf):
    text, data, bss = map(int, selftest_elf.with_suffix(".size").read_text().split()[6:9])
    assert text + data <= 1024 * 1024
    assert data + bss <= 256 * 1024


def test_missing_cross_compiler_names_the_apt_package(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(TinypropError, match="apt-get install gcc-arm-none-eabi"):
        build_firmware("qemu-m4", "selftest")


@pytest.mark.slow  # a firmware build of a copied tree
def test_oversized_stack_fails_to_link(tmp_path):
    # A separate make run into a scratch copy of the board, so the shared build is untouched.
    board = tmp_path / "boards"
    for folder in ("qemu-m4", "common"):
        shutil.copytree(REPO_ROOT / "boards" / folder, board / folder)
    shutil.copytree(REPO_ROOT / "firmware", tmp_path / "firmware")
    result = subprocess.run(
        ["make", "-C", str(board / "qemu-m4"), "APP=selftest", f"STACK_SIZE={256 * 1024}"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "RAM overflow" in result.stderr
