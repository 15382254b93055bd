"""Autoencoders (`convert --loss mse`): the board learns what "normal" looks like for its own
machine by reconstructing normal samples; a sample it reconstructs badly is an anomaly.

A dataset for one holds the normal samples in a class named `normal` (else its first class: a
one-class dataset is all normal) and, to score the detector, anomalies in any other class.
Training takes the normal samples only. The anomaly score of a sample is its reconstruction
error: the mean squared error of the dequantized output against the dequantized input (the
training loss, in float64); `eval` reports its mean per class and, with anomalies present, the
AUC of telling them from the normal samples by it.

    errors = reconstruction_errors(outputs, xs, graph.input, graph.output)
    anomaly_scores(errors, ys, ("anomaly", "normal"))   # {"auc": 0.93, "error": {...}, ...}
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import TinypropError
from ..frontend.graph import Graph, Tensor

NORMAL = "normal"


def is_autoencoder(graph: Graph) -> bool:
    """A model that reconstructs its input: an output of the input's size not made by a
    SOFTMAX (a .tflite says no more; a blob says it by its loss)."""
    return (graph.output.size == graph.input.size
            and graph.logits_op().outputs[0] == graph.outputs[0])


def normal_class(classes: Sequence[str]) -> int:
    """The label of the normal samples: the class named `normal`, else the first."""
    return list(classes).index(NORMAL) if NORMAL in classes else 0


def normal_samples(xs: np.ndarray, ys: np.ndarray, classes: Sequence[str],
                   data: object) -> tuple[np.ndarray, np.ndarray]:
    """The samples an autoencoder trains on (the normal ones), labelled 0."""
    keep = ys == normal_class(classes)
    if not keep.any():
        raise TinypropError(f"{data}: no normal samples in this split; an autoencoder learns "
                            f"from a class named {NORMAL!r} (or a dataset's only class)")
    return xs[keep], np.zeros(int(keep.sum()), np.int64)


def _real(q: np.ndarray, t: Tensor) -> np.ndarray:
    return (q.astype(np.float64) - t.zp) * t.s


def reconstruction_errors(outputs: np.ndarray, xs: np.ndarray, t_in: Tensor,
                          t_out: Tensor) -> np.ndarray:
    """Each sample's mean squared error of its int8 output (tensor t_out's quantization)
    against its int8 input (t_in's), dequantized."""
    y = _real(np.asarray(outputs).reshape(len(xs), -1), t_out)
    x = _real(np.asarray(xs).reshape(len(xs), -1), t_in)
    return np.mean((y - x) ** 2, axis=1)


def auc(scores: np.ndarray, positive: np.ndarray) -> float | None:
    """Area under the ROC curve of `scores` ranking the `positive` samples above the others
    (the Mann-Whitney U statistic; ties count half). None without both kinds of sample."""
    scores = np.asarray(scores, np.float64)
    positive = np.asarray(positive, bool)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        return None
    # each score's rank among all (1-based), tied scores sharing the mean of their ranks
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ranks = (np.cumsum(counts) - (counts - 1) / 2)[inverse]
    u = ranks[positive].sum() - n_pos * (n_pos + 1) / 2
    return float(u / (n_pos * n_neg))


def anomaly_scores(errors: np.ndarray, labels: np.ndarray, classes: Sequence[str]) -> dict:
    """What `eval` reports of an autoencoder: n, the normal class, the mean reconstruction error
    of each class (None for a class with no sample) and of the normal and anomalous samples,
    and the AUC of the error as an anomaly score (None without anomalies)."""
    labels = np.asarray(labels, np.int64)
    normal = normal_class(classes)
    anomalous = labels != normal

    def mean(mask: np.ndarray) -> float | None:
        return float(errors[mask].mean()) if mask.any() else None

    return {"n": len(labels), "normal_class": classes[normal],
            "n_normal": int((~anomalous).sum()), "n_anomalous": int(anomalous.sum()),
            "error_normal": mean(~anomalous), "error_anomalous": mean(anomalous),
            "error_per_class": {name: mean(labels == i) for i, name in enumerate(classes)},
            "auc": auc(errors, anomalous)}
