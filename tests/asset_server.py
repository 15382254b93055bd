"""A real HTTP server on 127.0.0.1 for the download tests: it serves files under URL paths (COCO's
`train2017/000000000009.jpg` from ../shared's originals, the model files), answers Range requests
with 206, and misbehaves on request: per path, a queue of faults used up one a request:

- "cut": promise the whole length, send half, hang up (an interrupted transfer);
- "corrupt": send the right length with one byte changed;
- "503": answer 503 Service Unavailable.
"""

from __future__ import annotations

import csv
import http.server
import threading
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared"
VWW_MINI = SHARED / "datasets" / "vww-mini"


def coco_routes() -> dict[str, Path]:
    """COCO's URL path of each vww-mini original -> its copy in ../shared."""
    with open(VWW_MINI / "originals.csv", newline="") as f:
        return {f"{r['coco_split']}/{int(r['coco_id']):012d}.jpg": VWW_MINI / r["original"]
                for r in csv.DictReader(f)}


class AssetServer:
    """`with AssetServer(routes) as server:` serves routes (URL path without the leading slash
    -> file) at server.url; server.requests lists (path, Range header or None) as they came."""

    def __init__(self, routes: dict[str, Path]) -> None:
        self.routes = dict(routes)
        self.faults: dict[str, list[str]] = {}
        self.requests: list[tuple[str, str | None]] = []
        self._lock = threading.Lock()
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_port}"

    def __enter__(self) -> AssetServer:
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def requested(self, path: str) -> list[str | None]:
        """The Range headers of the requests for path (None: the whole file)."""
        return [r for p, r in self.requests if p == path]

    def _next_fault(self, path: str) -> str | None:
        with self._lock:
            queue = self.faults.get(path)
            return queue.pop(0) if queue else None

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                path = self.path.split("?")[0].lstrip("/")
                byte_range = self.headers.get("Range")
                with server._lock:
                    server.requests.append((path, byte_range))
                if path not in server.routes:
                    return self._empty(404)
                fault = server._next_fault(path)
                if fault == "503":
                    return self._empty(503)
                body = server.routes[path].read_bytes()
                start = int(byte_range.split("=")[1].split("-")[0]) if byte_range else 0
                if start >= len(body):
                    return self._empty(416)
                if fault == "corrupt":
                    body = body[: len(body) // 2] + bytes([body[len(body) // 2] ^ 0xFF]) + \
                        body[len(body) // 2 + 1:]
                self.send_response(206 if start else 200)
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                part = body[start:]
                self.send_header("Content-Length", str(len(part)))
                self.end_headers()
                if fault == "cut":
                    self.wfile.write(part[: len(part) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(part)

            def _empty(self, status: int) -> None:
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        return Handler
