"""Record one fuzz target's figures from its libFuzzer log (run.sh does, when $FUZZ_FIGURES is set).

    figures.py FIGURES.json TARGET LOG SECONDS CRASHES COMMIT

FIGURES.json maps each target to {executions, crashes, seconds, exec_per_s, date, commit}; this
target's entry is replaced, the others kept (targets are run one after another).
"""

from __future__ import annotations

import datetime
import json
import re
import sys
from pathlib import Path


def stats(log: str, name: str) -> list[int]:
    """A -print_final_stats=1 figure (stat::NAME) of each process whose log is in `log`."""
    return [int(n) for n in re.findall(rf"^stat::{name}:\s+(\d+)", log, re.MULTILINE)]


def final_stat(log: str, name: str) -> int:
    """The last process's stat::NAME, 0 when the run printed none."""
    found = stats(log, name)
    return found[-1] if found else 0


def executions_of(log: str) -> int:
    """The run's executions: the sum of its processes' (FUZZ_JOBS runs several, their logs one
    after another)."""
    return sum(stats(log, "number_of_executed_units"))


def main(figures: Path, target: str, log: Path, seconds: int, crashes: int, commit: str) -> None:
    text = log.read_text(errors="replace")
    executions = executions_of(text)
    table = json.loads(figures.read_text()) if figures.exists() else {}
    table[target] = {
        "executions": executions, "crashes": crashes, "seconds": seconds,
        "exec_per_s": round(executions / seconds) if seconds else final_stat(
            text, "average_exec_per_sec"),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit,
    }
    figures.write_text(json.dumps(dict(sorted(table.items())), indent=2) + "\n")
    print(f"figures.py: {target}: {executions} executions, {crashes} crashes, {seconds} s "
          f"into {figures}", file=sys.stderr)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
         sys.argv[6])
