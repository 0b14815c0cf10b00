"""Scale check: a Gavel-generated stream on a large cluster with an LP policy. Prints one JSON line with CPU and
wall seconds and the peak resident memory of the process.

    python benchmarks/scale.py                                  # 20k jobs on 2048 GPUs (682:683:683)
    python benchmarks/scale.py --preset 100k                    # 100k jobs on 6,500 GPUs, one every 20 s
    python benchmarks/scale.py --preset 1m                      # a million jobs on 6,500 GPUs, one every 20 s
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from itertools import islice

from hetsched import ClusterSpec, load_throughputs
from hetsched.core.registry import policy_for
from hetsched.sim.metrics import summary
from hetsched.sim.simulator import simulate
from hetsched.solvers import clock
from hetsched.traces import GavelGenerator


#: name -> (jobs, cluster, mean interarrival s)
PRESETS = {"20k": (20_000, "682:683:683", 40.0), "100k": (100_000, "2167:2167:2166", 20.0),
           "1m": (1_000_000, "2167:2167:2166", 20.0)}


def peak_rss_mb() -> float:
    """The process's peak resident set size (ru_maxrss: KiB on Linux, bytes on macOS)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2 ** 20 if sys.platform == "darwin" else rss / 2 ** 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--policy", default="max_min_fairness_perf")
    parser.add_argument("--preset", choices=sorted(PRESETS), help="jobs, cluster and arrival rate together")
    parser.add_argument("--num-jobs", "--jobs", type=int, default=20_000)
    parser.add_argument("--cluster", default="682:683:683")
    parser.add_argument("--mean-interarrival", type=float, default=40.0, help="seconds (40 s = 90 jobs/h)")
    parser.add_argument("--partitions", type=int, default=1, help="POP: the LP solved as K partitions")
    args = parser.parse_args()
    if args.preset:
        args.num_jobs, args.cluster, args.mean_interarrival = PRESETS[args.preset]
    table = load_throughputs()
    jobs = islice(GavelGenerator(seed=0, mean_interarrival_s=args.mean_interarrival, throughputs=table),
                  args.num_jobs)
    wall, mark = time.perf_counter(), clock.reading()
    policy = policy_for(args.policy, 0, partitions=args.partitions)
    result = simulate(jobs, ClusterSpec.load(args.cluster), policy, table, record_timeline=False)
    row = summary(result)
    spent = clock.since(mark)
    row.update({"cpu_s": round(spent["cpu_s"], 1), "wall_s": round(time.perf_counter() - wall, 1),
                "solver_cpu_s": round(spent["solver_cpu_s"], 1),
                "peak_rss_mb": round(peak_rss_mb()), "cluster": args.cluster,
                "mean_interarrival_s": args.mean_interarrival, "partitions": args.partitions})
    print(json.dumps(row))


if __name__ == "__main__":
    main()
