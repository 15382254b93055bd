"""Every `docs/...` path, every relative Markdown path or link (`datasets/README.md`,
`[report](report.png)`), every `host/tinyprop/...` path and every file path under firmware/,
boards/, micropython/, tests/ or datasets/ that the code and the docs mention exists in the
tree: modules, sources and documents move, their mentions must follow."""

from __future__ import annotations

import glob
import re
from pathlib import Path

from tinyprop.paths import REPO_ROOT

TEXT_SUFFIXES = {".py", ".c", ".h", ".cpp", ".md", ".mk", ".ld", ".sh", ".ini", ".toml",
                 ".yaml", ".json"}
_START = r"(?<![\w/.-])"
DOCS_PATH = re.compile(_START + r"docs/[\w.*/-]*[\w*/]")
MD_PATH = re.compile(_START + r"(?:[\w.-]+/)+[\w.-]+\.md\b")
MD_LINK = re.compile(r"\]\(([^)\s#:]+)\)")  # relative targets: no scheme, no anchor-only
HOST_PATH = re.compile(_START + r"host/tinyprop/[\w.*/-]*[\w*/]")
# a file under the other top-level folders, named with its extension
TREE_PATH = re.compile(_START + r"(?:firmware|boards|micropython|tests|datasets)/[\w./-]*"
                       r"\.(?:c|h|cpp|py|mk|ld|json|toml|yaml|sh|md)\b")


def sources() -> list[Path]:
    """Where mentions are looked for: the code, the tests and the docs."""
    files = [REPO_ROOT / "README.md", REPO_ROOT / "datasets" / "README.md",
             *sorted((REPO_ROOT / "docs").glob("*.md"))]
    for top in ("host", "firmware", "boards", "micropython", "tests"):
        files += [p for p in sorted((REPO_ROOT / top).rglob("*")) if p.is_file()
                  and (p.suffix in TEXT_SUFFIXES or p.name == "Makefile")
                  and "__pycache__" not in p.parts]
    return [f for f in files if f != Path(__file__).resolve()]  # not the negative control


def mentions(text: str, where: Path) -> set[str]:
    """The paths `text` (the content of file `where`) mentions, relative to the repo root."""
    found = {m.group(0).rstrip(".") for m in DOCS_PATH.finditer(text)}
    found |= {m.group(0) for m in MD_PATH.finditer(text)}
    found |= {m.group(0) for m in TREE_PATH.finditer(text)}
    found |= {m.group(0).rstrip(".") for m in HOST_PATH.finditer(text)}
    if where.suffix == ".md":  # a Markdown link is relative to its file
        for m in MD_LINK.finditer(text):
            target = (where.parent / m.group(1)).resolve()
            found.add(str(target.relative_to(REPO_ROOT)) if target.is_relative_to(REPO_ROOT)
                      else str(target))
    return found


def missing(paths: set[str]) -> set[str]:
    """The paths (globs allowed) that name nothing in the tree; placeholders in a usage text
    ("tests/fuzz/fuzz_TARGET.c", "firmware/....c") and paths of another project's tree, written
    "./ports/esp32/README.md", name no file of ours."""
    return {p for p in paths if not glob.glob(str(REPO_ROOT / p))
            and "TARGET" not in p and "..." not in p and not p.startswith("./")}


def test_every_mentioned_path_exists():
    stale = []
    for f in sources():
        text = f.read_text(errors="replace")
        for path in sorted(missing(mentions(text, f))):
            stale.append(f"{f.relative_to(REPO_ROOT)} mentions {path}")
    assert not stale, "\n".join(stale)


def test_the_check_finds_what_is_missing():
    """Negative control: a text naming missing files is caught, one that names real ones not."""
    where = REPO_ROOT / "docs" / "example.md"
    text = ("see docs/no-such-page.md, datasets/NOPE.md, [a picture](missing.png), and the "
            "module host/tinyprop/gone.py and firmware/tp_gone.c; but docs/training.md, "
            "docs/monitor-disconnected.*, [the report](report.png), datasets/README.md, "
            "firmware/core/tp_blob.c and host/tinyprop/engines/ exist.")
    assert missing(mentions(text, where)) == {"docs/no-such-page.md", "datasets/NOPE.md",
                                              "docs/missing.png", "host/tinyprop/gone.py",
                                              "firmware/tp_gone.c"}
