"""Synergy's single-GPU load sweep at the paper preset through `hetsched.experiments.sweep` on a 2-worker Dask
LocalCluster: FIFO/SRTF/LAS/FTF x fair/tune/opt x 16 loads (0.5-8.0 jobs/h), 128 GPUs, seed 42, jobs 4000-4999,
no cache.

Prints one JSON line: wall seconds, the goal (60 s), summed CPU seconds of the runs and the slowest runs.
`--mechanisms`/`--orderings`/`--loads` narrow the grid for quick checks.
"""

from __future__ import annotations

import argparse
import json
import time

from hetsched.experiments.synergy import single_gpu_configs
from hetsched.experiments.sweep import sweep

GOAL_S = 60.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--orderings", default="FIFO,SRTF,LAS,FTF")
    parser.add_argument("--mechanisms", default="fair,tune,opt")
    parser.add_argument("--loads", default=None, help="comma-separated jobs/h (default: the paper's 16)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    policies = [f"{o}+{m}" for o in args.orderings.split(",") for m in args.mechanisms.split(",")]
    loads = tuple(float(v) for v in args.loads.split(",")) if args.loads else None
    configs = single_gpu_configs("paper", policies, loads=loads)
    start = time.perf_counter()
    rows = sweep(configs, cache_dir=None, n_workers=args.workers, progress=False)
    wall = time.perf_counter() - start
    slowest = rows.sort_values("cpu_s", ascending=False).head(5)
    per_policy = rows.groupby("policy")["cpu_s"].sum().round(1).to_dict()
    print(json.dumps({"runs": len(rows), "wall_s": round(wall, 1), "goal_s": GOAL_S,
                      "wall_over_goal": round(wall / GOAL_S, 3), "cpu_s": round(float(rows["cpu_s"].sum()), 1),
                      "saturated": int(rows["saturated"].sum()), "cpu_s_per_policy": per_policy,
                      "slowest": [f"{r.policy}@{r.jobs_per_hour}: {r.cpu_s:.1f}" for r in slowest.itertuples()]}))


if __name__ == "__main__":
    main()
