# learn_camera.py - an OpenMV Cam learns from its own camera (docs/micropython.md, "Camera
# frames"): every frame goes through the person detector and its prediction is printed; hold a
# button while the camera looks and that frame is labelled, and the model takes one training
# step on it. The parameters are saved every SAVE_EVERY labelled steps and restored at start,
# so a power cycle keeps what the camera learned. No pixel leaves the board.
#
# On the host: tinyprop convert vww_96_int8.tflite -o vww.tpb --scheme last:2, then copy
# vww.tpb, micropython/examples/board_files.py and this file (as main.py) to the camera's
# drive; a firmware with the tinyprop module (docs/micropython.md, "Building"); two buttons
# from P4 and P5 to GND.
import sensor
import tinyprop
from board_files import load_blob, restore, save
from machine import Pin

BLOB = "vww.tpb"
PARAMS = "params.bin"
LR = 0.005
SEED = 0
SAVE_EVERY = 10
BUTTONS = [(Pin("P4", Pin.IN, Pin.PULL_UP), 0),  # held: "no person"
           (Pin("P5", Pin.IN, Pin.PULL_UP), 1)]  # held: "person"

# Grayscale: OpenMV keeps RGB565 pixels as native 16-bit words, not the high-byte-first order
# tinyprop.RGB565 reads. The model is RGB; the core repeats each gray value on the 3 channels.
sensor.reset()
sensor.set_pixformat(sensor.GRAYSCALE)
sensor.set_framesize(sensor.QCIF)  # 176 x 144
sensor.skip_frames(time=2000)  # let exposure settle

s = tinyprop.Session(load_blob(BLOB))
s.set_hparams(lr=LR, seed=SEED)
if restore(s, PARAMS):
    print("resumed at step", s.step)
s.camera(176, 144, tinyprop.GRAY8)  # each frame is cropped, scaled and quantized in C
labelled = 0
while True:
    frame = sensor.snapshot().bytearray()  # the frame buffer itself: no copy
    label = next((k for button, k in BUTTONS if button.value() == 0), None)
    if label is None:
        print("sees", s.infer(frame))
        continue
    loss, pred = s.train(label, frame)
    print("step", s.step, "label", label, "predicted", pred, "loss %.3f" % loss)
    labelled += 1
    if labelled % SAVE_EVERY == 0:
        save(s, PARAMS)
