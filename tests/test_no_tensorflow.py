"""Without TensorFlow (the `tf` extra) the verbs that need the TFLite interpreter or Keras say so
in one line, naming the extra, before any download or conversion."""

from __future__ import annotations

import sys

import pytest
from tinyprop.bench import baseline
from tinyprop.cli import main

EXTRA = "needs tensorflow, which is not installed; run `pip install 'tinyprop[tf]'`"


@pytest.fixture
def no_tensorflow(monkeypatch):
    for name in ("tensorflow", "keras"):
        monkeypatch.setitem(sys.modules, name, None)  # `import tensorflow` raises ImportError


@pytest.mark.parametrize("verb", ["eval", "demo", "baseline"])
def test_the_extra_is_named(verb, no_tensorflow, vww_model_path, vww_data_dir, tmp_path, capsys):
    if verb == "eval":
        status = main(["eval", str(vww_model_path), "--data", str(vww_data_dir)])
        expect = f"tinyprop eval: error: scoring a .tflite (the TFLite interpreter) {EXTRA}"
    elif verb == "demo":
        status = main(["demo", "--out", str(tmp_path)])
        expect = f"tinyprop demo: error: the demo (it scores the models with the TFLite " \
                 f"interpreter) {EXTRA}"
    else:
        status = baseline.main(["--shifts", "haze"])
        expect = f"tinyprop.bench.baseline: error: the float baseline {EXTRA}"
    assert status == 2
    assert capsys.readouterr().err.strip().splitlines() == [expect]
    assert list(tmp_path.iterdir()) == []
