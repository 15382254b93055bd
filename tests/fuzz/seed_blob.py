"""Seed the blob fuzzer's corpus with real training blobs of small generated models.

    seed_blob.py CORPUS_DIR

Each blob is written twice, behind the harness's mode byte: 0 (bytes as they are) and 1 (size
and CRC patched after mutation, so mutants reach the field checks and kernels). Blobs larger
than libFuzzer's -max_len in run.sh are left out.
"""

from __future__ import annotations

import sys
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: modelgen

from modelgen import build_tflite
from tinyprop.compile.blob import pack_blob
from tinyprop.compile.scheme import parse_scheme
from tinyprop.compile.train_plan import build_program
from tinyprop.frontend.tflite_reader import read_tflite

MAX_LEN = 8192  # run.sh's -max_len, mode byte included
# (model, scheme, gradient format, class names): all op kinds but PAD (no generated PAD model
# ends in a classifier), each blob with a training program; integer maps, a sink (bias-only)
# and class names (LABL) among them
SEEDS = [("conv3x3_same_relu", "last:2", "float32", False),
         ("mbv2_block", "last:2", "float32", False), ("mbv1_tail", "last:2", "float32", False),
         ("fc_flatten", "last:2", "float32", True),
         ("odd_7x7_stack", "bias-only", "float32", False),
         ("mbv2_block", "last:2", "int16", False), ("mbv1_tail", "bias-only", "int8", False),
         ("odd_7x7_stack", "bias-only", "int16", False)]


def small_blob(name: str, scheme: str, grad: str, named: bool) -> bytes:
    """The training blob of generated model `name` (tests/modelgen.py), with class names
    "class K" when `named`."""
    path = build_tflite(name)
    graph = read_tflite(path)
    program = build_program(graph, parse_scheme(graph, scheme), grad=grad)
    n_classes = graph.tensors[graph.logits_op().outputs[0]].size
    labels = tuple(f"class {k}" for k in range(n_classes)) if named else None
    return pack_blob(graph, zlib.crc32(path.read_bytes()), train=program, labels=labels)


def seed_blobs() -> dict[str, bytes]:
    return {f"{name}_{grad}{'_labels' if named else ''}": small_blob(name, scheme, grad, named)
            for name, scheme, grad, named in SEEDS}


def main(corpus: Path) -> int:
    corpus.mkdir(parents=True, exist_ok=True)
    kept = 0
    for name, blob in seed_blobs().items():
        if len(blob) + 1 > MAX_LEN:
            continue
        for mode in (0, 1):
            (corpus / f"seed_{name}_{mode}").write_bytes(bytes([mode]) + blob)
        kept += 1
    if kept == 0:
        print("seed_blob.py: every seed blob is over -max_len", file=sys.stderr)
        return 1
    print(f"seed_blob.py: {kept} blobs into {corpus}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
