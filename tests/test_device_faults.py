"""Bad input to the device firmware on qemu-m4, over its real TCP socket: every fault is
answered with an ERROR frame and the device keeps serving (the next HELLO still works)."""

from __future__ import annotations

import struct
import zlib

import pytest
from test_device_host import Model, load_small_model
from tinyprop.device.boards import open_board
from tinyprop.device.device import params_record, write_bulk_file
from tinyprop.device.protocol import (
    MAX_BODY,
    BulkOpen,
    BulkSample,
    Error,
    FrameDecoder,
    InputChunk,
    Ready,
    Train,
    cobs_encode,
    encode_frame,
)
from tinyprop.errors import DeviceError
from tinyprop.status import Status


@pytest.fixture(scope="module")
def model() -> Model:
    return load_small_model()


@pytest.fixture(scope="module")
def dev(model, tmp_path_factory):
    """One QEMU for the module: the faults must not need a restart."""
    workdir = tmp_path_factory.mktemp("faults")
    inputs, labels = model.inputs[:2], model.labels[:2]
    write_bulk_file(workdir / "bad_label.bin", inputs, [0, 9])
    (workdir / "ragged.bin").write_bytes(b"\x01" * (inputs[0].size + 5))
    write_bulk_file(workdir / "good.bin", inputs, labels)
    with open_board("qemu-m4", model.blob, workdir) as device:
        yield device


def line_error(dev, wire: bytes) -> Error:
    """Write raw bytes; the ERROR the device sends for a frame it cannot read (seq 0). Its code
    is the C decoder's status itself, so it equals the Python twin's verdict on the bytes."""
    dev.link.transport.write(wire)
    got = dev.link.recv(5.0)
    assert got is not None and isinstance(got.msg, Error), got
    assert got.seq == 0
    assert got.msg.code == FrameDecoder().feed(wire)[-1].fault
    return got.msg


def rejected(dev, msg) -> str:
    with pytest.raises(DeviceError) as err:
        dev.link.exchange(msg, until=0x82)  # ACK or METRIC never come: an ERROR does
    return str(err.value)


@pytest.fixture(autouse=True)
def still_serving(dev, model):
    yield
    assert dev.hello().blob_id == struct.unpack("<I", model.blob[-4:])[0]


def test_garbage_bytes(dev):
    assert line_error(dev, b"\x13\x37 not a frame \xff\xfe\x00").code in (
        Status.TP_ERR_BAD_COBS, Status.TP_ERR_FRAME_TRUNCATED, Status.TP_ERR_LENGTH_MISMATCH,
        Status.TP_ERR_BAD_CRC)


def test_truncated_frame(dev):
    wire = encode_frame(0x05, 1, b"\0\0\0\0" + bytes(200))
    assert line_error(dev, wire[:40] + b"\0").code in (Status.TP_ERR_BAD_COBS,
                                                        Status.TP_ERR_FRAME_TRUNCATED)


def test_bad_crc(dev):
    body = struct.pack("<BHH", 0x01, 1, 0)
    wire = cobs_encode(body + struct.pack("<I", zlib.crc32(body) ^ 1)) + b"\0"
    assert line_error(dev, wire).code == Status.TP_ERR_BAD_CRC


def test_frame_longer_than_the_receive_buffer(dev):
    body = bytes([0x05]) + bytes(MAX_BODY + 10)
    assert line_error(dev, cobs_encode(body) + b"\0").code == Status.TP_ERR_FRAME_TOO_LONG


def test_unknown_type_keeps_its_seq(dev):
    dev.link.transport.write(encode_frame(0x55, 4242))
    got = dev.link.recv(5.0)
    assert isinstance(got.msg, Error) and got.msg.code == Status.TP_ERR_UNKNOWN_TYPE
    assert got.seq == 4242


def test_wrong_sample_size(dev, model):
    dev.link.request(InputChunk(0, model.inputs[0].tobytes()[:100]), expect=0x82)
    assert "WRONG_SAMPLE_SIZE" in rejected(dev, Train(0))


def test_input_chunk_out_of_range(dev, model):
    assert "BAD_OFFSET" in rejected(dev, InputChunk(model.inputs[0].size - 10, bytes(20)))


def test_label_out_of_range(dev, model):
    dev.write_input(model.inputs[0])
    assert "TP_ERR_BAD_LABEL" in rejected(dev, Train(2))


def test_bulk_label_out_of_range(dev):
    assert dev.bulk_open("bad_label.bin") == 2
    dev.train_bulk(0)
    assert "TP_ERR_BAD_LABEL" in rejected(dev, BulkSample(1))


def test_bulk_sample_index_out_of_range(dev):
    assert dev.bulk_open("good.bin") == 2
    assert "BAD_OFFSET" in rejected(dev, BulkSample(2))


def test_bulk_file_of_the_wrong_size(dev):
    assert "WRONG_SAMPLE_SIZE" in rejected(dev, BulkOpen("ragged.bin"))
    assert "TP_ERR_NOT_FOUND" in rejected(dev, BulkOpen("no_such_file.bin"))


def test_params_for_another_blob_are_refused(dev, model):
    before = dev.pull_params()
    other = params_record(bytes(len(before)), blob=0x12345678)
    with pytest.raises(DeviceError, match="RECORD_MISMATCH.*another blob"):
        dev.push_record(other)
    assert dev.pull_params() == before


def test_store_of_another_blob_is_ignored_at_boot(model, tmp_path):
    params = load_small_model().reference(0).params_bytes()
    (tmp_path / "tinyprop.store").write_bytes(params_record(bytes(len(params)), 0x12345678))
    with open_board("qemu-m4", model.blob, tmp_path) as other:
        assert other.pull_params() == params
        assert any("store ignored" in text for text in other.link.logs)
        assert isinstance(other.hello(), Ready)

