"""The rv32-virt board: the same portable core and device loop built for a 32-bit RISC-V without
an FPU (riscv64-unknown-elf-gcc -march=rv32imc -mabi=ilp32, picolibc, floats in libgcc's soft
float) and run on QEMU's `virt` machine. Training equals the NumPy reference bit for bit, so the
soft-float path computes the same bits as x86 and the Cortex-M4F. Also the board's HAL through
the self-test app: UART, instret counter, stack painting, semihosting files, PMP faults."""

from __future__ import annotations

import random
import re
import shutil

import pytest
from test_device_host import check_training
from test_qemu_board import STATUS_NOT_FOUND, Selftest
from tinyprop.device.boards import open_board
from tinyprop.device.device import write_bulk_file
from tinyprop.device.firmware import build_firmware
from tinyprop.device.runners import start_qemu

pytestmark = pytest.mark.skipif(
    shutil.which("qemu-system-riscv32") is None or shutil.which("riscv64-unknown-elf-gcc") is None,
    reason="needs qemu-system-misc, gcc-riscv64-unknown-elf and picolibc-riscv64-unknown-elf "
    "(scripts/setup.sh installs them)",
)

BOARD = "rv32-virt"
RAM_START, RAM_END = 0x80400000, 0x80440000
STACK_BYTES = 16384  # the Makefile's default STACK_SIZE
FAULT_STATUS = 134


@pytest.fixture(scope="module")
def selftest_elf():
    return build_firmware(BOARD, "selftest")


@pytest.mark.slow  # a training run in soft float
def test_small_model_trains_bit_exact(small_model, tmp_path):
    events = check_training(BOARD, small_model, 20, tmp_path)
    memory = events[-1]["memory"]
    assert memory["sram"] == RAM_END - RAM_START
    assert 0 < memory["stack_peak"] < STACK_BYTES
    assert all(e["counter"] > 0 for e in events)  # instret: instructions


@pytest.mark.slow  # VWW in soft float
def test_vww_trains_bit_exact(vww_model, tmp_path):
    events = check_training(BOARD, vww_model, 2, tmp_path)
    memory = events[-1]["memory"]
    used = memory["static"] + memory["arena_peak"] + memory["trainable"] + memory["stack_peak"]
    assert used < memory["sram"] == 262144


@pytest.mark.slow  # a soft-float firmware build and runs
def test_bulk_samples_and_the_store_across_a_kill(small_model, tmp_path):
    write_bulk_file(tmp_path / "train.bin", small_model.inputs, small_model.labels)
    with open_board(BOARD, small_model.blob, tmp_path) as dev:
        assert dev.bulk_open("train.bin") == len(small_model.labels)
        dev.set_hparams(0.05, 7)
        for i in range(4):
            dev.train_bulk(i)
        dev.save()
        saved = dev.pull_params()
        dev.reset()
        dev.process.proc.kill()
    assert saved == small_model.reference(4).params_bytes()
    with open_board(BOARD, small_model.blob, tmp_path) as dev:
        assert dev.pull_params() == saved
        assert any("restored" in text for text in dev.link.logs)


def run_commands(elf, workdir, *commands: bytes) -> tuple[int, str]:
    """Send raw self-test commands, wait for QEMU to end; returns (exit status, QEMU log)."""
    with start_qemu(elf, workdir=workdir, timeout=30, board=BOARD) as run, run.connect() as link:
        link.write(b"".join(commands))
        return run.wait(30), run.log()


def fault_field(log: str, name: str) -> int:
    return int(re.search(rf"{name}=([0-9a-f]{{8}})", log).group(1), 16)


def test_selftest_info_echo_store_and_exit(selftest_elf, tmp_path):
    data = bytes(range(256)) + random.Random(1).randbytes(2000)
    content = random.Random(2).randbytes(10000)
    (tmp_path / "samples.bin").write_bytes(content)
    with start_qemu(selftest_elf, workdir=tmp_path, board=BOARD) as run, run.connect() as link:
        board = Selftest.over_serial(link)
        assert board.info() == {"tag": "info", "name": BOARD, "unit": "instructions",
                                "sram": str(RAM_END - RAM_START)}
        board.send(b"e", len(data), data=data)
        assert board.read(len(data)) == data
        reply, got = board.bulk("samples.bin", 1234, 2000)
        assert (reply["size"], got) == ("10000", content[1234:3234])
        assert int(board.bulk("missing.bin", 0, 10)[0]["size"]) == STATUS_NOT_FOUND
        assert board.load() == (STATUS_NOT_FOUND, b"")
        assert board.save(content[:3000]) == 0
        board.send(b"x\x05")
        assert run.wait(10) == 5  # the status reaches QEMU through semihosting
    assert (tmp_path / "tinyprop.store").read_bytes() == content[:3000]


def test_counter_counts_instructions_exactly(selftest_elf, tmp_path):
    costs = []
    for _ in range(2):  # two QEMU runs of the same work
        with start_qemu(selftest_elf, workdir=tmp_path, board=BOARD) as run, \
                run.connect() as link:
            board = Selftest.over_serial(link)
            costs.append([int(board.work(n)["cost"]) for n in (2000, 4000, 2000)])
    # instret under -icount is exact: the same work costs the same count, run after run
    assert costs[0] == costs[1] and costs[0][0] == costs[0][2]
    assert costs[0][1] == pytest.approx(2 * costs[0][0], rel=0.01)


def test_stack_peak_is_plausible(selftest_elf, tmp_path):
    with start_qemu(selftest_elf, workdir=tmp_path, board=BOARD) as run, run.connect() as link:
        board = Selftest.over_serial(link)
        idle = board.stack_peak()
        board.send(b"o", 100)
        deep = int(board.line()["peak"])
    assert 0 < idle < 2048
    assert idle + 100 * 64 <= deep < STACK_BYTES


@pytest.mark.parametrize(
    ("address", "cause"),
    [(RAM_END, 7), (0x80000100, 7), (RAM_END - STACK_BYTES - 4, 7)],
    ids=["past-256k", "flash", "stack-guard"],
)
def test_pmp_makes_stray_writes_fault(selftest_elf, tmp_path, address, cause):
    status, log = run_commands(selftest_elf, tmp_path, b"w" + address.to_bytes(4, "little"))
    assert status == FAULT_STATUS
    assert fault_field(log, "mcause") == cause  # store access fault
    assert fault_field(log, "mtval") == address


def test_stack_overflow_faults_in_the_guard(selftest_elf, tmp_path):
    status, log = run_commands(selftest_elf, tmp_path, b"o" + (1000).to_bytes(4, "little"))
    assert status == FAULT_STATUS
    stack_limit = RAM_END - STACK_BYTES
    assert stack_limit - 32 <= fault_field(log, "mtval") < stack_limit


def test_write_inside_256k_succeeds(selftest_elf, tmp_path):
    with start_qemu(selftest_elf, workdir=tmp_path, board=BOARD) as run, run.connect() as link:
        board = Selftest.over_serial(link)
        board.send(b"w", RAM_END - STACK_BYTES - 1024)  # free RAM between .bss and the stack
        assert board.line()["tag"] == "wrote"
        board.send(b"x\0")
        assert run.wait(10) == 0
