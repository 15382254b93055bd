"""Generated machine sounds for the anomaly-detection model, where no DCASE ToyCar recording is
reachable: log-mel features shaped like the MLPerf Tiny AD model's input (5 frames x 128 mel
bins, flattened to 640 values, in dB).

A machine is a seed: its spectrum is a smooth floor with the harmonics of its rotation (a
fundamental bin and 4 overtones), modulated slowly from frame to frame, with noise. An anomalous
sample of the same machine runs at a different speed (its harmonics moved by 3-8 %) and carries
a broadband knock in one frame. The features are fixed by (machine, seed): tests, the bench and
the docs draw the same samples.

    machine_sounds(Path("toycar.npz"), machine=1)   # x (N x 640 float32 dB), y, classes
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

FRAMES, BINS = 5, 128
CLASSES = ("anomaly", "normal")  # sorted, as class folders would be


def _spectrum(rng: np.random.Generator, floor: np.ndarray, fundamental: float) -> np.ndarray:
    """FRAMES x BINS dB: the floor, harmonics of `fundamental` (bins), modulation and noise."""
    bins = np.arange(BINS)
    harmonics = np.zeros(BINS)
    for h in range(1, 6):
        centre = fundamental * h
        harmonics += (24.0 / h ** 0.5) * np.exp(-0.5 * ((bins - centre) / 1.5) ** 2)
    frames = floor + harmonics + rng.normal(0.0, 3.0) * np.ones((FRAMES, 1))
    frames += np.sin(np.arange(FRAMES) / FRAMES * np.pi * rng.uniform(0.5, 2.0))[:, None] * 2.0
    return frames + rng.normal(0.0, 2.0, (FRAMES, BINS))


def machine_features(n_normal: int, n_anomalous: int, machine: int = 1,
                     seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(x: float32 (n_normal + n_anomalous) x 640 dB, y: 1 normal, 0 anomaly) of one machine."""
    shape = np.random.default_rng(machine)
    floor = -62.0 + np.cumsum(shape.normal(0.0, 1.2, BINS))  # a smooth random floor
    floor -= np.linspace(0.0, 14.0, BINS) + (floor.mean() + 55.0)
    fundamental = shape.uniform(9.0, 14.0)
    rng = np.random.default_rng((machine, seed))
    xs, ys = [], []
    for i in range(n_normal + n_anomalous):
        anomalous = i >= n_normal
        f0 = fundamental * (1.0 + rng.choice((-1, 1)) * rng.uniform(0.03, 0.08)
                            if anomalous else 1.0 + rng.normal(0.0, 0.01))
        frames = _spectrum(rng, floor, f0)
        if anomalous:  # a knock: broadband energy in one frame
            frames[rng.integers(FRAMES)] += 6.0 * np.exp(
                -0.5 * ((np.arange(BINS) - rng.uniform(20, 100)) / 25.0) ** 2)
        xs.append(frames.reshape(-1))
        ys.append(0 if anomalous else 1)
    return np.asarray(xs, np.float32), np.asarray(ys, np.int64)


def machine_sounds(path: Path, n_normal: int = 120, n_anomalous: int = 60, machine: int = 1,
                   seed: int = 0) -> Path:
    """Write a .npz dataset (x, y, classes) of one machine's sounds to `path`."""
    x, y = machine_features(n_normal, n_anomalous, machine, seed)
    np.savez(path, x=x, y=y, classes=np.array(CLASSES))
    return path
