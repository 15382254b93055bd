"""tinyprop.device.link over real transports: a TCP socket on 127.0.0.1 and a child process's pipes,
each with a small scripted Python device on the other end, and pyserial's loop://."""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Callable, Iterator

import pytest
from tinyprop.device import protocol as p
from tinyprop.device.link import Retry, open_link
from tinyprop.errors import DeviceError, TinypropError
from tinyprop.status import Status, status_message

READY = p.Ready(262144, 100000, 0xB10B, 0x000100, 1024, 1, p.CounterUnit.INSTRUCTIONS, "peer")
METRIC = p.Metric(3, 0.5, 1000, 96000, 3000, 4000, 2000, 1, 1, 1, 0)


def answer(seq: int, msg: p.Message) -> list[bytes] | None:
    """What the scripted device sends back for one request; None: hang up."""
    if isinstance(msg, p.Hello):
        return [b"\x13\x37 line noise \xff\0", p.encode(READY, seq)]
    if isinstance(msg, p.Train):
        return [
            p.encode(p.Ack(p.MsgType.RESET), (seq + 100) & 0xFFFF),  # answers someone else
            p.encode(p.Log("step starts"), 0),
            p.encode(p.Output(b"\x80\x7f"), seq),
            p.encode(METRIC, seq),
        ]
    if isinstance(msg, p.Eval):
        return [p.encode(p.Error(Status.TP_ERR_BAD_LABEL, f"label {msg.label} > 1"), seq)]
    if isinstance(msg, p.PullParams):
        return [p.encode(p.Params(msg.offset, b"\x01\x02\x03"), seq)]
    if isinstance(msg, p.Reset):
        return [p.encode(READY, 0)]  # reboots instead of answering
    if isinstance(msg, p.SaveParams):
        return [p.encode(p.Error(Status.TP_ERR_BAD_CRC, "frame CRC mismatch"), 0)]
    if isinstance(msg, p.BulkOpen):
        return [p.encode_frame(p.MsgType.METRIC, seq, b"short")]
    if isinstance(msg, p.BulkSample):
        return None
    return []


def serve(read: Callable[[], bytes], write: Callable[[bytes], None]) -> None:
    """The scripted device's loop: decode host frames, send the scripted answers."""
    decoder = p.FrameDecoder()
    while data := read():
        for frame in decoder.feed(data):
            if isinstance(frame, p.Frame):
                replies = answer(frame.seq, frame.message())
                if replies is None:
                    return
                for reply in replies:
                    write(reply)


@pytest.fixture
def tcp_device() -> Iterator[str]:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def run() -> None:
        conn, _ = server.accept()
        with conn:
            serve(lambda: conn.recv(4096), conn.sendall)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield f"socket://127.0.0.1:{port}"
    server.close()
    thread.join(timeout=5)


def test_request_skips_garbage_and_counts_it(tcp_device: str) -> None:
    with open_link(tcp_device) as link:
        # a patient link: the scripted device is a thread of this process, which a loaded machine
        # can hold past the first wait (0.25 s), or between its line noise and READY past the
        # 5 ms after which a garbled frame sends the request again (`soon`); a HELLO sent again
        # gets its line noise again, counted during the next request
        link.retry = Retry(first=30.0, soon=30.0)
        assert link.request(p.Hello(), expect=p.Ready, timeout=5) == READY
        assert link.stats.faults[Status.TP_ERR_BAD_COBS] == 1
        assert link.stats.garbage_bytes == len(b"\x13\x37 line noise \xff\0")
        assert link.request(p.PullParams(64), expect=p.MsgType.PARAMS) == p.Params(64, b"\1\2\3")
        assert link.stats.frames_out == 2


def test_exchange_collects_replies_and_routes_logs(tcp_device: str) -> None:
    logs: list[str] = []
    with open_link(tcp_device, on_log=logs.append) as link:
        replies = link.exchange(p.Train(1, p.SampleFlags.OUTPUT), until=p.Metric, timeout=5)
        assert replies == [p.Output(b"\x80\x7f"), METRIC]
        assert logs == ["step starts"]
        assert link.stats.stale == 1  # the ACK carrying another request's seq


def test_error_frame_raises_with_code_name_and_text(tcp_device: str) -> None:
    with open_link(tcp_device) as link, pytest.raises(DeviceError) as info:
        link.request(p.Eval(200), expect=p.Metric, timeout=5)
    assert str(info.value) == (
        f"device on {tcp_device} rejected EVAL (seq 1): TP_ERR_BAD_LABEL: "
        f"{status_message(Status.TP_ERR_BAD_LABEL)} (label 200 > 1)"
    )
    assert info.value.status == Status.TP_ERR_BAD_LABEL and info.value.exit_code == 2


def test_silence_raises_after_the_timeout(tcp_device: str) -> None:
    with open_link(tcp_device) as link, pytest.raises(DeviceError) as info:
        link.request(p.Hello(), expect=p.Metric, timeout=0.3)
    message = str(info.value)
    assert message.startswith(f"device on {tcp_device} stopped answering after 0.3 s: ")
    assert "no METRIC for HELLO (seq 1)" in message


def test_timeout_mentions_frames_the_device_could_not_read(tcp_device: str) -> None:
    match = r"BAD_CRC: .*\(frame CRC mismatch\)"
    with open_link(tcp_device) as link, pytest.raises(DeviceError, match=match):
        link.request(p.SaveParams(), expect=p.Ack, timeout=0.3)


def test_device_restart_fails_the_request_at_once(tcp_device: str) -> None:
    with open_link(tcp_device) as link, pytest.raises(DeviceError, match="restarted"):
        link.request(p.Reset(), expect=p.Ack, timeout=30)


def test_malformed_payload_is_a_device_error(tcp_device: str) -> None:
    with open_link(tcp_device) as link, pytest.raises(DeviceError, match="malformed"):
        link.request(p.BulkOpen("train.bin"), expect=p.Ack, timeout=5)


def test_peer_hanging_up_is_reported(tcp_device: str) -> None:
    with open_link(tcp_device) as link, pytest.raises(DeviceError, match="closed the link"):
        link.request(p.BulkSample(10), expect=p.Ack, timeout=5)


def test_sequence_numbers_increase_and_skip_zero(tcp_device: str) -> None:
    with open_link(tcp_device) as link:
        assert [link.next_seq() for _ in range(3)] == [1, 2, 3]
        link._seq = 0xFFFE
        assert [link.next_seq() for _ in range(3)] == [0xFFFF, 1, 2]


def test_pipe_link_to_a_child_process() -> None:
    with open_link(f"exec:{sys.executable} {__file__}") as link:
        assert link.request(p.Hello(), expect=p.Ready, timeout=10) == READY
        assert link.request(p.Train(0), expect=p.Metric, timeout=5) == METRIC
        with pytest.raises(DeviceError, match="closed the link"):
            link.request(p.BulkSample(10), expect=p.Ack, timeout=5)
        assert link.transport.process.wait(timeout=5) == 0


def test_loop_url_echoes_frames() -> None:
    with open_link("loop://") as link:
        seq = link.send(p.InputChunk(0, b"\x00\x01\x02"))
        assert link.recv(timeout=1) == (seq, p.InputChunk(0, b"\x00\x01\x02"))
        assert link.recv(timeout=0.05) is None


@pytest.mark.parametrize("spec", ["/dev/no-such-tty", "socket://127.0.0.1:1", "exec:"])
def test_unopenable_links_name_the_forms(spec: str) -> None:
    with pytest.raises(TinypropError, match="link"):
        open_link(spec)


if __name__ == "__main__":  # the device end of test_pipe_link_to_a_child_process
    serve(lambda: sys.stdin.buffer.raw.read(4096), lambda b: (sys.stdout.buffer.write(b),
                                                               sys.stdout.buffer.flush()))
