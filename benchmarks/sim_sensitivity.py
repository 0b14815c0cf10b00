"""How predictable is each system's per-job JCT? The runtime_vs_sim trace in the simulator (calibrated rules) with
every GPU 1 % faster and 1 % slower: the change in average JCT and the per-job p90 |ratio - 1| are a floor under
any runtime-vs-simulator gap, since measured rates carry at least that much noise.

    python benchmarks/sim_sensitivity.py --round 60 --jobs 40

Gavel and Shockwave only: Synergy's emulated jobs run at their profiles' rates, not at a GPU slowdown.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from hetsched import ClusterSpec
from hetsched.experiments.runtime_vs_sim import SYSTEMS, trace
from hetsched.runtime.launch import DEFAULT_SLOWDOWNS
from hetsched.runtime.replay import emulated_throughputs, job_types_of
from hetsched.runtime.state import RUNTIME_SETTINGS
from hetsched.sim.simulator import SimulationConfig, simulate


def jcts(system: str, jobs, round_s: float, speed: float, lease_start_s: float):
    policy, cluster = SYSTEMS[system]
    table = emulated_throughputs(job_types_of(jobs), {g: s / speed for g, s in DEFAULT_SLOWDOWNS.items()})
    kind = "planner" if system == "shockwave" else "allocation"
    res = simulate(jobs, ClusterSpec.load(cluster), policy, table, SimulationConfig(), round_s=round_s,
                   **RUNTIME_SETTINGS[kind], fixed_rounds=True, lease_start_s=lease_start_s,
                   over_deadline=system != "shockwave")
    return res.jobs_frame().set_index("job_id")["jct_s"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--round", type=float, default=60.0)
    p.add_argument("--jobs", type=int, default=40)
    p.add_argument("--lease-start", type=float, default=0.2, help="seconds (what the runtime measures)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    for system in ("gavel", "shockwave"):
        jobs = trace(system, args.jobs, args.round, args.round / 2, args.seed)
        base = jcts(system, jobs, args.round, 1.0, args.lease_start)
        for speed in (1.01, 0.99):
            other = jcts(system, jobs, args.round, speed, args.lease_start)
            ratio = other / base
            print(json.dumps({"system": system, "speed": speed,
                              "avg_jct_change": round(float(other.mean() / base.mean() - 1), 4),
                              "p90_abs_ratio_minus_1": round(float(np.percentile((ratio - 1).abs(), 90)), 4),
                              "max_ratio": round(float(ratio.max()), 3)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
