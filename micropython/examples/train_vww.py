# train_vww.py - fine-tune the MLPerf Tiny person detector on a MicroPython board and watch the
# run in `tinyprop monitor` (docs/micropython.md).
#
# On the host (tinyprop installed):
#   tinyprop convert vww_96_int8.tflite -o vww.tpb --scheme last:2 --target cortex-m4
#   (the Cortex-M DSP kernels, which the module builds for an M4, M7 or M33: a step takes 4.7
#   times fewer instructions than with the reference kernels; --target ref for other CPUs)
#   python micropython/samples.py vww.tpb --data vww-mini --shift haze -o samples.bin
#   mpremote cp vww.tpb samples.bin micropython/examples/board_files.py : \
#       + cp micropython/examples/train_vww.py :main.py + reset
#   tinyprop monitor /dev/ttyACM0         # the board waits for it, then streams every step
# The unix port takes the files as arguments, and the monitor runs it:
#   tinyprop monitor "exec:micropython train_vww.py vww.tpb samples.bin"
#
# Samples: a file on the board (a label byte, then the int8 input, per sample), or, on a board
# with a network, streamed from the host: SAMPLES = "192.168.1.10:9000" and on the host
#   python micropython/samples.py vww.tpb --data vww-mini --shift haze --serve 9000
# Each sample is read straight into the model's input tensor: no second copy in the heap.
# The parameters are checkpointed to PARAMS after every epoch, in the record format of the
# device firmware's store (board_files.py), and restored at start.
import sys

import micropython
import tinyprop
from board_files import load_blob, restore, save

BLOB = "vww.tpb"
SAMPLES = "samples.bin"
PARAMS = "params.bin"
EPOCHS = 1
LR = 0.005
SEED = 0
WAIT_MS = 10000  # for the monitor's HELLO; then train without one

def open_samples(where):
    host, _, port = where.rpartition(":")
    if not port.isdigit():
        return open(where, "rb")
    import socket

    sock = socket.socket()
    sock.connect(socket.getaddrinfo(host, int(port))[0][-1])
    return sock


def fill(stream, buf):
    # read len(buf) bytes into buf; a socket may deliver them in pieces
    view, got = memoryview(buf), 0  # (a slice of a bytearray would be a copy)
    while got < len(view):
        n = stream.readinto(view[got:])
        if not n:
            break
        got += n
    return got


def main(blob_path, samples_path):
    s = tinyprop.Session(load_blob(blob_path))
    s.set_hparams(lr=LR, seed=SEED)
    resumed = restore(s, PARAMS)
    # frames to the console's stream, the monitor's HELLO from it; frames carry 0x03 bytes, so
    # Ctrl-C is off while they flow
    link = tinyprop.Link(sys.stdout.buffer, s, board=sys.platform, input=sys.stdin.buffer)
    micropython.kbd_intr(-1)
    try:
        link.wait(WAIT_MS)
        if resumed:
            link.log("resumed at step %d from %s" % (s.step, PARAMS))
        label = bytearray(1)
        for epoch in range(EPOCHS):
            samples = open_samples(samples_path)
            while fill(samples, label) == 1:
                x = s.input()
                if fill(samples, x) < len(x):
                    break
                s.train(label[0])
                link.metric()
                link.poll()  # a monitor started later still gets its READY
            samples.close()
            try:
                save(s, PARAMS)
                saved = "saved to " + PARAMS
            except OSError as e:  # no writable filesystem
                saved = "not saved (%s)" % e
            link.log("epoch %d done: %d steps, %s" % (epoch, s.step, saved))
    finally:
        micropython.kbd_intr(3)


main(*(sys.argv[1:3] if len(sys.argv) > 2 else (BLOB, SAMPLES)))
