"""What the fleet's tests share (test_fleet_apps.py, test_fleet_cli.py, test_fleet_deploy.py,
test_fleet_restart.py; test_baseline.py takes the slice too): a small slice of vww-mini, the
VWW blob training its last two layers, a reading of the trained values a .tflite holds, and
each round of a report recomputed here."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from tinyprop.cli import main
from tinyprop.fleet.node import BoardNode, FleetConfig, holdout_accuracy
from tinyprop.fleet.params import ParamsLayout, Update, aggregate
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


def recomputed_rounds(fleet: FleetConfig, nodes: list[BoardNode]):
    """Round by round, what `fleet`'s boards (`nodes`, one a client in order) make of the
    previous round's global model: (round, the updates they sent, their results, the new global
    arrays)."""
    layout = fleet.layout()
    global_arrays = layout.initial_arrays()
    for round_ in range(1, fleet.rounds + 1):
        trained = [node.train(global_arrays, round_) for node in nodes]
        sent = [Update(node.name, arrays, result.steps)
                for node, (arrays, result) in zip(nodes, trained, strict=True)]
        global_arrays = aggregate(layout, sent, fleet.aggregation, fleet.seed, round_)
        yield round_, sent, [result for _, result in trained], global_arrays


def assert_exported(layout: ParamsLayout, tflite: Path, arrays: dict[str, np.ndarray]) -> None:
    """The .tflite holds `arrays`, byte for byte."""
    exported = tflite_arrays(layout, tflite)
    assert {n: a.tobytes() for n, a in exported.items()} == \
        {n: a.tobytes() for n, a in arrays.items()}, tflite.name


def check_rounds(report: dict, fleet: FleetConfig, out: Path) -> None:
    """Each round of a fleet's `report` is what `fleet`'s boards make of it (recomputed_rounds):
    their accuracies and steps, the aggregate (exported as out/round-R.tflite, byte for byte),
    each board's score of it (their mean the global accuracy) and the server's. The report's
    boards are fleet.clients, in order; a board that failed is the caller's to check."""
    layout = fleet.layout()
    nodes = [BoardNode(fleet, name, index=i) for i, name in enumerate(fleet.clients)]
    assert report["blob_id"] == f"{layout.blob_id:08x}"
    assert report["server"] == {"holdout": fleet.server, "accuracy_before":
                                holdout_accuracy(fleet, fleet.server, layout.initial_arrays())}
    assert [r["round"] for r in report["rounds"]] == list(range(1, fleet.rounds + 1))
    for r, (_, _, results, global_arrays) in zip(report["rounds"],
                                                 recomputed_rounds(fleet, nodes), strict=True):
        assert all(set(c) == {"name", "accuracy", "train_accuracy", "steps", "global_accuracy"}
                   for c in r["clients"])
        assert [(c["name"], c["accuracy"], c["steps"]) for c in r["clients"]] == \
            [(n, x.accuracy, x.steps) for n, x in zip(fleet.clients, results, strict=True)]
        assert r["rejected"] == []
        assert_exported(layout, out / f"round-{r['round']}.tflite", global_arrays)
        scores = [node.evaluate(global_arrays) for node in nodes]
        assert [c["global_accuracy"] for c in r["clients"]] == scores
        assert r["global_accuracy"] == pytest.approx(sum(scores) / len(scores))
        assert r["server_accuracy"] == holdout_accuracy(fleet, fleet.server, global_arrays)
