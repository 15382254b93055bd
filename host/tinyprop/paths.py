"""Where the C sources are that the host builds, and where builds and downloads go.

REPO_ROOT is the tree laid out as the repository: `firmware/`, `boards/`, `platformio.ini`,
`monitor/filter_tinyprop.py`. In a source checkout (the editable install) that is the checkout
itself; an installed wheel carries a copy of those files as package data in `tinyprop/_native/`
(setup.py puts it there).

BUILD_ROOT is where everything built goes: $TINYPROP_BUILD if set; else the checkout's `build/`;
else, for an installed package, whose folder may not be writable and is shared by every user,
`<cache>/build/<version>-<digest of the bundled sources>`, so two versions (or two builds of one
version) never mix objects.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from . import __version__

CACHE_ENV = "TINYPROP_CACHE"
BUILD_ENV = "TINYPROP_BUILD"

PACKAGE_DIR = Path(__file__).resolve().parent
_CHECKOUT = PACKAGE_DIR.parents[1]
# host/tinyprop inside a checkout that has the firmware: the editable install
IN_CHECKOUT = PACKAGE_DIR == _CHECKOUT / "host" / "tinyprop" and (
    _CHECKOUT / "firmware" / "sources.mk"
).is_file()
REPO_ROOT = _CHECKOUT if IN_CHECKOUT else PACKAGE_DIR / "_native"
BOARDS_ROOT = REPO_ROOT / "boards"  # one folder a board: its sources and profile.json


def cache_dir() -> Path:
    """Where downloads (and an installed package's builds) live: $TINYPROP_CACHE, else
    ~/.cache/tinyprop."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "tinyprop"


def _sources_digest(root: Path) -> str:
    """sha256 over the bundled files' relative paths and contents (about 130 small files)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _build_root() -> Path:
    env = os.environ.get(BUILD_ENV)
    if env:
        return Path(env)
    if IN_CHECKOUT:
        return REPO_ROOT / "build"
    return cache_dir() / "build" / f"{__version__}-{_sources_digest(REPO_ROOT)[:12]}"


BUILD_ROOT = _build_root()


def setup_hint() -> str:
    """What installs the Debian tools besides apt-get: scripts/setup.sh, in a checkout."""
    return " (or scripts/setup.sh)" if IN_CHECKOUT else ""


@contextmanager
def file_lock(lock: Path) -> Iterator[None]:
    """Hold an exclusive flock on the file `lock` (created, with its folder, if need be) for the
    block: processes that build into one place (test workers sharing build/) take turns, and one
    that waited finds what the other built instead of building it again."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def made_once(path: Path, make: Callable[[], bytes]) -> Path:
    """`path`, written from make() by the first process that needs it: others wait on its lock
    (path.lock) and take that file, instead of making it again and replacing, with other bytes
    (a TensorFlow conversion is not reproducible), a file another process is reading. Written
    then renamed: a reader never sees half a file."""
    if path.exists():
        return path
    with file_lock(path.with_suffix(".lock")):
        if not path.exists():
            data = make()
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
    return path
