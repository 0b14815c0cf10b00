"""One policy solve on Gavel's microbenchmark setting (spec/gavel.md s.8.7): N single-GPU jobs, N/4 GPUs per type.

Prints one JSON line: {"policy", "num_jobs", "solve_s", "objective", ...}. `solve_s` is process CPU time of
`allocate` (median of --trials), after one warm-up call so imports and first-call costs are excluded.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from hetsched import ClusterSpec, load_throughputs
from hetsched.decide.gavel import make_policy, view_from_jobs
from hetsched.traces import GavelGenerator

# The artifact's times at 2048 jobs etc. on its own benchmark (spec s.8.7, fidelity/README.md), for ratios.
ARTIFACT_S = {("max_min_fairness_perf", 2048): 0.25, ("max_min_fairness_packed", 512): 36.0,
              ("max_min_fairness_water_filling", 1024): 2.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--policy", required=True)
    parser.add_argument("--num-jobs", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()

    table = load_throughputs()
    jobs = GavelGenerator(seed=args.seed, mean_interarrival_s=1000, throughputs=table).jobs(args.num_jobs)
    per_type = max(1, args.num_jobs // 4)
    view = view_from_jobs(jobs, ClusterSpec.parse(f"{per_type}:{per_type}:{per_type}"), table, now=0.0)
    make_policy(args.policy).allocate(view)       # warm-up
    times, objective = [], None
    for _ in range(args.trials):
        policy = make_policy(args.policy)
        start = time.process_time()
        allocation = policy.allocate(view)
        times.append(time.process_time() - start)
        objective = policy.objective(view, allocation)
    solve_s = statistics.median(times)
    row = {"policy": args.policy, "num_jobs": args.num_jobs, "solve_s": round(solve_s, 5),
           "objective": objective if objective == objective else None, "seed": args.seed}   # NaN -> null
    artifact = ARTIFACT_S.get((args.policy, args.num_jobs))
    if artifact:
        row["artifact_s"] = artifact
        row["speedup"] = round(artifact / max(solve_s, 1e-9), 1)
    print(json.dumps(row))


if __name__ == "__main__":
    main()
