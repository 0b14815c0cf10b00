"""Scale check: 20k jobs on 2048 GPUs (682:683:683) with an LP policy. Prints one JSON line."""

from __future__ import annotations

import argparse
import json
import time
from itertools import islice

from hetsched import ClusterSpec, load_throughputs
from hetsched.sim.metrics import summary
from hetsched.sim.simulator import simulate
from hetsched.traces import GavelGenerator


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--policy", default="max_min_fairness_perf")
    parser.add_argument("--num-jobs", type=int, default=20_000)
    parser.add_argument("--cluster", default="682:683:683")
    parser.add_argument("--mean-interarrival", type=float, default=40.0, help="seconds (40 s = 90 jobs/h)")
    args = parser.parse_args()
    table = load_throughputs()
    jobs = islice(GavelGenerator(seed=0, mean_interarrival_s=args.mean_interarrival, throughputs=table),
                  args.num_jobs)
    start, wall = time.process_time(), time.perf_counter()
    result = simulate(jobs, ClusterSpec.parse(args.cluster), args.policy, table, record_timeline=False)
    row = summary(result)
    row.update({"cpu_s": round(time.process_time() - start, 1), "wall_s": round(time.perf_counter() - wall, 1),
                "goal_s": 120, "cluster": args.cluster})
    print(json.dumps(row))


if __name__ == "__main__":
    main()
