"""Asset resolution: flag, $TINYPROP_ASSETS, and the checked, resumable model download against
a real local server (the photos' download: test_fetch.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from asset_server import AssetServer
from tinyprop.data import assets, download
from tinyprop.errors import TinypropError
from tinyprop.paths import CACHE_ENV


@pytest.fixture
def serve(monkeypatch, tmp_path):
    """serve(model bytes) -> the server (tests/asset_server.py) serving them as the int8 model;
    points the model URL at it, the cache at tmp_path/cache, unsets $TINYPROP_ASSETS and
    shortens the retries."""
    servers = []

    def start(content: bytes) -> AssetServer:
        model = tmp_path / "www" / "vww_96_int8.tflite"
        model.parent.mkdir(exist_ok=True)
        model.write_bytes(content)
        server = AssetServer({"m/vww_96_int8.tflite": model}).__enter__()
        servers.append(server)
        monkeypatch.setenv(assets.MODEL_URL_ENV, f"{server.url}/m")
        return server

    monkeypatch.delenv(assets.ASSETS_ENV, raising=False)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(download, "RETRY_DELAYS", (0.01,) * 4)
    yield start
    for server in servers:
        server.__exit__()


def _cache_files(tmp_path: Path) -> list[Path]:
    return [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


def test_shared_assets_are_found(vww_model_path, vww_float_h5_path, vww_data_dir):
    assert vww_model_path.name == "vww_96_int8.tflite"
    assert download.sha256_of(vww_model_path) == assets.MODEL_FILES["int8"][1]
    assert download.sha256_of(vww_float_h5_path) == assets.MODEL_FILES["h5"][1]
    assert (vww_data_dir / "person").is_dir()


def test_flag_wins_and_must_exist(tmp_path):
    model = tmp_path / "mine.tflite"
    model.write_bytes(b"x")
    assert assets.resolve_model(model) == model
    assert assets.resolve_dataset(tmp_path) == tmp_path
    with pytest.raises(TinypropError, match="model file not found") as err:
        assets.resolve_model(tmp_path / "missing.tflite")
    assert "missing.tflite" in str(err.value)


def test_local_assets_touch_no_network(serve, tmp_path, monkeypatch, vww_model_path):
    server = serve(vww_model_path.read_bytes())
    root = tmp_path / "assets"
    (root / assets.MODEL_SUBDIR).mkdir(parents=True)
    (root / assets.DATASET_SUBDIR).mkdir(parents=True)
    (root / assets.MODEL_SUBDIR / "vww_96_int8.tflite").write_bytes(b"local")
    monkeypatch.setenv(assets.ASSETS_ENV, str(root))
    assert assets.resolve_model() == root / assets.MODEL_SUBDIR / "vww_96_int8.tflite"
    assert assets.resolve_dataset() == root / assets.DATASET_SUBDIR
    # Pointed at a folder without the file: an error naming it, not a silent download.
    with pytest.raises(TinypropError, match="vww_96.h5: model file .*TINYPROP_ASSETS"):
        assets.resolve_model(variant="h5")
    assert server.requests == []


def test_download_verifies_and_caches(serve, tmp_path, vww_model_path):
    server = serve(vww_model_path.read_bytes())
    path = assets.resolve_model()
    assert path == tmp_path / "cache" / assets.MODEL_SUBDIR / "vww_96_int8.tflite"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == assets.MODEL_FILES["int8"][1]
    assert assets.resolve_model() == path
    assert server.requests == [("m/vww_96_int8.tflite", None)]  # the second call: the cache
    assert _cache_files(tmp_path) == [path]


def test_checksum_mismatch_leaves_nothing(serve, tmp_path):
    serve(b"not the model" * 1000)
    with pytest.raises(TinypropError, match="sha256 .* does not match .*, twice"):
        assets.resolve_model()
    assert _cache_files(tmp_path) == []


def test_interrupted_download_resumes_in_the_next_run(serve, tmp_path, vww_model_path):
    content = vww_model_path.read_bytes()
    server = serve(content)
    server.faults["m/vww_96_int8.tflite"] = ["cut"] * 5  # every attempt of this run: half of it
    with pytest.raises(TinypropError, match="vww_96_int8.tflite: connection closed after .* "
                       "bytes, 5 attempts; .* run again \\(the download resumes\\)"):
        assets.resolve_model()
    dest = tmp_path / "cache" / assets.MODEL_SUBDIR / "vww_96_int8.tflite"
    assert _cache_files(tmp_path) == [download.part_path(dest)]  # never under its own name
    have = 0
    for _ in range(5):  # each attempt fetched half of what was left
        have += (len(content) - have) // 2
    assert download.part_path(dest).read_bytes() == content[:have]
    assert assets.resolve_model() == dest
    assert server.requested("m/vww_96_int8.tflite")[-1] == f"bytes={have}-"
    assert dest.read_bytes() == content and _cache_files(tmp_path) == [dest]


def test_unknown_variant():
    with pytest.raises(TinypropError, match="use one of int8, float, h5"):
        assets.resolve_model(variant="fp16")
