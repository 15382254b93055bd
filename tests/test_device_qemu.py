"""The device firmware on the emulated Cortex-M4 (QEMU mps2-an386, UART on a real TCP socket):
training equals the NumPy reference bit for bit, bulk samples through semihosting, the store
across a restart, a killed QEMU, and the live monitor source. The blobs plan the Cortex-M DSP
kernels' scratch, so the training forward runs them."""

from __future__ import annotations

import threading

import pytest
from test_device_host import (
    check_training,
    load_small_model,
    load_vww_model,
    train_steps,
)
from tinyprop.device.boards import open_board
from tinyprop.device.device import write_bulk_file
from tinyprop.errors import DeviceError
from tinyprop.monitor.sources import live_source


@pytest.fixture
def small_model():
    return load_small_model("cortex-m4")


@pytest.fixture
def vww_model(vww_model_path, vww_data_dir):
    return load_vww_model(vww_model_path, vww_data_dir, "cortex-m4")


def test_small_model_trains_bit_exact(small_model, tmp_path):
    events = check_training("qemu-m4", small_model, 6, tmp_path)
    # -icount: the cost is guest instructions, counted in ticks of 40
    assert all(e["counter"] > 0 and e["counter"] % 40 == 0 for e in events)


@pytest.mark.slow  # VWW on qemu-m4
def test_vww_trains_bit_exact(vww_model, tmp_path):
    events = check_training("qemu-m4", vww_model, 2, tmp_path)
    memory = events[-1]["memory"]
    used = memory["static"] + memory["arena_peak"] + memory["trainable"] + memory["stack_peak"]
    assert used < memory["sram"] == 262144


def test_bulk_samples_through_semihosting(small_model, tmp_path):
    write_bulk_file(tmp_path / "train.bin", small_model.inputs, small_model.labels)
    with open_board("qemu-m4", small_model.blob, tmp_path) as dev:
        assert dev.bulk_open("train.bin") == len(small_model.labels)
        dev.set_hparams(0.05, 7)
        for i in range(4):
            dev.train_bulk(i)
        assert dev.pull_params() == small_model.reference(4).params_bytes()


def test_saved_params_survive_killing_qemu(small_model, tmp_path):
    with open_board("qemu-m4", small_model.blob, tmp_path) as dev:
        train_steps(dev, small_model, 2)
        dev.save()
        saved = dev.pull_params()
        dev.reset()
        dev.process.proc.kill()
    assert (tmp_path / "tinyprop.store").exists()
    with open_board("qemu-m4", small_model.blob, tmp_path) as dev:
        assert dev.pull_params() == saved == small_model.reference(2).params_bytes()


def test_killing_qemu_mid_run_names_the_link(small_model, tmp_path):
    with open_board("qemu-m4", small_model.blob, tmp_path) as dev:
        dev.set_hparams(0.05, 7)
        threading.Timer(0.3, dev.process.proc.kill).start()
        with pytest.raises(DeviceError) as err:
            for _ in range(10_000):
                dev.train(small_model.inputs[0], 0)
    assert dev.process.url in str(err.value)


def test_live_source_reports_ready_then_the_disconnect(small_model, tmp_path):
    with open_board("qemu-m4", small_model.blob, tmp_path) as dev:
        url = dev.process.url
        dev.close()  # QEMU's UART takes one client: hand it to the monitor
        events = live_source(url)
        start = next(events)
        dev.process.proc.kill()
        end = next(events)
    assert start["type"] == "start" and start["board"] == "qemu-m4"
    assert start["counter_unit"] == "instructions" and start["sram"] == 262144
    assert end["type"] == "disconnect" and url in end["text"]
