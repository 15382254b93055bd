"""What the fleet's tests share (test_fleet_apps.py, test_fleet_cli.py, test_fleet_deploy.py,
test_fleet_restart.py): a small slice of vww-mini, the VWW blob training its last two layers,
and a reading of the trained values a .tflite holds."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
from tinyprop.cli import main
from tinyprop.fleet.params import ParamsLayout
from tinyprop.training.export import buffer_spans

CLASSES = ("non_person", "person")


def vww_slice(vww_data_dir: Path, out: Path, train: int, holdout: int) -> Path:
    """The first `train` training and `holdout` holdout photos of each class of vww-mini, in
    its layout (class folders, holdout.txt)."""
    held = set((vww_data_dir / "holdout.txt").read_text().split())
    names = []
    for c in CLASSES:
        (out / c).mkdir(parents=True)
        files = sorted((vww_data_dir / c).iterdir())
        kept = ([p for p in files if p.name not in held][:train] +
                [p for p in files if p.name in held][:holdout])
        for p in kept:
            shutil.copy(p, out / c / p.name)
        names += [p.name for p in kept if p.name in held]
    (out / "holdout.txt").write_text("".join(f"{n}\n" for n in names))
    return out


def label_flipped(data: Path, out: Path) -> Path:
    """`data` (a vww_slice) with every label wrong: each class's photos in the other class's
    folder. A poisoned board's dataset: its updates look like any board's (the same shapes,
    int8 and int32 values in range), only a robust aggregation resists them."""
    for c, other in zip(CLASSES, reversed(CLASSES), strict=True):
        shutil.copytree(data / c, out / other)
    shutil.copy(data / "holdout.txt", out / "holdout.txt")
    return out


def vww_last2(vww_model_path: Path, out: Path) -> Path:
    """The VWW blob training the biases and weights of its last two weighted ops."""
    assert main(["convert", str(vww_model_path), "-o", str(out), "--scheme", "last:2"]) == 0
    return out


def tflite_arrays(layout: ParamsLayout, tflite: Path) -> dict[str, np.ndarray]:
    """The trainable arrays as a .tflite holds them (biases whole, the held rows)."""
    raw = tflite.read_bytes()
    spans = buffer_spans(raw)
    out = {}
    for a in layout.arrays:
        start, n = spans[a.tensor]
        data = np.frombuffer(raw, a.dtype.newbyteorder("<"), n // a.dtype.itemsize, start)
        if a.name.endswith(".weights"):  # CONV_2D and FULLY_CONNECTED: a row a channel
            data = data.reshape(-1, a.shape[1])[a.channels]
        out[a.name] = data.astype(a.dtype)
    return out


def small_fleet(vww_model_path: Path, vww_data_dir: Path, tmp_path: Path) -> tuple[Path, Path]:
    """The deployment tests' fleet: the VWW last:2 blob and a vww-mini slice of 4 training and
    2 holdout photos a class."""
    return (vww_last2(vww_model_path, tmp_path / "vww.tpb"),
            vww_slice(vww_data_dir, tmp_path / "data", train=4, holdout=2))


def killed_output(proc: subprocess.Popen) -> tuple[str, str]:
    """A fleet process's stdout and stderr for a failed wait's message, once it is killed (a
    bare communicate() would wait for all its rounds)."""
    proc.kill()
    return proc.communicate(timeout=30)
