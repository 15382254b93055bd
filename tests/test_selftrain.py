"""The self-training application (firmware/apps/selftrain/selftrain.c), the run the ESP32 does in
Wokwi, built for qemu-m4 and run under QEMU: the headers come from
firmware/apps/selftrain/selftrain_headers.py (the
steps a user runs for the esp32dev-wokwi build), and every printed loss, prediction and
accuracy, the verdict and the params CRC32 equal the NumPy reference's, bit for bit. The lines
boards/esp32/scenario.yaml waits for appear in that output, in order. Also the verdict when
nothing is learnt and the error line for samples of another model."""

from __future__ import annotations

import re
import shlex
import shutil
import socket
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from test_device_host import load_ir_model, load_small_model
from test_wokwi import scenario_waits
from tinyprop.compile.blob import blob_id
from tinyprop.compile.blobfile import make_blob
from tinyprop.compile.scheme import parse_scheme
from tinyprop.device.firmware import build_firmware, write_blob_header, write_samples_header
from tinyprop.device.runners import start_qemu
from tinyprop.errors import TinypropError
from tinyprop.frontend.tflite_reader import read_tflite
from tinyprop.paths import REPO_ROOT
from tinyprop.reference.backward import ReferenceTrainer

SCRIPT = REPO_ROOT / "firmware" / "apps" / "selftrain" / "selftrain_headers.py"
SRAM = 262144


def run_selftrain(model_header: Path, samples_header: Path, workdir: Path,
                  board: str = "qemu-m4") -> tuple[int, list[str]]:
    """Build the application for `board` with both headers, run it to its end under QEMU:
    (exit status, lines)."""
    elf = build_firmware(board, "selftrain",
                         {"BLOB": str(model_header), "SAMPLES": str(samples_header)})
    with start_qemu(elf, workdir=workdir, timeout=60, board=board) as run:
        out = b""
        with socket.create_connection(("127.0.0.1", run.port), timeout=60) as sock:
            while chunk := sock.recv(65536):  # the guest starts on connect, ends with QEMU
                out += chunk
        return run.wait(10), out.decode().splitlines()


def read_samples_header(path: Path) -> dict:
    """The run a samples header describes: its defines, labels and int8 samples."""
    text = path.read_text()
    defines = dict(re.findall(r"#define (TP_\w+) (\S+)", text))
    arrays = {name: np.array(body.replace("\n", "").rstrip(",").split(","), dtype=np.int64)
              for name, body in re.findall(r"(tp_selftrain_\w+)\[\d+\] = \{([^}]*)\}", text)}
    n = int(defines["TP_SAMPLES_COUNT"].rstrip("u"))
    return {
        "steps": int(defines["TP_SELFTRAIN_STEPS"].rstrip("u")),
        "lr": float.fromhex(defines["TP_SELFTRAIN_LR"].rstrip("f")),
        "seed": int(defines["TP_SELFTRAIN_SEED"].rstrip("u")),
        "labels": arrays["tp_selftrain_labels"].tolist(),
        "inputs": arrays["tp_selftrain_samples"].astype(np.int8).reshape(n, -1),
    }


def decimal4(v: np.float32) -> str:
    """selftrain.c's put_decimal, in the same float32 arithmetic."""
    whole = int(v)
    frac = int(np.float32(np.float32(v - np.float32(whole)) * np.float32(10000))
               + np.float32(0.5))
    if frac >= 10000:
        whole, frac = whole + 1, frac - 10000
    return f"{whole}.{frac:04d}"


def expected_lines(program, blob: bytes, run: dict, board: str = "qemu-m4") -> list[str]:
    """What selftrain.c prints for `run` on `board`, from the NumPy reference."""
    ref = ReferenceTrainer(program, run["lr"], run["seed"])
    xs, labels, steps = run["inputs"], run["labels"], run["steps"]
    n = len(labels)
    logits = program.graph.ops[program.logits].outputs[0]

    def correct() -> int:
        return sum(int(np.argmax(ref.forward(x, program.logits)[logits])) == y
                   for x, y in zip(xs, labels, strict=True))

    before = correct()
    lines = [f"selftrain ready board {board} sram {SRAM} blob {blob_id(blob):08x} samples {n} "
             f"steps {steps}", f"eval before correct {before}/{n}"]
    first = last = np.float32(0)
    for i in range(steps):
        r = ref.train_step(xs[i % n], labels[i % n])
        loss = np.float32(r.loss)
        first += loss if i < n else np.float32(0)
        last += loss if i >= steps - n else np.float32(0)
        lines.append(f"step {i} loss {decimal4(loss)} bits {int(loss.view(np.uint32)):08x} "
                     f"pred {r.prediction} label {labels[i % n]}" + (" skipped" * r.skipped))
    after = correct()
    first, last = first / np.float32(n), last / np.float32(n)
    why = "" if last < first and after >= before else \
        " (the loss did not fall)" if not last < first else " (accuracy dropped)"
    lines += [f"eval after correct {after}/{n}",
              f"selftrain {'failed' if why else 'ok'}{why}: loss {decimal4(first)} -> "
              f"{decimal4(last)}, accuracy {before}/{n} -> {after}/{n}, params crc32 "
              f"{zlib.crc32(ref.params_bytes()):08x}"]
    return lines


@pytest.fixture(scope="module")
def vww_run(vww_model_path, vww_data_dir, tmp_path_factory):
    """The user's steps: a converted VWW blob (last:2), the headers script on the dataset, and
    the application built and run on qemu-m4 with those headers."""
    tmp = tmp_path_factory.mktemp("selftrain")
    tb = make_blob(vww_model_path, parse_scheme(read_tflite(vww_model_path), "last:2"))
    (tmp / "vww.tpb").write_bytes(tb.blob)
    out = subprocess.run([sys.executable, str(SCRIPT), str(tmp / "vww.tpb"), "--data",
                          str(vww_data_dir), "--samples", "8", "--sketch", str(tmp)],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    # export PLATFORMIO_BUILD_FLAGS='-DTP_MODEL_HEADER=\"…\" -DTP_SAMPLES_HEADER=\"…\"'
    (assignment,) = shlex.split(out.removeprefix("export "))
    flags = dict(re.findall(r'-D(TP_\w+_HEADER)=\\"([^"\\]+)\\"', assignment))
    headers = Path(flags["TP_MODEL_HEADER"]), Path(flags["TP_SAMPLES_HEADER"])
    assert headers[0] == write_blob_header(tb.blob)
    # --sketch: the same two headers where the Arduino SelfTrain example includes them
    assert [(tmp / n).read_text() for n in ("model.h", "samples.h")] == [h.read_text()
                                                                         for h in headers]
    status, lines = run_selftrain(*headers, tmp)
    return tb, read_samples_header(headers[1]), status, lines


@pytest.mark.slow  # VWW on qemu-m4
def test_vww_run_equals_the_reference_bit_for_bit(vww_run):
    tb, run, status, lines = vww_run
    assert run["labels"] == [0, 1] * 4  # the script alternates the classes
    assert (run["steps"], run["lr"], run["seed"]) == (16, float(np.float32(0.02)), 7)
    assert lines == expected_lines(tb.program, tb.blob, run)
    assert status == 0 and lines[-1].startswith("selftrain ok"), "\n".join(lines)


@pytest.mark.slow  # VWW on qemu-m4
def test_scenario_waits_match_the_output_in_order(vww_run):
    """As Wokwi's wait-serial: each wait matches a later line containing its text. Wokwi skips
    lines that arrive before it registers the next wait, so the matched lines must not be
    neighbours (a training step or an evaluation lies between them)."""
    lines = vww_run[3]
    at = -2
    for wait in scenario_waits():
        found = next((i for i in range(at + 1, len(lines)) if wait in lines[i]), None)
        assert found is not None, f"no line after {lines[at]!r} contains {wait!r}"
        assert found > at + 1, f"{wait!r} matches the line right after the previous wait's"
        at = found
    assert lines[at].startswith("selftrain ok")


@pytest.mark.skipif(shutil.which("qemu-system-riscv32") is None
                    or shutil.which("riscv64-unknown-elf-gcc") is None,
                    reason="needs qemu-system-misc and gcc-riscv64-unknown-elf (scripts/setup.sh)")
@pytest.mark.slow  # a training run in soft float
def test_runs_bit_exact_off_arm_without_fpu(tmp_path):
    """The same application on rv32-virt (RV32IMC, soft float), a generated model (built in
    the IR: its verdict depends on the model, and TFLite conversions differ run to run)."""
    model = load_ir_model()
    run = {"inputs": model.inputs, "labels": model.labels.tolist(), "steps": 16, "lr": 0.05,
           "seed": 7}
    header = write_samples_header(model.inputs, run["labels"], steps=16, lr=0.05, seed=7)
    status, lines = run_selftrain(write_blob_header(model.blob), header, tmp_path, "rv32-virt")
    assert lines == expected_lines(model.program, model.blob, run, "rv32-virt")
    assert status == 0 and lines[-1].startswith("selftrain ok")


def test_nothing_learnt_fails_the_run(tmp_path):
    """lr 0: the last pass's losses equal the first's, so the verdict is a failure, status 1."""
    model = load_small_model()
    run = {"inputs": model.inputs, "labels": model.labels.tolist(), "steps": 8, "lr": 0.0,
           "seed": 3}
    header = write_samples_header(model.inputs, run["labels"], steps=8, lr=0.0, seed=3)
    status, lines = run_selftrain(write_blob_header(model.blob), header, tmp_path)
    assert lines == expected_lines(model.program, model.blob, run)
    assert lines[-1].startswith("selftrain failed (the loss did not fall): ")
    assert status == 1


@pytest.mark.slow  # one more firmware build
def test_samples_of_another_model_are_an_error_line(tmp_path):
    model = load_small_model()
    header = write_samples_header(np.zeros((2, 10), np.int8), [0, 1], steps=2)
    status, lines = run_selftrain(write_blob_header(model.blob), header, tmp_path)
    assert lines == ["selftrain error TP_ERR_BAD_INPUT in the compiled-in blob"]
    assert status == 11  # the status code


@pytest.mark.parametrize(("inputs", "labels", "steps"), [
    (np.zeros((4, 10), np.int8), [0, 1, 0, 1], 3),  # not one pass over the samples
    (np.zeros((4, 10), np.float32), [0, 1, 0, 1], 8),  # not int8
    (np.zeros((4, 10), np.int8), [0, 1], 8),  # a label missing
])
def test_samples_header_refuses_bad_runs(inputs, labels, steps):
    with pytest.raises(TinypropError, match="samples header: "):
        write_samples_header(inputs, labels, steps=steps)
