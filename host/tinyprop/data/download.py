"""Downloads that survive a bad network: files fetched over HTTP(S) into a cache, each checked
against its sha256, with one progress bar for the lot.

- A file is written as `<name>.part` beside its destination and renamed into place only once its
  sha256 is right, so a file under its final name is always whole and checked.
- An interrupted transfer (timeout, reset, a server that hangs up, Ctrl-C) leaves the `.part`;
  the next attempt, in this run or a later one, asks for the rest (HTTP Range) and appends.
- Transient failures (timeouts, resets, connection refused, HTTP 408/429/5xx) are retried after
  RETRY_DELAYS; a file whose bytes do not match its sha256 is dropped and fetched again once.
- Errors are one line: no network (a name that does not resolve, an unreachable network), a
  file that stays wrong, a full disk (naming the folder and the space needed), an HTTP error.
"""

from __future__ import annotations

import errno
import hashlib
import http.client
import os
import shutil
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from .. import __version__
from ..errors import TinypropError

# Seconds to wait before each retry; len(RETRY_DELAYS) + 1 attempts in all.
RETRY_DELAYS = (1.0, 2.0, 4.0, 8.0)
TIMEOUT = 30.0  # seconds without a byte before a transfer counts as stalled
WORKERS = 8  # files fetched at once: many small files are bound by round trips, not bandwidth
LOCAL_COPY_HINT = "set TINYPROP_ASSETS (or pass --model / --data) to a local copy"
_CHUNK = 1 << 16
# Causes that mean this machine has no route to the internet: no retry helps.
_NO_NETWORK_ERRNOS = {errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN}


@dataclass(frozen=True)
class RemoteFile:
    """url, saved as dest when its bytes have this sha256; size in bytes if known beforehand."""

    url: str
    dest: Path
    sha256: str
    size: int | None = None


class DownloadError(TinypropError):
    """A download that cannot succeed by retrying now (the message says what to do)."""


class _Transient(Exception):
    """A failure worth retrying; the text says what happened."""


class _Stopped(Exception):
    """Another file failed (or Ctrl-C): stop this one, keeping its .part."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def part_path(dest: Path) -> Path:
    """Where dest's bytes gather until they are whole and checked."""
    return dest.with_name(dest.name + ".part")


def fetch(files: Sequence[RemoteFile], what: str, workers: int = WORKERS) -> None:
    """Make every file present and checked, downloading the missing ones (`what` names them on
    the progress bar). A file already in place is checked and fetched again if wrong."""
    missing = [f for f in files if not _valid(f.dest, f.sha256)]
    if not missing:
        return
    _check_space(missing)
    progress = Progress(
        TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
        TimeRemainingColumn(), console=Console(stderr=True),
    )  # fmt: skip
    sizes = [f.size for f in missing]
    total = sum(sizes) if None not in sizes else None  # type: ignore[arg-type]
    counted = _Counter(progress, what, len(missing))
    stop = threading.Event()
    with progress:
        counted.task = progress.add_task(counted.label(), total=total)
        # the bar shows the bytes of every .part: what earlier runs left counts from the start
        counted.advance(sum(_part_size(f.dest) for f in missing))
        if len(missing) == 1:
            _fetch_one(missing[0], counted, stop)
        else:
            _fetch_all(missing, counted, stop, workers)


class _Counter:
    """The shared progress bar: the bytes in .part files (so a dropped .part goes back) and the
    files done."""

    def __init__(self, progress: Progress, what: str, n: int) -> None:
        self.progress, self.what, self.n = progress, what, n
        self.task: TaskID | None = None
        self.done = 0
        self._lock = threading.Lock()

    def label(self) -> str:
        return f"{self.what} {self.done}/{self.n}" if self.n > 1 else self.what

    def advance(self, n: int) -> None:
        with self._lock:
            self.progress.update(self.task, advance=n)

    def file_done(self) -> None:
        with self._lock:
            self.done += 1
            self.progress.update(self.task, description=self.label())


def _fetch_all(files: Sequence[RemoteFile], counter: _Counter, stop: threading.Event,
               workers: int) -> None:
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        futures = [pool.submit(_fetch_one, f, counter, stop) for f in files]
        wait(futures, return_when=FIRST_EXCEPTION)
        failed = [fut for fut in futures if fut.done() and fut.exception() is not None
                  and not isinstance(fut.exception(), _Stopped)]
        if failed:
            raise failed[0].exception()  # type: ignore[misc]
    finally:  # on an error or Ctrl-C the others stop at their next chunk, keeping their .part
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)


def _fetch_one(f: RemoteFile, counter: _Counter, stop: threading.Event) -> None:
    if f.dest.exists():  # present but wrong (fetch() checked it): fetch it again
        f.dest.unlink()
    f.dest.parent.mkdir(parents=True, exist_ok=True)
    part = part_path(f.dest)
    refetched = False
    delays = iter(RETRY_DELAYS)
    while True:
        if stop.is_set():
            raise _Stopped
        try:
            _transfer(f, part, counter, stop)
        except _Transient as exc:
            delay = next(delays, None)
            if delay is None:
                raise DownloadError(
                    f"{f.url}: {exc}, {len(RETRY_DELAYS) + 1} attempts; check the network and "
                    f"run again (the download resumes), or {LOCAL_COPY_HINT}"
                ) from None
            if stop.wait(delay):
                raise _Stopped from None
            continue
        digest = sha256_of(part)
        if digest == f.sha256:
            break
        size = part.stat().st_size
        part.unlink()
        counter.advance(-size)
        if refetched:
            raise DownloadError(
                f"{f.url}: sha256 {digest} does not match the expected {f.sha256}, twice; the "
                f"source changed or something between it and you alters it: {LOCAL_COPY_HINT}"
            )
        refetched = True  # a corrupt transfer: once more from the start
    _replace(part, f.dest)
    counter.file_done()


def _transfer(f: RemoteFile, part: Path, counter: _Counter, stop: threading.Event) -> None:
    """Append the rest of f's bytes to part (all of them without a .part); _Transient on a
    failure worth retrying. Returns when the server has sent everything it promised."""
    have = _part_size(f.dest)
    if f.size is not None and have >= f.size:
        if have == f.size:
            return  # whole already: the hash decides
        part.unlink()
        counter.advance(-have)
        have = 0
    headers = {"User-Agent": f"tinyprop/{__version__}"}
    if have:
        headers["Range"] = f"bytes={have}-"
    try:
        resp = urllib.request.urlopen(urllib.request.Request(f.url, headers=headers),
                                      timeout=TIMEOUT)
    except urllib.error.HTTPError as exc:
        exc.close()
        if exc.code == 416:  # the .part is not a prefix the server knows: start over
            part.unlink(missing_ok=True)
            counter.advance(-have)
            raise _Transient("the server refused to resume (HTTP 416)") from None
        if exc.code in (408, 429) or exc.code >= 500:
            raise _Transient(f"HTTP {exc.code} {exc.reason}") from None
        raise DownloadError(f"{f.url}: HTTP {exc.code} {exc.reason}; the file is not there "
                            f"(or not for us): {LOCAL_COPY_HINT}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(reason, socket.gaierror) or getattr(reason, "errno", None) in \
                _NO_NETWORK_ERRNOS:
            host = urlsplit(f.url).hostname
            raise DownloadError(f"no network: cannot reach {host} ({_text(reason)}); connect "
                                f"this machine, or {LOCAL_COPY_HINT}") from None
        raise _Transient(f"cannot connect ({_text(reason)})") from None
    with resp:
        if have and resp.status == 206 and _range_start(resp) == have:
            mode = "ab"
        else:  # the whole file again (no Range support, or a fresh start)
            counter.advance(-have)
            mode, have = "wb", 0
        length = resp.headers.get("Content-Length")
        expected = have + int(length) if length is not None else f.size
        got = have
        try:
            with open(part, mode) as out:
                while chunk := resp.read(_CHUNK):
                    if stop.is_set():
                        raise _Stopped
                    out.write(chunk)
                    got += len(chunk)
                    counter.advance(len(chunk))
        except (OSError, http.client.HTTPException) as exc:
            if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
                raise disk_full(part.parent, (f.size or expected or got) - got) from None
            raise _Transient(f"transfer broken after {got:,} bytes ({_text(exc)})") from None
    if expected is not None and got < expected:
        raise _Transient(f"connection closed after {got:,} of {expected:,} bytes")


def _range_start(resp: http.client.HTTPResponse) -> int | None:
    """The first byte of a 206 answer (`Content-Range: bytes START-END/TOTAL`)."""
    value = resp.headers.get("Content-Range", "")
    try:
        return int(value.split()[1].split("-")[0])
    except (IndexError, ValueError):
        return None


def _part_size(dest: Path) -> int:
    part = part_path(dest)
    return part.stat().st_size if part.is_file() else 0


def _valid(path: Path, sha256: str) -> bool:
    return path.is_file() and sha256_of(path) == sha256


def _replace(src: Path, dest: Path) -> None:
    try:
        os.replace(src, dest)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise disk_full(dest.parent, src.stat().st_size) from None
        raise


def _check_space(files: Sequence[RemoteFile]) -> None:
    """Refuse before downloading when the cache's disk cannot hold what remains."""
    need = sum(f.size - _part_size(f.dest) for f in files if f.size is not None)
    folder = Path(os.path.commonpath([f.dest.parent for f in files]))
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    if shutil.disk_usage(existing).free < need:
        raise disk_full(folder, need)


def disk_full(folder: Path, need: int) -> DownloadError:
    return DownloadError(
        f"disk full: {folder} needs {max(need, 0) / 1e6:.1f} MB more; free space there, or set "
        f"TINYPROP_CACHE to a folder on another disk"
    )


def _text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
