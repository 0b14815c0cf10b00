"""The same trace on the local runtime (emulated workers, one process per GPU) and in the simulator, at a
realistic round length; prints per-job JCT ratios and the headline gaps as one JSON line.

    python benchmarks/runtime_vs_sim.py --policy max_min_fairness_perf --round 60 --jobs 40

Emulated jobs run at EMULATED_STEPS_PER_S / slowdown of their GPU type, and the simulator gets exactly those
rates (`emulated_throughputs`) and the runtime's round rules (no reset gate), so every difference is the
runtime's: lease start latency, stops at lease ends, checkpoints lost at moves, heartbeat timing. The wall time
is about (jobs x mean rounds per job / GPUs) x round: 40 jobs at 60-s rounds take 30-45 minutes.
Goal (issue 25): average JCT and makespan within 5 %, per-job p90 |ratio - 1| within 15 %.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from hetsched import ClusterSpec, load_throughputs
from hetsched.runtime.replay import emulated_throughputs, run_on_local_cluster
from hetsched.runtime.worker import EMULATED_STEPS_PER_S
from hetsched.sim.simulator import simulate
from hetsched.traces import GavelGenerator


def trace(num_jobs: int, round_s: float, gap_s: float, seed: int):
    """Gavel's job types; each job needs 1-6 rounds on the fastest type; arrivals `gap_s` apart."""
    rng = np.random.default_rng(seed)
    base = GavelGenerator(seed=seed, static=True, throughputs=load_throughputs()).jobs(num_jobs)
    per_round = EMULATED_STEPS_PER_S * round_s
    return [j.with_(scale_factor=1, total_steps=float(int(rng.uniform(1.0, 6.0) * per_round)),
                    arrival_time_s=float(i * gap_s)) for i, j in enumerate(base)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--policy", default="max_min_fairness_perf")
    p.add_argument("--cluster", default="2:1:1")
    p.add_argument("--round", type=float, default=60.0, help="round length in seconds (wall and simulated)")
    p.add_argument("--jobs", type=int, default=40)
    p.add_argument("--gap", type=float, default=None, help="seconds between arrivals (default: round / 2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="outputs/runtime_vs_sim", help="per-job CSV goes here")
    args = p.parse_args(argv)
    gap = args.round / 2 if args.gap is None else args.gap
    jobs = trace(args.jobs, args.round, gap, args.seed)
    table = emulated_throughputs([j.job_type for j in jobs])
    sim = simulate(jobs, ClusterSpec.parse(args.cluster), args.policy, table, round_s=args.round,
                   min_reset_interval_s=0.0).jobs_frame().set_index("job_id")
    start = time.time()
    with tempfile.TemporaryDirectory() as state:
        real = run_on_local_cluster(jobs, args.cluster, state, policy=args.policy, round_s=args.round,
                                    timeout_s=24 * 3600).set_index("job_id")
    wall = time.time() - start
    both = real.join(sim[["jct_s", "arrival_time_s"]].rename(columns={"jct_s": "sim_jct_s"}), how="inner")
    both["ratio"] = both["jct_s"] / both["sim_jct_s"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    both.to_csv(out / f"{args.policy}_round{args.round:g}.csv")
    run_span = float((both["arrival_time_s"] + both["jct_s"]).max())
    sim_span = float((both["arrival_time_s"] + both["sim_jct_s"]).max())
    print(json.dumps({
        "policy": args.policy, "cluster": args.cluster, "round_s": args.round, "jobs": len(jobs),
        "completed_on_runtime": len(real), "wall_s": round(wall, 1),
        "avg_jct_runtime_s": round(float(both["jct_s"].mean()), 1),
        "avg_jct_sim_s": round(float(both["sim_jct_s"].mean()), 1),
        "avg_jct_gap": round(float(both["jct_s"].mean() / both["sim_jct_s"].mean() - 1), 4),
        "makespan_gap": round(run_span / sim_span - 1, 4),
        "p90_abs_ratio_minus_1": round(float(np.percentile((both["ratio"] - 1).abs(), 90)), 4)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
