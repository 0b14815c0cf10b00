"""How far a better start could take Shockwave's rank program (docs/rules.md#planner-programs), on one setup.

On one GPU type the planner turns its round counts into rounds with a MILP. When the greedy order packs every
count, that packing is handed to HiGHS as a start and HiGHS returns it at once; when it does not, HiGHS searches
from scratch. This runs a setup once, records every rank program solved without a start, then solves each again
with the solution HiGHS returned as its start: the most that any packing heuristic could save (it would also
change which of the near-optimal plans HiGHS returns, and so the run's results).

Prints one JSON line: run CPU, window and rank programs' solver CPU, the unstarted rank programs' count and CPU,
and their CPU again with a perfect start.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import shockwave as bench
from hetsched.decide.shockwave import core, milp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--setup", default="scale_256")
    args = parser.parse_args()
    solve_milp, rank_program = milp.solve_milp, core.rank_program
    spent = {"window": 0.0, "rank": 0.0}
    unstarted: list[tuple] = []
    inside = [False]

    def timed_solve(*a, **kw):
        start = time.process_time()
        res = solve_milp(*a, **kw)
        seconds = time.process_time() - start
        spent["rank" if inside[0] else "window"] += seconds
        if inside[0] and kw.get("start") is None and res.ok:
            unstarted.append((a, kw, seconds, np.rint(res.x)))
        return res

    def ranking(*a, **kw):
        inside[0] = True
        try:
            return rank_program(*a, **kw)
        finally:
            inside[0] = False

    milp.solve_milp, core.rank_program = timed_solve, ranking
    try:
        cpu, result, solves = bench.run(args.setup, "aggregate")
    finally:
        milp.solve_milp, core.rank_program = solve_milp, rank_program
    again, same = 0.0, 0
    for a, kw, _, x in unstarted:
        start = time.process_time()
        res = solve_milp(*a, **{**kw, "start": x})
        again += time.process_time() - start
        same += bool(res.ok and np.array_equal(np.rint(res.x), x))
    print(json.dumps({"setup": args.setup, "cpu_s": round(cpu, 2), "window_solver_s": round(spent["window"], 2),
                      "rank_solver_s": round(spent["rank"], 2), "rank_unstarted": len(unstarted),
                      "rank_unstarted_s": round(sum(u[2] for u in unstarted), 2),
                      "rank_unstarted_with_perfect_start_s": round(again, 2), "returned_the_start": same}))


if __name__ == "__main__":
    main()
