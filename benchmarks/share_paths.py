"""Where `fairness: "share"` still moves with HiGHS's path (issue 69, docs/rules.md#planner-fairness): records the
share stage's programs of one planner run, re-solves each under other HiGHS settings, and counts the programs whose
objective moved (HiGHS stopped elsewhere) and those whose round counts moved at the same objective (a tie). Prints
one JSON line per setting.

    python benchmarks/share_paths.py                          # canonical trace, solver seed 0 (about 5 CPU-min)
    python benchmarks/share_paths.py --trace compare-quick --seed 3
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import planner_robustness as B
from hetsched.decide.shockwave import fair_stages


def record(trace: str, seed: int) -> list:
    """The share stage's solve_milp calls (args, kwargs, result) of one run with HiGHS's defaults."""
    calls, solve = [], fair_stages.solve_milp

    def recorded(*args, **kwargs):
        res = solve(*args, **kwargs)
        calls.append((args, kwargs, res))
        return res

    fair_stages.solve_milp = recorded
    try:
        B.TRACES[trace]((), seed, "share")
    finally:
        fair_stages.solve_milp = solve
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", default="canonical", choices=list(B.TRACES))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    calls = record(args.trace, args.seed)
    for setting, options in B.SETTINGS.items():
        if not options:
            continue
        start, objective_moved, tied = time.process_time(), 0, 0
        for (c2, A, lo, hi, col_lo, col_hi, integer), kwargs, res in calls:
            again = fair_stages.solve_milp(c2, A, lo, hi, col_lo, col_hi, integer,
                                           **{**kwargs, "options": tuple(kwargs["options"]) + options})
            x, y = np.rint(res.x[integer]), np.rint(again.x[integer])
            if abs(res.objective - again.objective) > 1e-9 * max(1.0, abs(res.objective)):
                objective_moved += 1
            elif not np.array_equal(x, y):
                tied += 1
        print(json.dumps({"trace": args.trace, "seed": args.seed, "setting": setting, "programs": len(calls),
                          "objective_moved": objective_moved, "counts_moved_at_equal_objective": tied,
                          "cpu_s": round(time.process_time() - start, 1)}), flush=True)


if __name__ == "__main__":
    main()
