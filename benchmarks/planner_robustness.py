"""How Shockwave's fairness depends on where HiGHS stops its search (issue 69): the planner under several HiGHS
settings (feasibility jump on and off, presolve on and off) and solver seeds, on the canonical trace (120 jobs, 32
V100s) and on `hetsched compare --preset quick`'s Gavel stream (24 multi-GPU jobs a seed on three GPU types, the
stream's seed is the solver's), and its Shockwave and openb streams. Prints one JSON line per run and a table of
medians over seeds per setting.

    python benchmarks/planner_robustness.py                       # every trace, 3 settings x 5 seeds
    python benchmarks/planner_robustness.py --traces canonical --seeds 3
    python benchmarks/planner_robustness.py --fairness share      # one plan (docs/rules.md#planner-fairness)

The settings are `PlannerConfig.solver_options`; the plans' contract is the artifact's numbers within the fidelity
tests' tolerances, and fairness that does not move with the solver's path.
"""

from __future__ import annotations

import argparse
import json
import time
from functools import partial

import numpy as np
import pandas as pd

from hetsched.core.run_config import SimulationConfig
from hetsched.experiments import compare_systems as S
from hetsched.experiments import shockwave as W
from hetsched.model.cluster import ClusterSpec
from hetsched.decide.shockwave.config import FAIRNESS
from hetsched.decide.shockwave.core import ShockwavePolicy
from hetsched.sim.metrics import summary
from hetsched.sim.simulator import simulate
from hetsched.traces import read_trace

SETTINGS = {"default": (), "no feasibility jump": (("mip_heuristic_run_feasibility_jump", False),),
            "no presolve": (("presolve", "off"),)}


def canonical(options: tuple, seed: int, fairness: str = "solver") -> dict:
    setup = W.SETUPS["canonical"]
    jobs = read_trace(W.trace_path(setup))
    policy = ShockwavePolicy(setup.planner, seed=seed, solver_options=options, fairness=fairness)
    result = simulate(jobs, ClusterSpec.parse(f"v100={setup.gpus}"), policy, setup.throughputs,
                      SimulationConfig.for_system("shockwave"), record_timeline=False)
    row = summary(result)
    return {"worst_rho": row["worst_ftf_rho"], "unfair_fraction": row["unfair_fraction"],
            "avg_jct_h": row["avg_jct_s"] / 3600}


def compare_quick(options: tuple, seed: int, fairness: str = "solver", stream: str = "gavel") -> dict:
    case = S.Case(stream, "shockwave", seed, "quick")
    jobs, cluster, table, rules = S.workload(case)
    config = SimulationConfig.for_system(rules)
    policy = ShockwavePolicy(None, seed=seed, solver_options=options, fairness=fairness)
    result = simulate(jobs, cluster, policy, table, config, record_timeline=True, max_rounds=2_000_000)
    m = S.metrics(result, cluster, table, config.round_s)
    return {k: m[k] for k in ("worst_rho", "unfair_fraction", "avg_jct_h")}


TRACES = {"canonical": canonical, "compare-quick": compare_quick,
          "compare-quick-shockwave": partial(compare_quick, stream="shockwave"),
          "compare-quick-openb": partial(compare_quick, stream="openb")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", nargs="+", default=list(TRACES), choices=list(TRACES))
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--seeds", type=int, default=5, help="solver seeds 0..N-1")
    parser.add_argument("--fairness", choices=FAIRNESS, default="solver",
                        help="which plan within the gap a priority window keeps (docs/rules.md#planner-fairness)")
    args = parser.parse_args()
    rows = []
    for trace in args.traces:
        for seed in range(args.seeds):
            for setting in args.settings:          # settings alternate within a seed: the same machine state
                start = time.process_time()
                row = {"trace": trace, "setting": setting, "seed": seed,
                       **TRACES[trace](SETTINGS[setting], seed, args.fairness),
                       "cpu_s": round(time.process_time() - start, 2)}
                rows.append(row)
                print(json.dumps(row), flush=True)
    frame = pd.DataFrame(rows)
    table = frame.groupby(["trace", "setting"], sort=False)[["worst_rho", "unfair_fraction", "avg_jct_h",
                                                            "cpu_s"]].median()
    spread = frame.groupby(["trace", "setting"], sort=False)["worst_rho"].agg(lambda v: f"{v.min():.2f}-{v.max():.2f}")
    print(table.assign(worst_rho_range=spread).round(3).to_string())
    base = table.xs("default", level="setting") if "default" in args.settings else None
    if base is not None:
        moved = (table["worst_rho"] / base["worst_rho"].reindex(table.index, level="trace") - 1).abs()
        print(f"largest move of the median worst rho from HiGHS's defaults: {np.nanmax(moved.to_numpy()):.1%}")


if __name__ == "__main__":
    main()
