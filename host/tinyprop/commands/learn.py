"""tinyprop learn: a board learns from its own camera with no host (firmware/apps/learn).

On qemu-m4, rv32-virt and host the camera is virtual: frames from a folder of images (or one
multi-frame image), converted to the chosen sensor's frames, and labels from a script; the
board keeps what it learned in its store (--workdir), so a second run resumes from it."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from ..learn.camera import DEFAULT_MODE, MODES


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("learn", help="a board learns from its own camera (capture, label, "
                       "train, keep), with a virtual camera on emulated boards")
    p.add_argument("--blob", type=Path, required=True, help="training blob (tinyprop convert)")
    p.add_argument("--board", default="qemu-m4", help="qemu-m4 (default), rv32-virt or host: "
                   "a virtual camera; nano33ble or esp32: the learn app is flashed (PlatformIO)"
                   " and, with --port, followed")
    p.add_argument("--port", help="a real board's serial port: follow it as it learns (and "
                   "upload there)")
    p.add_argument("--env", help="the PlatformIO env of a real board's learn app (the ESP32 "
                   "has two: esp32cam-learn, esp32s3eye-learn)")
    p.add_argument("--build-only", action="store_true", help="a real board: build its learn "
                   "app, upload nothing")
    p.add_argument("--camera", type=Path, help="the virtual camera's frames: a folder of "
                   "PNG/JPEG files (in name order; raw sensor frames as .raw) or one animated "
                   "GIF/PNG or multi-page TIFF")
    p.add_argument("--labels", help="label script, CSV lines frame,label (a frame's file name, "
                   "or index in a multi-frame file; a class name or index); frames not listed "
                   "carry no label: the board only predicts them. `keys`: you label them as they "
                   "come, at --fps (a class's index key, or its name and Enter)")
    p.add_argument("--fps", type=float, default=1.0, help="frames a second of the virtual "
                   "camera with --labels keys (default 1)")
    p.add_argument("--format", default=DEFAULT_MODE, help=f"the sensor's mode: {', '.join(MODES)}"
                   f" (default {DEFAULT_MODE})")
    p.add_argument("--shift", default="none", help="a camera shift applied to the photos first "
                   "(none, haze, night, sodium, blur)")
    p.add_argument("--classes", help="class names, comma-separated, when the blob has none")
    p.add_argument("--lr", type=float, default=0.005, help="learning rate (default 0.005)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save-every", type=int, default=10, metavar="N",
                   help="save the parameters to the board's store every N labelled frames "
                   "(default 10; 0: only when the frames end)")
    p.add_argument("--save-minutes", type=int, metavar="M",
                   help="save at most once every M minutes, so a board's flash lasts (default: "
                   "120 on a real board, 5 years of continuous learning, docs/boards.md; none "
                   "on a virtual camera's recorded frames; 0: no limit)")
    p.add_argument("--replay", type=int, default=0, metavar="K",
                   help="keep the last K labelled frames and train on them again after each new"
                   " one (default 0)")
    p.add_argument("--thumbs", type=int, default=1, metavar="N",
                   help="a thumbnail of every N-th frame into the log and the monitor "
                   "(default 1; 0: none)")
    p.add_argument("--workdir", type=Path, help="the board's folder: its store, the camera's "
                   "files (default: BLOB.learn/ beside the blob)")
    p.add_argument("--fresh", action="store_true", help="forget what the board stored: start "
                   "from the blob's parameters")
    p.add_argument("--model", type=Path, help="source .tflite if it moved since convert")
    p.add_argument("--log", type=Path, help="JSONL run log")
    p.add_argument("--out", type=Path, help="write the fine-tuned .tflite here")
    p.add_argument("--plain", action="store_true", help="one line an event (auto when not a tty)")
    p.set_defaults(func=run)


def model_classes(tb, given: str | None) -> tuple[str, ...]:
    """The class names: --classes, the blob's, those beside its source, VWW's for two classes,
    else the indices."""
    from ..data.datasets import CLASSES
    from ..errors import TinypropError
    from ..training.head import read_labels
    n = tb.classes
    if given:
        names = tuple(c.strip() for c in given.split(","))
        if len(names) != n:
            raise TinypropError(f"--classes {given}: {len(names)} names, but the model has {n} "
                                "classes")
        return names
    named = tb.labels or read_labels(tb.source)
    if named:
        return tuple(named)
    return CLASSES if n == len(CLASSES) else tuple(str(k) for k in range(n))


def read_keys(session, classes, stream) -> None:
    """Give the board a label for each line typed on `stream` (a class's name or index), on a
    thread; a line that is neither is said so on stderr and skipped."""
    import threading

    def loop() -> None:
        for line in stream:
            word = line.strip()
            if word in classes:
                session.give_label(classes.index(word))
            elif word.isdigit() and int(word) < len(classes):
                session.give_label(int(word))
            elif word:
                print(f"{word!r}: not a class; type one of {', '.join(classes)} or its index",
                      file=sys.stderr)

    threading.Thread(target=loop, daemon=True).start()


def show(source, args: argparse.Namespace, on_key=None):
    """The run's events on the dashboard (a terminal) or as lines, logged to --log; `on_key`:
    the dashboard's keys a label."""
    from ..monitor import plain_lines, run_dashboard
    if args.log is not None:
        args.log.unlink(missing_ok=True)
    if args.plain or not sys.stdout.isatty():
        return plain_lines(source, sys.stdout, log_path=args.log)
    return run_dashboard(source, log_path=args.log, on_key=on_key)


def key_label(session, classes):
    """The dashboard's key handler of --labels keys: a class's index key labels the latest
    frame."""
    def on_key(key: str) -> bool:
        if key.isdigit() and int(key) < len(classes):
            session.give_label(int(key))
            return True
        return False
    return on_key


def real_board(args: argparse.Namespace, profile) -> int:
    """Flash the learn app to a camera board (PlatformIO), then follow it on --port."""
    import subprocess

    from ..compile.blobfile import load_blob
    from ..device.flash import flash_job
    from ..errors import TinypropError
    from ..learn.run import (
        DEFAULT_FRAME_BYTES,
        REAL_BOARD_SAVE_MINUTES,
        LearnConfig,
        LearnSession,
        check_learn_fits,
        write_learn_config,
    )
    from ..training.export import export_params

    if args.camera is not None or args.labels is not None:
        raise TinypropError(f"--board {args.board}: a real board learns from its own camera "
                            "and button; --camera and --labels are for qemu-m4, rv32-virt, host")
    tb = load_blob(args.blob, args.model)
    minutes = REAL_BOARD_SAVE_MINUTES if args.save_minutes is None else args.save_minutes
    cfg = LearnConfig(args.lr, args.seed, args.save_every, args.replay, args.thumbs, minutes)
    if profile.placement == "static":  # the ESP32's frame is in PSRAM, its buffers on the heap
        check_learn_fits(profile, tb.blob, cfg, DEFAULT_FRAME_BYTES, "QCIF RGB565 (the default)")
    job = flash_job(profile, blob=args.blob, port=args.port, build_only=args.build_only,
                    app="learn", pio_env=args.env, learn_config=write_learn_config(cfg))
    print("$", " ".join(job.command), flush=True)
    if subprocess.run(job.command, env=job.env, check=False).returncode != 0:
        raise TinypropError(f"building the learn app for {profile.name} failed; its output is "
                            "above")
    if args.build_only or args.port is None:
        return 0
    with LearnSession(args.board, tb.blob, None, None, cfg, None,
                      model_classes(tb, args.classes), port=args.port) as session:
        show(session.events(), args)  # until Ctrl-C: a real camera never runs out
        if args.out:
            params, step = session.pulled_params()
            export_params(tb, params, args.out)
            print(f"wrote {args.out} ({step} steps)")
    return 0


def run(args: argparse.Namespace) -> int:
    from ..compile.blobfile import load_blob
    from ..device.profiles import board_named
    from ..errors import TinypropError
    from ..learn.camera import camera_mode, read_frames, read_label_script
    from ..learn.run import LearnConfig, LearnSession
    from ..status import check_hparams
    from ..training.export import export_params

    mode = camera_mode(args.format)  # a bad --format stops here
    for flag, value in (("--save-every", args.save_every), ("--replay", args.replay),
                        ("--thumbs", args.thumbs), ("--save-minutes", args.save_minutes or 0)):
        if value < 0 or value > 0xFFFF:
            raise TinypropError(f"{flag} {value}: give a count from 0 to 65535")
    profile = board_named(args.board)
    if profile.runner is None:
        return real_board(args, profile)
    if args.camera is None:
        raise TinypropError("--camera: give the virtual camera's frames (a folder of images)")
    tb = load_blob(args.blob, args.model)
    check_hparams(args.lr, 0.0, False, str(args.blob))
    classes = model_classes(tb, args.classes)
    frames = read_frames(args.camera, mode, args.shift)
    keys = args.labels == "keys"
    if keys and not args.fps > 0:
        raise TinypropError(f"--fps {args.fps}: give a positive rate, e.g. 1")
    labels = read_label_script(Path(args.labels), frames.names, classes) \
        if args.labels and not keys else None
    workdir = args.workdir or args.blob.with_suffix(".learn")
    if args.fresh and workdir.exists():
        shutil.rmtree(workdir)
    cfg = LearnConfig(args.lr, args.seed, args.save_every, args.replay, args.thumbs,
                      args.save_minutes or 0)
    with LearnSession(args.board, tb.blob, frames, labels, cfg, workdir, classes,
                      live_fps=args.fps if keys else None) as session:
        on_key = None
        if keys and (args.plain or not sys.stdout.isatty()):
            read_keys(session, classes, sys.stdin)
            print(f"label the frame shown: type a class ({', '.join(classes)}) or its index, "
                  "then Enter", file=sys.stderr)
        elif keys:
            on_key = key_label(session, classes)
        state = show(session.events(), args, on_key)
        if state.disconnected:
            print(f"tinyprop learn: the board stopped before its frames ended "
                  f"({state.disconnect_text}); run again to resume from its store",
                  file=sys.stderr)
            return 1
        params, step = session.stored_params()
    print(f"the board's store: {step} steps (params in {workdir / 'tinyprop.store'})")
    if args.out:
        export_params(tb, params, args.out)
        print(f"wrote {args.out}")
    return 0
