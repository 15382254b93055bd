"""A lossy link (issue 30, item 3): the fault-injecting proxy of tinyprop.faults.link between the
host and a real board (the compiled host board over its pipes; qemu-m4's UART socket in the slow
lane) drops, flips, duplicates and delays bytes and cuts the line, and training through it
applies the clean run's parameters after every step. The device answers a repeated training
request with its METRIC again instead of training twice."""

from __future__ import annotations

import functools
import socket
import tempfile

import numpy as np
import pytest
from modelgen import build_tflite, sample_inputs
from test_device_host import load_small_model
from tinyprop.compile.build import build
from tinyprop.device.boards import open_board
from tinyprop.device.protocol import Metric, Train
from tinyprop.faults.link import LineFaults, LineProxy, measure

LABELS = np.array([0, 1, 1, 0, 1, 0, 0, 1])


@functools.cache
def small_blob(target: str = "ref"):
    """The generated MobileNetV1 tail (last:2) as a TrainingBlob, and its eight samples."""
    path = build_tflite("mbv1_tail")
    return build(path, "last:2", None, target=target), sample_inputs(path, 8, seed=3)


def test_the_proxy_forwards_bytes_and_faults_them_at_its_rate():
    board, far = socket.socketpair()
    sent = bytes(range(256)) * 200  # 51,200 bytes
    with LineProxy(lambda: board.recv(65536), board.sendall, LineFaults(rate=1e-2),
                   seed=3) as proxy:
        host = socket.create_connection(("127.0.0.1", int(proxy.url.rsplit(":", 1)[1])))
        far.sendall(sent)
        far.shutdown(socket.SHUT_WR)
        got = b""
        while chunk := host.recv(65536):
            got += chunk
        host.close()
    board.close()
    far.close()
    # each byte hit with probability 1e-2: 512 expected, and the stream shows them
    assert 400 < proxy.injected < 620
    assert got != sent and abs(len(got) - len(sent)) < proxy.injected


def test_a_clean_proxy_is_transparent():
    board, far = socket.socketpair()
    with LineProxy(lambda: board.recv(65536), board.sendall, LineFaults(), seed=0) as proxy:
        host = socket.create_connection(("127.0.0.1", int(proxy.url.rsplit(":", 1)[1])))
        host.sendall(b"\x01\x02\x00" * 1000)
        got = b""
        while len(got) < 3000:
            got += far.recv(65536)
        host.close()
        far.close()
    board.close()
    assert got == b"\x01\x02\x00" * 1000 and proxy.injected == 0


def test_a_repeated_training_request_trains_once():
    """A TRAIN sent twice with its seq (its METRIC lost, as the host thinks): the same METRIC
    twice, one step, the reference's parameters after one step."""
    model = load_small_model()
    with tempfile.TemporaryDirectory() as work, open_board("host", model.blob, work) as dev:
        dev.set_hparams(lr=0.05, seed=7)
        dev.write_input(model.inputs[0])
        msg = Train(int(model.labels[0]))
        seq = dev.link.send(msg)
        dev.link._write(msg, seq, again=True)
        metrics = []
        while len(metrics) < 2:
            got = dev.link.recv(5.0)
            assert got is not None, "no METRIC for the repeated TRAIN"
            if isinstance(got.msg, Metric):
                assert got.seq == seq
                metrics.append(got.msg)
        assert metrics[0] == metrics[1] and metrics[0].step == 0
        assert dev.train(model.inputs[1], int(model.labels[1]))["step"] == 1
        ref = model.reference(2, lr=0.05, seed=7)
        assert dev.pull_params() == ref.params_bytes()


def test_training_through_a_lossy_line_equals_the_clean_run():
    tb, xs = small_blob()
    fig = measure(tb, xs, LABELS, board="host", rates=(1e-2,), steps=2, cut_s=0.5)
    assert fig["wrong_steps"] == 0, fig
    assert fig["link_faults"] > 10 and fig["frames_retried"] > 0, fig
    assert set(fig["rates"]) == {"0.01"} and fig["seconds_lost"] > 0


@pytest.mark.slow  # QEMU
def test_training_on_qemu_through_a_lossy_line_equals_the_clean_run():
    tb, xs = small_blob("cortex-m4")
    fig = measure(tb, xs, LABELS, board="qemu-m4", rates=(1e-3, 1e-2), steps=12, cut_s=1.0)
    assert fig["wrong_steps"] == 0, fig
    assert fig["link_faults"] > 10 and fig["frames_retried"] > 0, fig
