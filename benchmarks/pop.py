"""POP's price and pay-off on a run's own inputs: each policy view solved whole and as k partitions.

A Gavel stream runs under LAS-perf; every `--every` steps after the first `--skip`, the scheduler's policy view
(the active jobs and the cluster) is kept, up to `--views` of them (fewer if the run ends first). Each view is
then solved by every policy of `--policies`, whole and with each k of `--partitions`. Prints one JSON line per
(policy, k): CPU seconds of the solves and their ratio to the whole problem's, and the optimality gap (how much
worse POP's allocation scores on the whole policy's own objective, docs/rules.md#pop): mean and worst over the
views.

    python benchmarks/pop.py                                    # 100k preset's cluster and arrival rate
    python benchmarks/pop.py --num-jobs 6000 --cluster 36:36:36 --mean-interarrival 600 --skip 3000 --every 300
                                                                # saturated: ~175 jobs on 108 GPUs
    python benchmarks/pop.py --policies finish_time_fairness_perf --partitions 2,4,8 --views 5
"""

from __future__ import annotations

import argparse
import json
import time
from itertools import islice

import numpy as np

from hetsched import ClusterSpec, load_throughputs
from hetsched.core.registry import make_policy
from hetsched.sim.simulator import RoundSimulation
from hetsched.traces import GavelGenerator

#: Each policy family's objective: +1 higher is better (max-min, max-sum), -1 lower is better (rho, makespan).
SENSE = {"max_min_fairness": 1, "max_sum_throughput": 1, "finish_time_fairness": -1, "min_total_duration": -1}


def collect_views(num_jobs: int, cluster: str, interarrival_s: float, skip: int, every: int, count: int):
    table = load_throughputs()
    jobs = islice(GavelGenerator(seed=0, mean_interarrival_s=interarrival_s, throughputs=table), num_jobs)
    sim = RoundSimulation(jobs, ClusterSpec.load(cluster), "max_min_fairness_perf", table, record_timeline=False)
    views, steps = [], 0
    while len(views) < count and sim.step():
        steps += 1
        if steps > skip and steps % every == 0 and sim.sched.jobs:
            views.append(sim.sched.view(sim.now))
    return views


def gap(policy: str, whole: float, part: float) -> float:
    """Relative loss of the partitioned allocation on the whole problem's objective (0 = as good)."""
    sense = next(s for family, s in SENSE.items() if policy.startswith(family))
    return (whole - part) / abs(whole) if sense > 0 else (part - whole) / abs(whole)


def measure(policy: str, views, partitions: list[int]) -> list[dict]:
    rows = {k: {"cpu_s": 0.0, "gaps": []} for k in [1] + partitions}
    for view in views:
        whole = make_policy(policy)
        start = time.process_time()
        best = whole.allocate(view)
        rows[1]["cpu_s"] += time.process_time() - start
        score = whole.objective(view, best)          # a stateful policy scores with the state allocate left
        for k in partitions:
            pop = make_policy(policy, partitions=k)
            start = time.process_time()
            allocation = pop.allocate(view)
            rows[k]["cpu_s"] += time.process_time() - start
            rows[k]["gaps"].append(gap(policy, score, whole.objective(view, allocation)))
    out = []
    for k, r in rows.items():
        g = np.array(r["gaps"]) if r["gaps"] else np.zeros(1)
        out.append({"policy": policy, "partitions": k, "views": len(views),
                    "mean_jobs": round(float(np.mean([v.num_jobs for v in views])), 1),
                    "cpu_s": round(r["cpu_s"], 3), "cpu_ratio": round(r["cpu_s"] / rows[1]["cpu_s"], 3),
                    "gap_mean": round(float(g.mean()), 5), "gap_max": round(float(g.max()), 5)})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policies", default="max_min_fairness_perf,finish_time_fairness_perf")
    parser.add_argument("--partitions", default="2,4,8,16")
    parser.add_argument("--num-jobs", type=int, default=100_000)
    parser.add_argument("--cluster", default="2167:2167:2166")
    parser.add_argument("--mean-interarrival", type=float, default=20.0)
    parser.add_argument("--skip", type=int, default=4000, help="steps before the first view (the queue fills)")
    parser.add_argument("--every", type=int, default=500)
    parser.add_argument("--views", type=int, default=10)
    args = parser.parse_args()
    views = collect_views(args.num_jobs, args.cluster, args.mean_interarrival, args.skip, args.every, args.views)
    ks = [int(k) for k in args.partitions.split(",")]
    for policy in args.policies.split(","):
        for row in measure(policy, views, ks):
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
