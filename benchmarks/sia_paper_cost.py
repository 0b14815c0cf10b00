"""What the sia_table3 notebook's paper preset costs (issue 70: "paper preset stated with its wall time"), without
running all of it: one run of each kind (policy, trace, cluster), its CPU seconds times the number of runs of that
kind. Prints one JSON line a kind, then the total in CPU-hours and the wall time it means on `--workers` workers.

    python benchmarks/sia_paper_cost.py                 # about 12 minutes: Pollux on the new trace is 6 of them
    python benchmarks/sia_paper_cost.py --skip pollux   # the rest only
"""

from __future__ import annotations

import argparse
import json
import time

from hetsched.experiments import elastic as E


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="Dask workers the preset would run on")
    parser.add_argument("--skip", default="", help="comma-separated policies not to time")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    kinds: dict[tuple, list] = {}
    for run in E.runs("paper"):
        kinds.setdefault((run.policy, run.workload.split("-")[0], run.cluster), []).append(run)
    total = 0.0
    for kind, runs in kinds.items():
        if kind[0] in skip:
            continue
        start, wall = time.process_time(), time.time()
        row = E.run_one(runs[0])
        cpu = time.process_time() - start
        total += cpu * len(runs)
        print(json.dumps({"kind": "|".join(kind), "runs": len(runs), "cpu_s": round(cpu, 1),
                          "wall_s": round(time.time() - wall, 1), "avg_jct_h": round(row["avg_jct_h"], 3)}),
              flush=True)
    print(json.dumps({"total_cpu_h": round(total / 3600, 2), "workers": args.workers,
                      "wall_h_at_least": round(total / 3600 / args.workers, 2)}))


if __name__ == "__main__":
    main()
