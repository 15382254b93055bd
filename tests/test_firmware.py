"""The firmware as a library: every source builds warning-free with every compiler we ship for;
its objects depend on each other only downward through the layers docs/architecture.md draws
(read off the objects' symbols with nm, so an include that lies cannot hide a dependency); and
an inference-only program links without a single training object."""

from __future__ import annotations

import re
import shutil
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest
from tinyprop.compile.blob import pack_blob
from tinyprop.device.firmware import CORE_BUILD, build_lock
from tinyprop.frontend.tflite_reader import read_tflite
from tinyprop.paths import REPO_ROOT as REPO
from tinyprop.reference.forward import Forward

FIRMWARE = REPO / "firmware"
BUILD = CORE_BUILD

# The layers, lowest first. An object may use its own layer and the ones below, nothing above.
LAYERS = [
    ("util", ["core/tp_crc32.o", "core/tp_status.o", "core/tp_text.o"]),
    ("quant", ["core/tp_quant.o", "core/tp_fmath.o", "core/tp_gradmap.o"]),
    ("blob", ["core/tp_blob.o", "core/blob/*.o"]),
    ("session", ["core/tp_session.o"]),
    ("frames+record+store", ["core/tp_image.o", "core/tp_record.o", "core/tp_store.o"]),
    ("kernels", ["core/kernels/*.o", "core/kernels/*/*.o"]),
    ("optim+loss", ["core/tp_optim.o", "core/tp_loss.o"]),
    ("forward", ["core/tp_exec.o", "core/tp_patch.o", "core/tp_forward.o"]),
    ("train", ["core/tp_train.o"]),
    ("proto", ["proto/*.o"]),
    ("apps", ["apps/*/*.o"]),
]
# What an inference-only program must not contain: the training interpreter, the loss, the
# optimizer, exp/log, the integer gradient maps and every gradient kernel.
TRAINING_SYMBOLS = re.compile(r"^(tp_train_step|tp_softmax_xent_\w+|tp_optim_\w+|tp_exp_neg|"
                              r"tp_log_pos|tp_gm_\w+|\w+_grad_(f32|q)|tp_(ref|target)_gradient)$")

needs = {tool: pytest.mark.skipif(shutil.which(tool) is None, reason=f"needs {tool} "
                                  "(scripts/setup.sh installs it)")
         for tool in ("clang", "arm-none-eabi-gcc", "riscv64-unknown-elf-gcc", "nm")}


def make(*args: str) -> str:
    # under the build folder's lock, as tinyprop's own builds of the core: a test worker in
    # another process may be compiling the same objects
    with build_lock(BUILD):
        proc = subprocess.run(["make", "-s", "-C", str(FIRMWARE), f"BUILD={BUILD}", *args],
                              capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@needs["clang"]
@needs["arm-none-eabi-gcc"]
@needs["riscv64-unknown-elf-gcc"]
def test_every_source_builds_with_every_compiler_and_werror():
    """gcc (this machine), clang, arm-none-eabi-gcc (Cortex-M4F) and riscv64-unknown-elf-gcc
    (RV32IMC) with -Wall -Wextra -Werror: the library and the applications; and the DSP
    kernels at every level of arm-none-eabi-gcc and clang for the M4, and for the M7 and M33
    (check-toolchains: debug builds and LLVM toolchains build them too, their register-hungry
    asm falling back to C where it cannot be allocated)."""
    out = make("-j2", "check")
    sizes = {line.split()[-1].rsplit("/firmware/arm/", 1)[-1]: int(line.split()[0])
             for line in out.splitlines() if "/firmware/arm/" in line}
    for obj in ("core/tp_blob.o", "core/tp_forward.o", "core/tp_train.o",
                "core/kernels/ref/tp_conv.o", "core/tp_quant.o", "proto/tp_proto.o"):
        assert 0 < sizes[obj] < 16384, (obj, sizes)


def symbols(obj: Path) -> tuple[set[str], set[str]]:
    """(defined, undefined) global symbols of an object file."""
    out = subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1].isupper():
            defined.add(parts[2])
    return defined, undefined


def layer_of(rel: str) -> int:
    for i, (_, patterns) in enumerate(LAYERS):
        if any(Path(rel).match(p) and rel.count("/") == p.count("/") for p in patterns):
            return i
    raise AssertionError(f"{rel}: in no layer of the table; add it to LAYERS")


@needs["nm"]
def test_objects_depend_only_downward_without_cycles():
    make("host")
    objs = sorted((BUILD / "host").rglob("*.o"))
    rel = {o: o.relative_to(BUILD / "host").as_posix() for o in objs}
    table = {o: symbols(o) for o in objs}
    owner = {s: o for o, (defined, _) in table.items() for s in defined}
    edges = {o: {owner[s] for s in table[o][1] if s in owner} - {o} for o in objs}
    upward = [f"{rel[a]} ({LAYERS[layer_of(rel[a])][0]}) uses {rel[b]} "
              f"({LAYERS[layer_of(rel[b])][0]})"
              for a in objs for b in edges[a] if layer_of(rel[b]) > layer_of(rel[a])]
    assert not upward, "\n".join(upward)
    # no cycle, even inside a layer: a depth-first search finds no back edge
    state: dict[Path, int] = {}

    def visit(o: Path, path: list[str]) -> None:
        state[o] = 1
        for n in edges[o]:
            assert state.get(n) != 1, f"cycle: {' -> '.join([*path, rel[o], rel[n]])}"
            if n not in state:
                visit(n, [*path, rel[o]])
        state[o] = 2

    for o in objs:
        if o not in state:
            visit(o, [])
    # the table is not vacuous: the interpreters reach the layers below them
    train = next(o for o in objs if rel[o] == "core/tp_train.o")
    assert {LAYERS[layer_of(rel[n])][0] for n in edges[train]} >= {"forward", "optim+loss",
                                                                   "blob"}
    proto = next(o for o in objs if rel[o] == "proto/tp_proto.o")
    assert {rel[n] for n in edges[proto]} == {"core/tp_crc32.o"}


INFER_ONLY = r"""
#include <stdio.h>
#include <stdlib.h>
#include "tinyprop.h"

int main(int argc, char **argv)
{
    static uint8_t blob[1 << 20], arena[1 << 18];
    FILE *f = fopen(argv[1], "rb");
    size_t n = fread(blob, 1, sizeof blob, f);
    tp_requirements req;
    tp_session s;
    tp_result r;
    (void)argc;
    fclose(f);
    if (tp_blob_requirements(blob, (uint32_t)n, &req) != TP_OK ||
        tp_session_init(&s, blob, (uint32_t)n, arena, sizeof arena, NULL, 0) != TP_OK) {
        return 1;
    }
    for (n = 0; n < req.input_bytes; n++) {
        tp_input(&s)[n] = (int8_t)(n * 7u);
    }
    if (tp_infer(&s, &r) != TP_OK) {
        return 2;
    }
    printf("%d\n", (int)r.prediction);
    for (n = 0; n < tp_output_bytes(&s); n++) {
        printf("%d ", tp_output(&s)[n]);
    }
    printf("\n");
    return 0;
}
"""


@needs["nm"]
def test_an_inference_only_program_links_no_training_object(tmp_path, vww_model_path):
    make("host")
    src = tmp_path / "infer_only.c"
    src.write_text(INFER_ONLY)
    exe = tmp_path / "infer_only"
    subprocess.run(["gcc", "-O2", *make("print-cflags").split(), str(src),
                    str(BUILD / "host" / "libtinyprop.a"), "-lm", "-o", str(exe)], check=True)
    linked, _ = symbols(exe)
    assert "tp_infer" in linked and "tp_conv2d_s8" in linked  # the symbol scan sees the core
    training = sorted(s for s in linked if TRAINING_SYMBOLS.match(s))
    assert not training, f"training code in an inference-only link: {training}"
    # and it runs the real model: the same output as the NumPy reference
    graph = read_tflite(vww_model_path)
    blob_path = tmp_path / "vww.tpb"
    blob_path.write_bytes(pack_blob(graph, zlib.crc32(vww_model_path.read_bytes())))
    out = subprocess.run([str(exe), str(blob_path)], capture_output=True, text=True, check=True)
    x = (np.arange(graph.input.size) * 7 % 256).astype(np.uint8).view(np.int8)
    expected = Forward(graph).run(x.reshape(graph.input.shape)).ravel()
    assert out.stdout.split("\n")[1].split() == [str(int(v)) for v in expected]
    # the same link, training included, does pull the training objects (the check can fail)
    trainer = tmp_path / "train.c"
    trainer.write_text(INFER_ONLY.replace("tp_infer(&s, &r)", "tp_train_step(&s, 0, &r)"))
    subprocess.run(["gcc", "-O2", *make("print-cflags").split(), str(trainer),
                    str(BUILD / "host" / "libtinyprop.a"), "-lm", "-o", str(tmp_path / "t")],
                   check=True)
    assert any(TRAINING_SYMBOLS.match(s) for s in symbols(tmp_path / "t")[0])
