"""Sia's speed (issue 70): a whole paper workload under Sia (goal: under 10 CPU-s for 160 Helios jobs; the
artifact's simulator took about 30 minutes for 30 jobs), and the decide stage's time per round at scale (goal:
under 0.1 s a round at 2,048 GPUs; the paper: about 1 s).

`--scale K` multiplies the paper's 64-GPU cluster's nodes by K and replicates every job K times (as the artifact's
`scale_Kx` workloads), and times `--rounds` rounds. Prints one JSON line: `cpu_s` is the run (with what it loads
once per process), `process_cpu_s` the whole process.
"""

from __future__ import annotations

import argparse
import json
import resource
import time

import numpy as np

from hetsched.sim.elastic import prepare, simulate_elastic
from hetsched.experiments.elastic import scaled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--policy", default="sia")
    parser.add_argument("--workload", default="helios-1")
    parser.add_argument("--scale", type=int, default=1, help="cluster nodes and jobs x K (32: 2,048 GPUs)")
    parser.add_argument("--rounds", type=int, default=None, help="stop after this many rounds (default: all)")
    args = parser.parse_args()
    cluster, frame = scaled(args.scale, args.workload)
    policy, jobs, round_s = prepare(args.policy, cluster, frame)
    start = time.process_time()
    result = simulate_elastic(jobs, cluster, policy, round_s, max_rounds=args.rounds)
    cpu = time.process_time() - start
    decide = np.array(result.decide_s)[result.contention > 0]       # the rounds with a job to decide for
    print(json.dumps({"policy": args.policy, "workload": args.workload, "gpus": cluster.total_gpus,
                      "jobs": len(jobs), "rounds": len(decide), "jobs_done": len(result.jobs), "cpu_s": round(cpu, 2),
                      "decide_median_s": round(float(np.median(decide)), 4),
                      "decide_p95_s": round(float(np.quantile(decide, 0.95)), 4),
                      "max_active_jobs": int(result.contention.max()),
                      "process_cpu_s": round(_process_cpu_s(), 2),
                      **({"avg_jct_h": round(result.metrics()["avg_jct_h"], 4)} if args.rounds is None else {})}))


def _process_cpu_s() -> float:
    """The whole process so far: the interpreter, the imports, reading the tables and the run."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    main()
