"""What the sia_table3 notebook's paper preset costs (issue 70: "paper preset stated with its wall time"), without
running all of it: one run of each kind (policy, trace, cluster), its CPU seconds times the number of runs of that
kind. Prints one JSON line a kind, then the total in CPU-hours and the wall time it means on `--workers` workers.

    python benchmarks/sia_paper_cost.py                 # about 12 minutes: Pollux on the new trace is 6 of them
    python benchmarks/sia_paper_cost.py --skip pollux   # the rest only
    python benchmarks/sia_paper_cost.py --measured outputs/.cache   # what a paper-preset run's cache measured

`--measured` reads the cache of a paper-preset run (a finished one, or one under way): per kind, the runs done and
their CPU seconds, the runs left priced at the kind's mean, and the wall time from the first run's start (its
finish less its CPU seconds) to the last finish, which means something only for a run made in one go.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

from hetsched.experiments import elastic as E


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="Dask workers the preset would run on")
    parser.add_argument("--skip", default="", help="comma-separated policies not to time")
    parser.add_argument("--measured", metavar="CACHE", help="read a paper-preset run's cache instead of timing")
    args = parser.parse_args()
    if args.measured:
        measured(Path(args.measured))
        return
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


FIELDS = ("policy", "workload", "cluster", "max_jobs", "seed", "generations")


def measured(cache: Path) -> None:
    """The paper preset's runs found in `cache` (matched on the run's fields: a cache's keys also hash the code),
    one JSON line a kind and a total."""
    if not cache.is_dir():
        raise SystemExit(f"{cache}: no such cache directory")
    done: dict[tuple, tuple[float, float]] = {}
    for path in cache.glob("*.json"):
        row = json.loads(path.read_text())
        if "cpu_s" in row and "workload" in row:
            done[tuple(row.get(f) for f in FIELDS)] = (float(row["cpu_s"]), path.stat().st_mtime)
    kinds: dict[tuple, list] = {}
    for run in E.runs("paper"):
        kind = (run.policy, run.workload.split("-")[0], run.cluster)
        kinds.setdefault(kind, []).append(done.get(tuple(asdict(run)[f] for f in FIELDS)))
    cpu = left = 0.0
    spans = []
    for kind, found in kinds.items():
        times = [f[0] for f in found if f is not None]
        spans += [(f[1] - f[0], f[1]) for f in found if f is not None]
        mean = sum(times) / len(times) if times else None
        cpu += sum(times)
        left += mean * (len(found) - len(times)) if mean is not None else 0.0
        print(json.dumps({"kind": "|".join(kind), "runs": len(found), "done": len(times),
                          "cpu_s": round(sum(times), 1), "cpu_s_a_run": None if mean is None else round(mean, 1)}))
    unpriced = [k for k, f in kinds.items() if all(x is None for x in f)]
    print(json.dumps({"done": len(spans), "runs": sum(map(len, kinds.values())), "cpu_h": round(cpu / 3600, 3),
                      "left_cpu_h_at_kind_means": round(left / 3600, 3), "kinds_not_priced": len(unpriced),
                      "wall_h_first_start_to_last_finish": round((max(e for _, e in spans) - min(s for s, _ in spans))
                                                                 / 3600, 3) if spans else None}))


if __name__ == "__main__":
    main()
