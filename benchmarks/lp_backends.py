"""Every open-source LP back end on the LPs that one Fig. 8 run actually solves.

    python benchmarks/lp_backends.py [--policy max_min_fairness_packed] [--rate 4.4] [--seed 0] [--every 25]

Runs one paper-preset Fig. 8 point (36:36:36, window 4000-4999) and keeps every `--every`-th LP that the policy
poses on the allocation polytope (decide/gavel/lp.py: packed LAS, water filling, FTF, ...). Then it solves each kept
LP with every back end of `hetsched.solvers` and prints, per back end, the median and total CPU milliseconds per
LP, the worst relative objective gap to ECOS and the largest distance of its point from ECOS's. ECOS is the
reference: the artifact's cvxpy handed these problems to ECOS, and an interior point without crossover lands
on the central point of a degenerate optimal face, where a simplex (HiGHS) lands on a vertex, i.e. a different
allocation with the same objective.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from unittest import mock

import numpy as np

import hetsched.decide.gavel.lp as polytope_lp
from hetsched.experiments.continuous import configs
from hetsched.experiments.sweep import run_one
from hetsched.solvers import BACKENDS, ConicProblem, solve


def recorded_lps(policy: str, rate: float, seed: int, every: int) -> tuple[list[ConicProblem], int]:
    """Every `every`-th LP of the run (and how many it solved in all)."""
    kept: list[ConicProblem] = []
    count = [0]
    posed = polytope_lp.solve

    def keep(problem, solver="ecos", tol=1e-8):
        if count[0] % every == 0:
            kept.append(problem)
        count[0] += 1
        return posed(problem, solver, tol)

    with mock.patch.object(polytope_lp, "solve", keep):
        run_one(configs("single", "paper", [policy], rates=(rate,), seeds=(seed,))[0])
    return kept, count[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", default="max_min_fairness_packed")
    parser.add_argument("--rate", type=float, default=4.4, help="paper-equivalent jobs/h")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--every", type=int, default=25, help="keep every k-th LP")
    args = parser.parse_args()
    problems, total = recorded_lps(args.policy, args.rate, args.seed, args.every)
    if not problems:
        raise SystemExit(f"{args.policy} posed no LP on the polytope in this run (per-job LPs are not recorded)")
    reference = [solve(p, "ecos") for p in problems]
    solved = [i for i, r in enumerate(reference) if r.ok]
    problems, reference = [problems[i] for i in solved], [reference[i] for i in solved]
    if not problems:
        raise SystemExit("ECOS solved none of the kept LPs; there is no reference point to compare with")
    sizes = np.array([p.G.shape for p in problems])
    print(json.dumps({"policy": args.policy, "rate": args.rate, "lps_solved": total, "lps_kept": len(problems),
                      "median_vars": int(np.median(sizes[:, 1])), "median_rows": int(np.median(sizes[:, 0]))}))
    for name in BACKENDS:
        solve(problems[0], name)                    # warm-up: imports and first-call costs are not timed
        times, gap, dist, failed = [], 0.0, 0.0, 0
        for p, ref in zip(problems, reference):
            start = time.process_time()
            sol = solve(p, name)
            times.append(time.process_time() - start)
            if not sol.ok:
                failed += 1
                continue
            gap = max(gap, abs(sol.objective - ref.objective) / max(abs(ref.objective), 1e-12))
            dist = max(dist, float(np.abs(sol.x - ref.x).max()))
        print(json.dumps({"backend": name, "median_ms": round(statistics.median(times) * 1e3, 2),
                          "total_ms": round(sum(times) * 1e3, 1), "max_rel_objective_gap": float(f"{gap:.3g}"),
                          "max_abs_x_distance": float(f"{dist:.3g}"), "failed": failed}))


if __name__ == "__main__":
    main()
