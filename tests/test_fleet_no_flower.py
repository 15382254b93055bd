"""`tinyprop fleet` where Flower is not installed (here made missing; scripts/setup.sh installs
it): one line naming the extra that installs it, before anything is loaded."""

from __future__ import annotations

import sys

from tinyprop.cli import main


def test_fleet_without_flower_names_the_extra(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "flwr", None)  # `import flwr` fails as if not installed
    assert main(["fleet", str(tmp_path / "m.tpb"), "--data", str(tmp_path), "--clients",
                 "haze,night"]) == 2
    err = capsys.readouterr().err
    assert err == ("tinyprop fleet: error: tinyprop fleet (Flower) needs flwr, which is not "
                   "installed; run `pip install 'tinyprop[fleet]'`\n")
