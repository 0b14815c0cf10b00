"""The times the README states, measured again: fails when one is off by more than 2x in CPU terms.

    python benchmarks/stated_times.py            # hetsched compare --preset quick (about a minute)
    python benchmarks/stated_times.py --all      # and make reproduce's notebooks at the quick preset (10+ minutes)

Each command runs from an empty cache in a temporary folder; CPU is the process's and its children's (Dask's
workers, papermill's kernels) user + system seconds. Prints one JSON line per command with the stated and measured
CPU and wall seconds and their ratios; exit status 1 when a CPU ratio is outside [0.5, 2]. Wall time depends on the
machine's other work, so it is printed, not checked. `tests/test_readme.py` checks that the README states these
numbers.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HETSCHED = [sys.executable, "-m", "hetsched"]

#: name -> (command, stated CPU-s, stated wall-s on 2 cores): what the README says (measured 2026-11-29).
STATED = {
    "compare-quick": (lambda out: [*HETSCHED, "compare", "--preset", "quick", "--out", str(out / "compare"),
                                   "--cache-dir", str(out / "cache")], 79.0, 43.0),
    "reproduce-quick": (lambda out: [*HETSCHED, "reproduce", "--preset", "quick", "--out", str(out / "outputs")],
                        None, None),
}


def measure(name: str) -> dict:
    command, cpu_stated, wall_stated = STATED[name]
    with tempfile.TemporaryDirectory(prefix="hetsched-stated-") as tmp:
        before, began = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        out = subprocess.run(command(Path(tmp)), cwd=ROOT, capture_output=True, text=True)
        after, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter() - began
    if out.returncode != 0:
        raise SystemExit(f"{name}: exit status {out.returncode}\n{out.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    row = {"command": name, "cpu_s": round(cpu, 1), "wall_s": round(wall, 1), "stated_cpu_s": cpu_stated,
           "stated_wall_s": wall_stated}
    if cpu_stated:
        row["cpu_ratio"] = round(cpu / cpu_stated, 2)
        row["wall_ratio"] = round(wall / wall_stated, 2)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="also `hetsched reproduce --preset quick`")
    args = parser.parse_args()
    off = 0
    for name in STATED if args.all else ["compare-quick"]:
        row = measure(name)
        print(json.dumps(row), flush=True)
        off += "cpu_ratio" in row and not 0.5 <= row["cpu_ratio"] <= 2.0
    return 1 if off else 0


if __name__ == "__main__":
    sys.exit(main())
