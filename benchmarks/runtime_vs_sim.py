"""The same trace on the local runtime (emulated workers, one process per GPU) and in the simulator, at a
realistic round length; prints per-job JCT ratios and the headline gaps as one JSON line.

    python benchmarks/runtime_vs_sim.py --system gavel --round 60 --jobs 40
    python benchmarks/runtime_vs_sim.py --system shockwave --round 60 --jobs 40
    python benchmarks/runtime_vs_sim.py --system synergy --round 60 --jobs 40

- gavel: LAS-perf (`max_min_fairness_perf`) on three GPU types; emulated jobs run at EMULATED_STEPS_PER_S /
  slowdown of their type, and the simulator gets exactly those rates (`emulated_throughputs`).
- shockwave: the planner on one GPU type with Accordion and GNS jobs that switch batch sizes on both sides
  (docs/rules.md#runtime-batch-sizes); no preemption penalty in the simulator: the runtime's restart cost is
  measured and printed beside the penalty Shockwave's rules model (20 s).
- synergy: FIFO+tune on emulated servers with CPU cores and memory; an emulated profiled job runs at its
  profile's throughput at its share, one wall second standing for EMULATED_TIME_SCALE seconds of training, so the
  simulator runs at EMULATED_TIME_SCALE x the round and its JCTs are divided by it.
Both sides use the runtime's round rules (no reset gate, one plan per round), so every difference is the
runtime's: lease start latency, stops at lease ends, checkpoints lost at moves, heartbeat timing. The
"fixed_rounds" gaps compare with the simulator on the runtime's wall-clock round grid (docs/rules.md#fixed-rounds),
the "calibrated" ones also with the run's measured lease start (docs/rules.md#lease-start): what
`hetsched simulate --calibration` does with the file `hetsched calibrate` writes. Wall time is
about (jobs x mean rounds per job / GPUs) x round: 40 jobs at 60-s rounds take 45-90 minutes.
Goal (issue 25): average JCT and makespan within 5 %, per-job p90 |ratio - 1| within 15 %.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from hetsched import ClusterSpec, Job, load_throughputs
from hetsched.core.run_config import SimulationConfig
from hetsched.rates.adaptation.schedules import iterations_per_epoch
from hetsched.runtime.replay import emulated_throughputs, job_types_of, run_on_local_cluster
from hetsched.runtime.worker import EMULATED_STEPS_PER_S, EMULATED_TIME_SCALE
from hetsched.sim.simulator import simulate
from hetsched.traces import GavelGenerator

SYSTEMS = {"gavel": ("max_min_fairness_perf", "2:1:1"), "shockwave": ("shockwave", "4:0:0"),
           "synergy": ("FIFO+tune", "1x4/24/500@v100")}
ADAPTIVE = (("ResNet-18 (batch size 64)", "gns"), ("Recommendation (batch size 512)", "accordion"),
            ("ResNet-18 (batch size 32)", "accordion"), ("LM (batch size 20)", "static"),
            ("ResNet-50 (batch size 64)", "static"))
SYNERGY_MODELS = ("res18", "res50", "alexnet", "mobilenet", "shufflenet", "transformer", "deepspeech")


def trace(system: str, num_jobs: int, round_s: float, gap_s: float, seed: int) -> list[Job]:
    """Each job needs 1-6 rounds of work on the fastest GPU; arrivals `gap_s` apart."""
    rng = np.random.default_rng(seed)
    rounds = rng.uniform(1.0, 6.0, num_jobs)
    if system == "synergy":
        from hetsched.resources.profiles import load_sensitivity
        profiles = load_sensitivity(3)
        return [Job(i, i * gap_s, m, 1, float(int(r * round_s * EMULATED_TIME_SCALE / profiles[m].iteration_time_s)),
                    command="emulated")
                for i, (m, r) in enumerate(zip(rng.choice(SYNERGY_MODELS, num_jobs), rounds))]
    per_round = EMULATED_STEPS_PER_S * round_s
    if system == "shockwave":
        out = []
        for i, r in enumerate(rounds):
            job_type, mode = ADAPTIVE[i % len(ADAPTIVE)]
            model, bs = job_type.split(" (batch size ")
            epoch = iterations_per_epoch(model, int(bs[:-1]))
            out.append(Job(i, i * gap_s, job_type, 1, float(max(1, int(r * per_round / epoch)) * epoch), mode=mode))
        return out
    base = GavelGenerator(seed=seed, static=True, throughputs=load_throughputs()).jobs(num_jobs)
    return [j.with_(scale_factor=1, total_steps=float(int(r * per_round)), arrival_time_s=float(i * gap_s))
            for i, (j, r) in enumerate(zip(base, rounds))]


def simulated(system: str, jobs: list[Job], cluster: str, policy: str, round_s: float, lease_start_s: float = 0.0,
              fixed_rounds: bool = False, origin_s: float = 0.0):
    """Per-job JCTs (wall seconds) the simulator predicts under the runtime's round rules; calibrated with the
    runtime's measured lease start (docs/rules.md#lease-start) and its wall-clock rounds from `origin_s`
    (docs/rules.md#fixed-rounds), all in wall seconds."""
    if system == "synergy":
        scale = EMULATED_TIME_SCALE
        scaled = [j.with_(arrival_time_s=j.arrival_time_s * scale) for j in jobs]
        res = simulate(scaled, ClusterSpec.load(cluster), policy, round_s=round_s * scale, macro_rounds=False,
                       lease_start_s=lease_start_s * scale, fixed_rounds=fixed_rounds,
                       round_origin_s=origin_s * scale % (round_s * scale) if fixed_rounds else 0.0)
        return res.jobs_frame().set_index("job_id")["jct_s"] / scale
    res = simulate(jobs, ClusterSpec.parse(cluster), policy, emulated_throughputs(job_types_of(jobs)),
                   round_s=round_s, min_reset_interval_s=0.0, dynamic_adaptation=system == "shockwave",
                   lease_start_s=lease_start_s, fixed_rounds=fixed_rounds,
                   round_origin_s=origin_s % round_s if fixed_rounds else 0.0)
    return res.jobs_frame().set_index("job_id")["jct_s"]


def gaps(real, sim, jobs: list[Job]) -> dict:
    """Average-JCT and makespan gaps and per-job p90 |ratio - 1| of the runtime against one simulation."""
    both = real.set_index("job_id").join(sim.rename("sim_jct_s"), how="inner")
    ratio = both["jct_s"] / both["sim_jct_s"]
    arrival = np.array([jobs[j].arrival_time_s for j in both.index])
    run_span, sim_span = (arrival + both["jct_s"]).max(), (arrival + both["sim_jct_s"]).max()
    return {"avg_jct_sim_s": round(float(both["sim_jct_s"].mean()), 1),
            "avg_jct_gap": round(float(both["jct_s"].mean() / both["sim_jct_s"].mean() - 1), 4),
            "makespan_gap": round(float(run_span / sim_span - 1), 4),
            "p90_abs_ratio_minus_1": round(float(np.percentile((ratio - 1).abs(), 90)), 4)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--system", choices=sorted(SYSTEMS), default="gavel")
    p.add_argument("--policy", default=None, help="default: the system's (gavel: max_min_fairness_perf)")
    p.add_argument("--cluster", default=None, help="default: the system's (gavel 2:1:1, shockwave 4:0:0, "
                                                   "synergy 1x4/24/500@v100)")
    p.add_argument("--round", type=float, default=60.0, help="round length in seconds (wall and simulated)")
    p.add_argument("--jobs", type=int, default=40)
    p.add_argument("--gap", type=float, default=None, help="seconds between arrivals (default: round / 2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="outputs/runtime_vs_sim", help="per-job CSV goes here")
    args = p.parse_args(argv)
    policy = args.policy or SYSTEMS[args.system][0]
    cluster = args.cluster or SYSTEMS[args.system][1]
    gap = args.round / 2 if args.gap is None else args.gap
    jobs = trace(args.system, args.jobs, args.round, gap, args.seed)
    sim = simulated(args.system, jobs, cluster, policy, args.round)
    start = time.time()
    with tempfile.TemporaryDirectory() as state:
        real = run_on_local_cluster(jobs, cluster, state, policy=policy, round_s=args.round,
                                    timeout_s=24 * 3600)
    wall = time.time() - start
    info = real.attrs["info"]
    origin = info["round_origin_s"]
    fixed = simulated(args.system, jobs, cluster, policy, args.round, 0.0, True, origin)
    calibrated = simulated(args.system, jobs, cluster, policy, args.round, info["mean_lease_start_s"], True, origin)
    both = real.set_index("job_id").join(sim.rename("sim_jct_s")).join(calibrated.rename("calibrated_jct_s"))
    both["ratio"] = both["jct_s"] / both["sim_jct_s"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    both.to_csv(out / f"{args.system}_{policy}_round{args.round:g}.csv")
    print(json.dumps({
        "system": args.system, "policy": policy, "cluster": cluster, "round_s": args.round, "jobs": len(jobs),
        "completed_on_runtime": len(real), "wall_s": round(wall, 1),
        "avg_jct_runtime_s": round(float(real["jct_s"].mean()), 1), **gaps(real, sim, jobs),
        "lease_start_s": round(info["mean_lease_start_s"], 3), "lease_starts": info["lease_starts"],
        "fixed_rounds": gaps(real, fixed, jobs), "calibrated": gaps(real, calibrated, jobs),
        "batch_size_switches": info["batch_size_switches"], "restarts": info["restarts"],
        "mean_restart_s": round(info["mean_restart_s"], 3),
        "modelled_preemption_penalty_s": SimulationConfig.for_system("shockwave").preemption_penalty_s}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
