"""Where the source checkout is: the firmware and board sources the host builds, and build/,
where everything built or cached for this checkout goes."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_ROOT = REPO_ROOT / "build"
BOARDS_ROOT = REPO_ROOT / "boards"  # one folder a board: its sources and profile.json
