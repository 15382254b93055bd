"""`tinyprop export`: the fine-tuned .tflite from a training run's checkpoint, or pulled from a
board flashed with the blob, equals byte for byte the one `tinyprop train --out` wrote; bad
input is one line on stderr and exit status 2. Also: every verb the CLI registers has its
module, and a missing one fails loudly."""

from __future__ import annotations

import json
import shlex

import pytest
from tinyprop import cli
from tinyprop.cli import main
from tinyprop.compile.blob import blob_id
from tinyprop.device.device import params_record
from tinyprop.device.firmware import build_device_firmware

STEPS, EVERY = 4, 2  # the last checkpoint holds the final parameters


@pytest.fixture(scope="module")
def trained(vww_model_path, vww_data_dir, tmp_path_factory):
    """A last:2 blob trained STEPS steps on the host C core: (blob, its checkpoint, --out)."""
    tmp = tmp_path_factory.mktemp("export")
    tpb, tuned = tmp / "vww.tpb", tmp / "tuned.tflite"
    assert main(["convert", str(vww_model_path), "-o", str(tpb), "--scheme", "last:2"]) == 0
    assert main(["train", str(tpb), "--data", str(vww_data_dir), "--board", "host", "--steps",
                 str(STEPS), "--checkpoint-every", str(EVERY), "--shift", "haze", "--plain",
                 "--out", str(tuned)]) == 0
    return tpb, tpb.with_suffix(".tpb.ckpt"), tuned


def one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("tinyprop export: error: "), err
    return err


def test_export_from_the_checkpoint_equals_train_out(trained, vww_model_path, tmp_path, capsys):
    tpb, ckpt, tuned = trained
    assert json.loads(ckpt.read_bytes().partition(b"\n")[0])["step"] == STEPS
    out = tmp_path / "exported.tflite"
    capsys.readouterr()
    assert main(["export", str(tpb), "-o", str(out)]) == 0  # BLOB.ckpt by default
    assert f"wrote {out} with {ckpt} (step {STEPS})" in capsys.readouterr().out
    assert out.read_bytes() == tuned.read_bytes()
    assert out.read_bytes() != vww_model_path.read_bytes()  # the run did change parameters
    named = tmp_path / "named.tflite"
    assert main(["export", str(tpb), "--checkpoint", str(ckpt), "-o", str(named)]) == 0
    assert named.read_bytes() == tuned.read_bytes()


def test_export_pulls_the_parameters_from_a_flashed_board(trained, tmp_path, monkeypatch,
                                                          capsys):
    """The host board, as a flashed board is reached (a link, here exec:), restores the run's
    parameters from its store at boot; export pulls them over the protocol."""
    tpb, ckpt, tuned = trained
    step, params = STEPS, ckpt.read_bytes().partition(b"\n")[2]
    store = tmp_path / "board.store"
    store.write_bytes(params_record(params, blob_id(tpb.read_bytes()), step))
    monkeypatch.setenv("TINYPROP_STORE", str(store))
    board = build_device_firmware("host", tpb.read_bytes())
    out = tmp_path / "pulled.tflite"
    link = f"exec:{shlex.quote(str(board))}"
    assert main(["export", str(tpb), "--board", link, "-o", str(out)]) == 0
    assert f"with the parameters of the board on {link}" in capsys.readouterr().out
    assert out.read_bytes() == tuned.read_bytes()


def test_bad_input_is_one_line_exit_2(trained, vww_model_path, tmp_path, capsys):
    tpb, ckpt, _ = trained
    out = str(tmp_path / "x.tflite")
    err = one_line_error(capsys, ["export", str(tpb), "--checkpoint", str(tmp_path / "no.ckpt"),
                                  "-o", out])
    assert "no.ckpt" in err and "--checkpoint-every" in err
    other = tmp_path / "other.tpb"  # another scheme: another blob id
    assert main(["convert", str(vww_model_path), "-o", str(other), "--scheme", "last:1"]) == 0
    capsys.readouterr()
    err = one_line_error(capsys, ["export", str(other), "--checkpoint", str(ckpt), "-o", out])
    assert "belongs to another blob" in err
    cut = tmp_path / "cut.ckpt"
    cut.write_bytes(ckpt.read_bytes()[:-10])
    err = one_line_error(capsys, ["export", str(tpb), "--checkpoint", str(cut), "-o", out])
    assert "bytes of parameters" in err
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(b"not json\n")
    assert "not a tinyprop checkpoint" in one_line_error(
        capsys, ["export", str(tpb), "--checkpoint", str(junk), "-o", out])
    assert "no such file" in one_line_error(capsys, ["export", str(tmp_path / "none.tpb"),
                                                     "-o", out])
    with pytest.raises(SystemExit) as e:  # one source of parameters at a time
        main(["export", str(tpb), "--checkpoint", str(ckpt), "--board", "host", "-o", out])
    assert e.value.code == 2


def test_every_registered_verb_has_its_module(monkeypatch):
    parser = cli.build_parser()
    verbs = next(a for a in parser._actions if a.dest == "verb").choices
    assert set(verbs) == set(cli.VERBS)
    monkeypatch.setitem(cli.VERBS, "frobnicate", "frobnicate")
    with pytest.raises(RuntimeError, match="frobnicate"):
        cli.build_parser()


def test_a_new_verb_is_its_module_and_one_line(monkeypatch, capsys):
    """docs/architecture.md's checklist for a new verb, done from the test: a module under
    tinyprop.commands with add_parser and run, and one line in cli.VERBS."""
    import sys
    import types

    mod = types.ModuleType("tinyprop.commands.hello")

    def add_parser(sub):
        p = sub.add_parser("hello", help="say hello")
        p.add_argument("--name", required=True)
        p.set_defaults(func=lambda args: print(f"hello {args.name}") or 0)

    mod.add_parser = add_parser
    monkeypatch.setitem(sys.modules, "tinyprop.commands.hello", mod)
    monkeypatch.setitem(cli.VERBS, "hello", "hello")
    assert main(["hello", "--name", "board"]) == 0
    assert capsys.readouterr().out == "hello board\n"
    with pytest.raises(SystemExit) as e:  # its arguments are checked like any verb's
        main(["hello"])
    assert e.value.code == 2
