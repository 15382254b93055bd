# board_files.py - the files a tinyprop script keeps on a board: the blob, used in place where
# the board allows, and the parameters checkpoint, in the record format of the device
# firmware's store (firmware/include/tp_device.h). Copy it beside the example that imports it
# (train_vww.py, learn_camera.py; docs/micropython.md).
import struct

import tinyprop

RECORD = "<IIIIII"  # magic "TPPR", blob id, params bytes, step, reserved, crc32
MAGIC = 0x52505054


def load_blob(path):
    # A module frozen into the firmware (BLOB = "vww_model": its BLOB bytes stay in flash) or a
    # ROMFS file (/rom/vww.tpb: memoryview(f) is the flash, mapped in place) copy nothing. A
    # file on a writable filesystem is read into the heap once.
    if not path.endswith(".tpb"):
        return __import__(path).BLOB
    f = open(path, "rb")
    try:
        return memoryview(f)
    except TypeError:
        blob = f.read()
        f.close()
        return blob


def record_head(s, crc):
    req = s.requirements
    return struct.pack(RECORD, MAGIC, req["blob_id"], req["params"], s.step, 0, crc)


def save(s, path):
    head = record_head(s, 0)[:-4]
    crc = tinyprop.crc32(s.params, tinyprop.crc32(head))
    with open(path, "wb") as f:
        f.write(head + struct.pack("<I", crc))
        f.write(s.params)


def restore(s, path):
    # the checkpoint, if there is one for this blob; else the blob's parameters
    try:
        f = open(path, "rb")
    except OSError:
        return False
    with f:
        head = f.read(struct.calcsize(RECORD))
        if len(head) < struct.calcsize(RECORD):
            return False
        magic, blob_id, n, step, _, crc = struct.unpack(RECORD, head)
        req = s.requirements
        if magic != MAGIC or blob_id != req["blob_id"] or n != req["params"]:
            return False
        if f.readinto(s.params) == n and tinyprop.crc32(s.params, tinyprop.crc32(head[:-4])) == crc:
            s.step = step
            return True
    s.reset()
    return False
