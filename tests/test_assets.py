"""Asset resolution: flag, $TINYPROP_ASSETS, and the checked download against a real local
server."""

from __future__ import annotations

import hashlib
import http.server
import threading
from functools import partial
from pathlib import Path

import pytest
from tinyprop.data import assets
from tinyprop.errors import TinypropError


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves a folder; `truncate` makes it promise the full length and hang up halfway."""

    requests: list[str]
    truncate = False

    def do_GET(self):
        self.requests.append(self.path)
        if not self.truncate:
            return super().do_GET()
        body = (Path(self.directory) / self.path.lstrip("/")).read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[: len(body) // 2])
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, *args):
        pass


@pytest.fixture
def serve(monkeypatch, tmp_path):
    """serve(folder, truncate=False) -> list of request paths; points the model URL at it, the
    cache at tmp_path/cache, and unsets $TINYPROP_ASSETS."""
    servers = []

    def start(folder: Path, truncate: bool = False) -> list[str]:
        requests: list[str] = []
        handler = type("H", (_Handler,), {"requests": requests, "truncate": truncate})
        server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), partial(handler, directory=str(folder))
        )
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        monkeypatch.setenv(assets.MODEL_URL_ENV, f"http://127.0.0.1:{server.server_port}/m")
        return requests

    monkeypatch.delenv(assets.ASSETS_ENV, raising=False)
    monkeypatch.setenv(assets.CACHE_ENV, str(tmp_path / "cache"))
    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _model_folder(tmp_path: Path, content: bytes) -> Path:
    folder = tmp_path / "www"
    (folder / "m").mkdir(parents=True)
    (folder / "m" / "vww_96_int8.tflite").write_bytes(content)
    return folder


def _cache_files(tmp_path: Path) -> list[Path]:
    return [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


def test_shared_assets_are_found(vww_model_path, vww_float_h5_path, vww_data_dir):
    assert vww_model_path.name == "vww_96_int8.tflite"
    assert assets.sha256_of(vww_model_path) == assets.MODEL_FILES["int8"][1]
    assert assets.sha256_of(vww_float_h5_path) == assets.MODEL_FILES["h5"][1]
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
    requests = serve(_model_folder(tmp_path, vww_model_path.read_bytes()))
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
    assert requests == []


def test_download_verifies_and_caches(serve, tmp_path, vww_model_path):
    requests = serve(_model_folder(tmp_path, vww_model_path.read_bytes()))
    path = assets.resolve_model()
    assert path == tmp_path / "cache" / assets.MODEL_SUBDIR / "vww_96_int8.tflite"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == assets.MODEL_FILES["int8"][1]
    assert assets.resolve_model() == path
    assert requests == ["/m/vww_96_int8.tflite"]  # the second call used the cache
    assert _cache_files(tmp_path) == [path]


def test_checksum_mismatch_leaves_nothing(serve, tmp_path):
    serve(_model_folder(tmp_path, b"not the model" * 1000))
    with pytest.raises(TinypropError, match="sha256 .* does not match"):
        assets.resolve_model()
    assert _cache_files(tmp_path) == []


def test_interrupted_download_leaves_nothing(serve, tmp_path, vww_model_path):
    requests = serve(_model_folder(tmp_path, vww_model_path.read_bytes()), truncate=True)
    with pytest.raises(TinypropError, match="vww_96_int8.tflite: download (interrupted|failed)"):
        assets.resolve_model()
    assert requests and _cache_files(tmp_path) == []


def test_dataset_has_no_download(monkeypatch):
    monkeypatch.delenv(assets.ASSETS_ENV, raising=False)
    with pytest.raises(TinypropError, match="no public download"):
        assets.resolve_dataset()


def test_unknown_variant():
    with pytest.raises(TinypropError, match="use one of int8, float, h5"):
        assets.resolve_model(variant="fp16")
