"""A lossy link, measured: a proxy that drops, flips, duplicates and delays bytes (and cuts the
line for seconds) between the host and a board tinyprop starts (qemu-m4's UART socket, the host
board's pipes), and `measure`, which trains through it as `tinyprop train` does and compares the
parameters after every step with a clean run's.

    with LineProxy(board_end, LineFaults(rate=1e-3), seed=1) as proxy:
        link = open_link(proxy.url)                 # the host talks to the proxy
        ...
        proxy.injected                              # faults put on the line so far

The proxy is real sockets, pipes and threads; its faults come from a seeded RNG per direction.
"""

from __future__ import annotations

import math
import os
import random
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

import numpy as np

KINDS = ("drop", "flip", "duplicate", "delay")
RATES = (1e-4, 1e-3, 1e-2)
CUT_S = 2.0  # the line cut once a run, for this long
DELAY_S = 0.01  # a delayed byte holds the line (the bytes after it wait too) for this long


@dataclass(frozen=True)
class LineFaults:
    """Faults a byte, each direction: every byte is hit with probability `rate`, by one of
    KINDS drawn evenly: dropped, flipped (one random bit), duplicated, or delayed `delay_s`
    (the bytes after it wait too, as on a stalled line); `cut_at` seconds after the first byte
    the line carries nothing either way for `cut_s` seconds (None: no cut)."""

    rate: float = 0.0
    cut_at: float | None = None
    cut_s: float = CUT_S
    delay_s: float = DELAY_S


class _Direction:
    """One direction's fault stream: which byte is hit next, and how (seeded)."""

    def __init__(self, faults: LineFaults, seed: int) -> None:
        self.faults = faults
        self.rng = random.Random(seed)
        self.injected: Counter = Counter()
        self._gap = self._next_gap()

    def _next_gap(self) -> float:
        """Bytes until the next fault (geometric)."""
        p = min(self.faults.rate, 1.0)
        if p <= 0:
            return math.inf
        return int(math.log(1.0 - self.rng.random()) / math.log1p(-p)) if p < 1 else 0

    def apply(self, data: bytes) -> list[bytes | float]:
        """`data` as it leaves the proxy: byte strings, and delays (seconds) between them."""
        out: list[bytes | float] = []
        start = 0
        while self._gap < len(data) - start:
            at = start + self._gap
            out.append(data[start:at])
            kind = self.rng.choice(KINDS)
            self.injected[kind] += 1
            byte = data[at : at + 1]
            if kind == "flip":
                out.append(bytes([byte[0] ^ (1 << self.rng.randrange(8))]))
            elif kind == "duplicate":
                out.append(byte + byte)
            elif kind == "delay":
                out += [self.faults.delay_s, byte]
            start = at + 1
            self._gap = self._next_gap()
        self._gap -= len(data) - start
        out.append(data[start:])
        return out


class LineProxy:
    """Forwards bytes between the host (a TCP client of `url`) and a board end, with `faults`
    in both directions. `board_read()` returns the board's next bytes (b"" at its end),
    `board_write(data)` sends it some."""

    def __init__(self, board_read: Callable[[], bytes], board_write: Callable[[bytes], None],
                 faults: LineFaults, seed: int = 0) -> None:
        self.faults = faults
        self._board_read, self._board_write = board_read, board_write
        self._directions = {"to_board": _Direction(faults, seed * 2 + 1),
                            "to_host": _Direction(faults, seed * 2 + 2)}
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"socket://127.0.0.1:{self._listener.getsockname()[1]}"
        self._host: socket.socket | None = None
        self._t0: float | None = None
        self._threads: list[threading.Thread] = []

    @property
    def injected(self) -> int:
        """Faults put on the line so far, both directions (a cut counts once)."""
        cut = self.faults.cut_at is not None and self._t0 is not None and \
            time.monotonic() - self._t0 >= self.faults.cut_at
        return sum(sum(d.injected.values()) for d in self._directions.values()) + int(cut)

    def start(self) -> LineProxy:
        accept = threading.Thread(target=self._accept, daemon=True, name="proxy-accept")
        accept.start()
        self._threads.append(accept)
        return self

    def _accept(self) -> None:
        try:
            self._host, _ = self._listener.accept()
        except OSError:  # closed before the host connected
            return
        self._host.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._t0 = time.monotonic()
        pumps = [(lambda: self._host.recv(65536), self._board_write, "to_board"),
                 (self._board_read, self._host.sendall, "to_host")]
        for read, write, name in pumps:
            thread = threading.Thread(target=self._pump, args=(read, write, name), daemon=True,
                                      name=f"proxy-{name}")
            thread.start()
            self._threads.append(thread)

    def _cut(self) -> bool:
        at = self.faults.cut_at
        if at is None or self._t0 is None:
            return False
        since = time.monotonic() - self._t0
        return at <= since < at + self.faults.cut_s

    def _pump(self, read: Callable[[], bytes], write: Callable[[bytes], None], name: str) -> None:
        direction = self._directions[name]
        try:
            while data := read():
                if self._cut():  # the bytes are gone
                    continue
                for piece in direction.apply(data):
                    if isinstance(piece, float):
                        time.sleep(piece)
                    elif piece:
                        write(piece)
        except OSError:  # either end closed: the run is over
            pass
        finally:
            self._shutdown_host()

    def _shutdown_host(self) -> None:
        if self._host is not None:
            try:
                self._host.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self._listener.close()
        self._shutdown_host()
        if self._host is not None:
            self._host.close()
        for thread in self._threads:
            thread.join(timeout=2)

    def __enter__(self) -> LineProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def board_ends(run) -> tuple[Callable[[], bytes], Callable[[bytes], None], Callable[[], None]]:
    """(read, write, close) of a started board's UART (tinyprop.device.runners): QEMU's socket,
    or the host board process's stdout and stdin."""
    url = getattr(run, "url", None)
    if url is not None and url.startswith("socket://"):
        host, port = url.removeprefix("socket://").rsplit(":", 1)
        sock = socket.create_connection((host, int(port)))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def hang_up() -> None:
            sock.shutdown(socket.SHUT_RDWR)  # wakes the pump reading it
            sock.close()

        return (lambda: sock.recv(65536)), sock.sendall, hang_up
    out, into = run.proc.stdout.fileno(), run.proc.stdin.fileno()

    def write(data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(into, view):]

    # closing its stdin ends the board (end of its UART), which ends the pump reading its stdout
    return (lambda: os.read(out, 65536)), write, run.proc.stdin.close


def faulty_line(faults: LineFaults, seed: int,
                proxies: list[LineProxy]) -> Callable[..., AbstractContextManager[str]]:
    """An `interpose` for tinyprop.device.boards.open_board: the board's UART behind a
    LineProxy with `faults` (appended to `proxies`, so the caller can read its counts)."""

    @contextmanager
    def interpose(run) -> Iterator[str]:
        read, write, close = board_ends(run)
        with LineProxy(read, write, faults, seed) as proxy:
            proxies.append(proxy)
            try:
                yield proxy.url
            finally:
                close()

    return interpose


def _train_through(tb, xs: np.ndarray, ys: np.ndarray, board: str, steps: int, lr: float,
                   seed: int, faults: LineFaults, line_seed: int) -> dict:
    """Train `steps` steps on `board` behind a LineProxy, as `tinyprop train` does (the same
    loop and schedule), pulling the parameters after every step."""
    from ..engines import HParams
    from ..engines.device import DeviceEngine
    from ..training.run import RunConfig, training_events

    proxies: list[LineProxy] = []
    interpose = faulty_line(faults, line_seed, proxies)
    with DeviceEngine(board, tb, HParams(lr, seed), interpose=interpose) as engine:
        t0 = time.monotonic()  # the board built and started: the run itself
        params = []
        for event in training_events(RunConfig(lr, seed), tb, engine, xs, ys, steps, 0):
            if event["type"] == "step":
                params.append(engine.params())
        stats = engine.device.link.stats
        elapsed = time.monotonic() - t0
    return {"params": params, "seconds": elapsed, "retried": stats.retried,
            "faults": proxies[0].injected if proxies else 0,
            "garbled": sum(stats.faults.values())}


def measure(tb, xs: np.ndarray, ys: np.ndarray, *, board: str = "host",
            rates: tuple[float, ...] = RATES, steps: int = 24, lr: float = 0.05, seed: int = 0,
            cut_s: float = CUT_S) -> dict:
    """Train `tb` (a TrainingBlob) on `board` for `steps` steps over (xs, ys) through a clean
    line and through a lossy one at each rate of `rates` (with the line cut once for `cut_s`
    seconds, a third of the way into the clean run's time), and compare the parameters after
    every step. Returns the totals `link_faults` (faults injected), `wrong_steps` (steps whose
    parameters differ from the clean run's, or that never came: goal 0), `frames_retried`,
    `seconds_lost` (time over the clean run's), and the same per rate under `rates`; the clean
    run's time and frames sent again (none on a clean line) beside them."""
    clean = _train_through(tb, xs, ys, board, steps, lr, seed, LineFaults(), 0)
    per_rate = {}
    for i, rate in enumerate(rates):
        faults = LineFaults(rate, cut_at=clean["seconds"] / 3, cut_s=cut_s)
        run = _train_through(tb, xs, ys, board, steps, lr, seed, faults, i + 1)
        wrong = sum(a != b for a, b in zip(run["params"], clean["params"], strict=False))
        wrong += abs(len(clean["params"]) - len(run["params"]))
        per_rate[f"{rate:g}"] = {"link_faults": run["faults"], "wrong_steps": wrong,
                                 "frames_retried": run["retried"],
                                 "frames_garbled": run["garbled"],
                                 "seconds_lost": round(run["seconds"] - clean["seconds"], 2)}
    totals = {key: sum(r[key] for r in per_rate.values())
              for key in ("link_faults", "wrong_steps", "frames_retried")}
    totals["seconds_lost"] = round(sum(r["seconds_lost"] for r in per_rate.values()), 2)
    return {**totals, "steps": steps, "board": board, "clean_seconds": round(clean["seconds"], 2),
            "clean_frames_retried": clean["retried"], "rates": per_rate}
