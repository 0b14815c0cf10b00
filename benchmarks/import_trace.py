"""Import speed of a production trace: a generated million-row openb pod list through `hetsched convert trace`.

    python benchmarks/import_trace.py [--rows 1000000]

Prints wall and CPU seconds and the ratio to the issue's goal (60 s per million rows on 2 cores).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

GOAL_S_PER_MILLION = 60.0


def openb_like(path: Path, rows: int, seed: int = 0) -> None:
    """An openb-shaped pod list: GPU counts 0-8, a quarter pinned to GPU models, arrivals over ~4 months."""
    rng = np.random.default_rng(seed)
    created = np.sort(rng.integers(0, 10 ** 7, rows))
    scheduled = created + rng.integers(0, 1000, rows)
    pd.DataFrame({"name": [f"pod-{i}" for i in range(rows)], "cpu_milli": 8000, "memory_mib": 4096,
                  "num_gpu": rng.choice([0, 1, 1, 1, 2, 4, 8], rows), "gpu_milli": 1000,
                  "gpu_spec": rng.choice(["", "", "", "T4", "P100|V100M16"], rows), "qos": "LS",
                  "pod_phase": rng.choice(["Running", "Succeeded", "Failed"], rows), "creation_time": created,
                  "deletion_time": scheduled + rng.integers(60, 10 ** 5, rows),
                  "scheduled_time": scheduled}).to_csv(path, index=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "pods.csv", Path(tmp) / "jobs.parquet"
        openb_like(src, args.rows)
        start = time.perf_counter()
        run = subprocess.run([sys.executable, "-m", "hetsched", "convert", "trace", str(src), str(out), "--from",
                              "openb", "--gpu-map", "T4=p100x0.8,V100M16=v100"], capture_output=True, text=True)
        wall = time.perf_counter() - start
        if run.returncode:
            print(run.stderr, file=sys.stderr)
            return run.returncode
        jobs = pd.read_parquet(out, columns=["job_id"]).shape[0]
    goal = GOAL_S_PER_MILLION * args.rows / 1e6
    print(f"{args.rows} rows -> {jobs} jobs in {wall:.1f} s wall; goal {goal:.0f} s; {goal / wall:.1f}x inside it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
