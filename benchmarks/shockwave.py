"""Shockwave on the shared core: the canonical run, the whole canonical figure and the scale runs.

Prints JSON lines:
- `run`: the Shockwave planner on one setup (CPU seconds, best of --repeat), with the artifact's 898 s
  (HiGHS, this kind of machine: fidelity/README.md) and the issue's goal of 60 s, its solve statistics
  (re-solves, mean/max seconds per solve, capped priorities) and the metrics;
- `figure`: the seven policies of the canonical figure through `hetsched.experiments.sweep` on a 2-worker Dask
  LocalCluster, no cache, wall seconds against the 120-s goal.
`--setups canonical,scale_64,scale_128,scale_256` picks the runs; `--formulation artifact` times the artifact's
own x[j, r] + SOS2 model instead of hetsched's; `--profile` prints the top cProfile entries of the first run.
"""

from __future__ import annotations

import argparse
import json
import time

import pandas as pd

from hetsched.model.cluster import ClusterSpec
from hetsched.experiments import shockwave as W
from hetsched.sim.metrics import summary
from hetsched.decide.shockwave.core import ShockwavePolicy
from hetsched.sim.simulator import RoundSimulation, SimulationConfig
from hetsched.traces import read_trace

ARTIFACT_CPU_S = 898.0       # canonical run, HiGHS in place of Gurobi (the artifact with Gurobi: about 600 s)
GOAL_RUN_S, GOAL_FIGURE_S = 60.0, 120.0


def run(setup: str, formulation: str):
    s = W.SETUPS[setup]
    jobs = read_trace(W.trace_path(s))[: s.num_jobs]
    policy = ShockwavePolicy(s.planner, formulation=formulation)
    start = time.process_time()
    sim = RoundSimulation(jobs, ClusterSpec.load(f"v100={s.gpus}"), policy, s.throughputs,
                          SimulationConfig.for_system("shockwave"), record_timeline=False)
    while sim.step():
        pass
    result = sim.result()
    return time.process_time() - start, result, pd.DataFrame(sim.sched.decide.solve_log)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--setups", default="canonical")
    parser.add_argument("--formulation", default="aggregate", choices=("aggregate", "artifact"))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--no-figure", action="store_true")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    setups = args.setups.split(",")
    if args.profile:
        import cProfile
        import pstats
        profiler = cProfile.Profile()
        profiler.runcall(run, setups[0], args.formulation)
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(20)
    for setup in setups:
        best = None
        for _ in range(args.repeat):
            cpu, result, solves = run(setup, args.formulation)
            best = cpu if best is None else min(best, cpu)
        row = summary(result)
        out = {"kind": "run", "setup": setup, "gpus": W.SETUPS[setup].gpus, "jobs": row["num_jobs"],
               "formulation": args.formulation, "cpu_s": round(best, 2), "goal_s": GOAL_RUN_S,
               "solves": len(solves), "solve_mean_s": round(float(solves["seconds"].mean()), 4),
               "solve_max_s": round(float(solves["seconds"].max()), 4),
               "solve_share": round(float(solves["seconds"].sum()) / best, 3),
               # of which turning round counts into rounds (the rank program on one GPU type), the rest the window
               "rank_share": round(float(solves["rank_seconds"].sum()) / best, 3),
               "capped_priorities": int(solves["capped"].sum()),
               **{k: row[k] for k in ("makespan_s", "avg_jct_s", "worst_ftf_rho", "unfair_fraction", "num_rounds")}}
        if setup == "canonical":
            out["artifact_cpu_s"] = ARTIFACT_CPU_S
            out["speedup"] = round(ARTIFACT_CPU_S / best, 1)
        print(json.dumps(out), flush=True)
    if not args.no_figure:
        from hetsched.experiments.sweep import sweep
        start = time.perf_counter()
        rows = sweep(W.configs("canonical"), cache_dir=None, n_workers=2, progress=False)
        wall = time.perf_counter() - start
        print(json.dumps({"kind": "figure", "runs": len(rows), "wall_s": round(wall, 1), "goal_s": GOAL_FIGURE_S,
                          "wall_over_goal": round(wall / GOAL_FIGURE_S, 3),
                          "cpu_s": {r.policy: round(r.cpu_s, 2) for r in rows.itertuples()}}))


if __name__ == "__main__":
    main()
