"""The learn application (firmware/apps/learn) on the host board, and tinyprop learn's inputs:
a board learns from its own camera with no host. The camera is virtual (tinyprop.learn.camera):
vww-mini's COCO training photos under the haze shift, as a sensor delivers them. Standalone the
app prints lines; a host's key labels the latest frame; a live camera waits for its frames;
NumPy equals the C core's replay; every bad input is one line. On qemu-m4: test_learn_qemu.py."""

from __future__ import annotations

import re
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest
from learn_camera import CLASSES
from PIL import Image
from tinyprop.cli import main
from tinyprop.device.firmware import build_firmware
from tinyprop.device.protocol import Ack, Label, Metric, MetricFlags, Seen
from tinyprop.engines import BlobModel
from tinyprop.errors import DeviceError, TinypropError
from tinyprop.learn.camera import (
    NO_LABEL,
    camera_mode,
    read_frames,
    read_label_script,
    sensor_frame,
    write_camera,
)
from tinyprop.learn.run import (
    LearnConfig,
    LearnSession,
    learn_firmware,
    replay_on_host,
)


def test_the_numpy_reference_agrees(learn_blob, learn_frames):
    """The host replay on the C core equals NumPy's (the board equals the C core above)."""
    frames = read_frames(learn_frames / "frames", camera_mode("96-rgb565"))
    labels = read_label_script(learn_frames / "labels.csv", frames.names, CLASSES)[:6]
    cfg = LearnConfig(lr=0.01, replay=1)
    short = type(frames)(frames.mode, frames.raw[:6], frames.names[:6])
    c_params, c_steps = replay_on_host(BlobModel("vww", learn_blob.blob), short, labels, cfg)
    np_params, np_steps = replay_on_host(learn_blob, short, labels, cfg, engine="reference")
    assert c_params == np_params and c_steps == np_steps


def test_standalone_it_prints_lines(learn_blob, learn_frames, tmp_path):
    """No host: the host board's learn app plays its camera and prints a line a frame, then
    its parameters' CRC, which the host replay gives too."""
    frames = read_frames(learn_frames / "frames", camera_mode("96-rgb888"))
    labels = read_label_script(learn_frames / "labels.csv", frames.names, CLASSES)[:8]
    short = type(frames)(frames.mode, frames.raw[:8], frames.names[:8])
    write_camera(tmp_path, short, labels, wait_host=False)
    cfg = LearnConfig(lr=0.01, save_every=0)
    exe = learn_firmware("host", learn_blob.blob, cfg, short)
    out = subprocess.run([str(exe)], cwd=tmp_path, stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    lines = out.splitlines()
    assert lines[0].startswith("learn ready board host blob ")
    frame_lines = [ln for ln in lines if ln.startswith("frame ")]
    assert [int(ln.split()[1]) for ln in frame_lines] == list(range(8))
    assert [("label" in ln) for ln in frame_lines] == [y != NO_LABEL for y in labels]
    host, _ = replay_on_host(BlobModel("vww", learn_blob.blob), short, labels, cfg)
    done = re.search(r"learn done frames 8 labelled (\d+) .* params crc32 ([0-9a-f]{8})", out)
    assert done and int(done.group(2), 16) == zlib.crc32(host)
    assert (tmp_path / "tinyprop.store").exists()  # saved when the frames ended


def test_a_learn_app_too_large_for_the_board_is_refused(learn_blob, learn_frames, tmp_path):
    frames = read_frames(learn_frames / "frames", camera_mode("qcif-rgb565"))
    with pytest.raises(TinypropError, match=r"the learn app does not fit board qemu-m4 .* "
                       r"a qcif-rgb565 frame \(50,688 B\) and 4 replay frames \(110,592 B\)"):
        LearnSession("qemu-m4", learn_blob.blob, frames, None, LearnConfig(replay=4),
                     tmp_path).__enter__()


def test_a_board_without_a_camera_says_so(learn_blob, tmp_path):
    with pytest.raises(DeviceError, match=r"no camera on this board \(TP_ERR_UNSUPPORTED\)"), \
            LearnSession("host", learn_blob.blob, None, None, LearnConfig(), tmp_path) as run:
        run.hello()


def test_a_label_out_of_range_is_refused_and_the_frame_predicted(learn_blob, learn_frames,
                                                                 tmp_path):
    frames = read_frames(learn_frames / "frames", camera_mode("96-gray"))
    short = type(frames)(frames.mode, frames.raw[:2], frames.names[:2])
    with LearnSession("host", learn_blob.blob, short, [7, 1], LearnConfig(), tmp_path) as run:
        events = list(run.events())
    errors = [e for e in events if e["type"] == "error"]
    assert [(e["name"], e["text"]) for e in errors] == [
        ("TP_ERR_BAD_LABEL", "label 7 of frame 0 is out of range: the model has 2 classes")]
    kinds = [(e["type"], e["frame"]) for e in events if e["type"] in ("step", "sample_eval")]
    assert kinds == [("sample_eval", 0), ("step", 1)]


def test_a_key_on_the_host_labels_the_latest_frame(learn_blob, learn_frames, tmp_path):
    """LABEL from the host (a key press) trains the frame the board took last (a live camera at
    10 frames a second, so the frames cannot run out before the key)."""
    frames = read_frames(learn_frames / "frames", camera_mode("96-rgb565"))
    short = type(frames)(frames.mode, frames.raw[:5], frames.names[:5])
    with LearnSession("host", learn_blob.blob, short, None, LearnConfig(), tmp_path,
                      live_fps=10.0) as run:
        run.hello()
        run.live.start()
        while not isinstance(run.link.recv(30).msg, Seen):
            pass
        run.link.send(Label(1))
        replies = []
        while not any(isinstance(m, Ack) for m in replies):
            replies.append(run.link.recv(30).msg)
    trained = [m for m in replies if isinstance(m, Metric) and not m.flags & MetricFlags.EVAL]
    assert len(trained) == 1 and trained[0].label == 1 and trained[0].step == 0


def test_a_live_camera_waits_for_its_frames_and_takes_keys(learn_blob, learn_frames, tmp_path):
    """--labels keys: the host adds frames at 4 a second; a label given after the first frame
    was seen trains the latest one; the run ends when the frames do."""
    frames = read_frames(learn_frames / "frames", camera_mode("96-gray"))
    short = type(frames)(frames.mode, frames.raw[:5], frames.names[:5])
    events = []
    with LearnSession("host", learn_blob.blob, short, None, LearnConfig(), tmp_path,
                      live_fps=4.0) as run:
        for e in run.events():
            events.append(e)
            if e["type"] == "sample_eval" and e["frame"] == 1:
                run.give_label(1)
    per_frame = [e for e in events if e["type"] in ("sample_eval", "step")]
    assert [e["frame"] for e in per_frame if e["type"] == "sample_eval"] == [0, 1, 2, 3, 4]
    steps = [e for e in per_frame if e["type"] == "step"]
    assert len(steps) == 1 and steps[0]["label"] == 1 and steps[0]["frame"] in (1, 2, 3)
    assert events[-1]["type"] == "summary" and events[-1]["frames"] == 5


# ---- the command's one-line errors (no board started) ----

def _learn(tmp_path: Path, blob: Path, *extra: str) -> list[str]:
    return ["learn", "--blob", str(blob), "--workdir", str(tmp_path / "wd"), "--plain", *extra]


def test_bad_inputs_are_one_line(learn_blob, learn_frames, tmp_path, capsys):
    blob = learn_blob.path
    frames = str(learn_frames / "frames")
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "a.raw").write_bytes(bytes(100))
    bad_labels = tmp_path / "bad.csv"
    cases = [
        (["--camera", frames, "--format", "64-yuv"], "--format 64-yuv: unsupported camera format"),
        (["--camera", str(raw), "--format", "96-gray"],
         "a.raw: a raw frame of 100 bytes, but a 96-gray frame has 9216"),
        (["--camera", frames, "--board", "esp32"],
         "--board esp32: a real board learns from its own camera and button"),
        (["--camera", frames, "--labels", str(bad_labels)], "label 2 is out of range"),
        (["--camera", str(tmp_path / "none")], "no such folder or multi-frame image"),
    ]
    bad_labels.write_text("frame,label\nf000.png,2\n")
    for extra, message in cases:
        assert main(_learn(tmp_path, blob, *extra)) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err, err
    bad_labels.write_text("f000.png,cat\n")
    assert main(_learn(tmp_path, blob, "--camera", frames, "--labels", str(bad_labels))) == 2
    assert "class 'cat' is not one of the model's (non_person, person)" in capsys.readouterr().err


@pytest.mark.slow  # a RISC-V build (qemu-m4 and host are built above)
def test_the_learn_app_builds_for_risc_v(learn_blob, learn_frames):
    frames = read_frames(learn_frames / "frames", camera_mode("qcif-rgb565"))
    assert learn_firmware("rv32-virt", learn_blob.blob, LearnConfig(replay=2), frames).is_file()
    with pytest.raises(Exception, match="APP=learn needs BLOB"):
        build_firmware("qemu-m4", "learn")


def test_a_multi_frame_image_is_a_camera_and_raw_frames_are_taken_as_they_are(tmp_path):
    """An animated GIF plays its frames (named by index); a raw frame file is the sensor's bytes
    as they are; both in name order with photos."""
    rng = np.random.default_rng(3)
    scenes = [rng.integers(0, 256, (120, 160, 3), np.uint8) for _ in range(3)]
    gif = tmp_path / "clip.gif"
    Image.fromarray(scenes[0]).save(gif, save_all=True,
                                    append_images=[Image.fromarray(s) for s in scenes[1:]])
    mode = camera_mode("qqvga-rgb565")
    frames = read_frames(gif, mode)
    with Image.open(gif) as img:  # GIF frames are palette images: compare with what PIL reads
        decoded = []
        for i in range(3):
            img.seek(i)
            decoded.append(np.asarray(img.convert("RGB")))
    assert frames.names == ("0", "1", "2")
    assert frames.raw == tuple(sensor_frame(d, mode) for d in decoded)
    folder = tmp_path / "mixed"
    folder.mkdir()
    Image.fromarray(scenes[0]).save(folder / "a.png")
    (folder / "b.raw").write_bytes(bytes(range(256)) * (mode.frame_bytes // 256))
    mixed = read_frames(folder, mode)
    assert mixed.names == ("a.png", "b.raw")
    assert mixed.raw == (sensor_frame(scenes[0], mode), (folder / "b.raw").read_bytes())


def test_train_and_eval_see_photos_as_the_board_camera_sends_them(learn_blob, vww_data_dir, capsys):
    """load_split(camera=...) (train/eval --camera) gives each photo as a board in that mode
    makes it its input: the learn app's frame path (model_input) on the sensor's frame."""
    from tinyprop.data.datasets import load_images, load_split
    from tinyprop.learn.camera import Frames
    from tinyprop.learn.run import model_input

    t = learn_blob.graph.input
    for fmt in ("qcif-gray", "96-rgb565"):
        xs, ys, names = load_split(vww_data_dir, "holdout", t.s, t.zp, "haze", camera=fmt)
        rgb = load_images(vww_data_dir, "holdout", "haze")[0][:5]
        mode = camera_mode(fmt)
        frames = Frames(mode, tuple(sensor_frame(x, mode) for x in rgb), ())
        assert all(np.array_equal(xs[i], model_input(frames, i, learn_blob.blob))
                   for i in range(5))
    assert main(["eval", str(learn_blob.source), "--data", str(vww_data_dir), "--camera",
                 "64-yuv"]) == 2
    assert "--camera 64-yuv: unsupported camera format" in capsys.readouterr().err
