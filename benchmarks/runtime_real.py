"""Real (CPU) training jobs on the local runtime under one policy of each system; prints one JSON line per policy:
jobs completed, wall time, restarts and their measured cost, batch-size switches and final batch sizes.

    python benchmarks/runtime_real.py                     # all three, about 5 minutes on 2 cores
    python benchmarks/runtime_real.py --systems shockwave

Each job runs `workloads/train.py` (tiny models, synthetic data) under leases: it checkpoints through the
scheduler, resumes elsewhere, and (Shockwave) switches batch size in place. The restart cost printed is the
runtime's measured one (launch, imports, checkpoint restore), beside the 20 s Shockwave's simulator charges.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

from hetsched import Job
from hetsched.core.run_config import SimulationConfig
from hetsched.rates.adaptation.schedules import iterations_per_epoch
from hetsched.runtime.launch import launch_local_cluster

RECOMMENDATION_EPOCH = iterations_per_epoch("Recommendation", 512)


def jobs_for(system: str) -> list[Job]:
    """Five jobs of 10-40 s of CPU training each on two GPUs: some wait, some are preempted and resume."""
    if system == "synergy":
        return [Job(i, 0.0, m, 1, s) for i, (m, s) in
                enumerate([("res18", 600), ("transformer", 900), ("res50", 300), ("mobilenet", 600),
                           ("shufflenet", 600)])]
    static = [Job(i, 0.0, t, 1, s) for i, (t, s) in
              enumerate([("ResNet-18 (batch size 32)", 1200), ("LM (batch size 20)", 1500),
                         ("Recommendation (batch size 512)", 6000), ("ResNet-50 (batch size 16)", 800)])]
    if system == "shockwave":        # Accordion: 30 critical epochs at 512, then the cap (8192)
        return [Job(4, 0.0, "Recommendation (batch size 512)", 1, 80 * RECOMMENDATION_EPOCH, mode="accordion"),
                *static]
    return static + [Job(4, 0.0, "Transformer (batch size 32)", 1, 1000)]


SETUPS = {"gavel": ("max_min_fairness_perf", "1:0:1", 5.0), "shockwave": ("shockwave", "2:0:0", 5.0),
          "synergy": ("FIFO+tune", "1x2/6/48@v100", 5.0)}


def run(system: str, timeout_s: float) -> dict:
    policy, cluster, round_s = SETUPS[system]
    jobs = jobs_for(system)
    start = time.time()
    with tempfile.TemporaryDirectory() as state, \
            launch_local_cluster(cluster, state, policy=policy, round_s=round_s) as local:
        local.submit(jobs)
        final = local.wait(timeout_s)
        info = local.info()
    return {"system": system, "policy": policy, "cluster": cluster, "round_s": round_s, "jobs": len(jobs),
            "completed": int((final["state"] == "completed").sum()),
            "all_steps_done": bool((final["steps_done"] == final["total_steps"]).all()),
            "wall_s": round(time.time() - start, 1), "restarts": info["restarts"],
            "mean_restart_s": round(info["mean_restart_s"], 2),
            "modelled_preemption_penalty_s": SimulationConfig.for_system("shockwave").preemption_penalty_s,
            "batch_size_switches": info["batch_size_switches"],
            "final_batch_sizes": dict(zip(final["job_id"].astype(str), final["batch_size"].astype(int)))}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--systems", nargs="+", choices=sorted(SETUPS), default=sorted(SETUPS))
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per policy")
    args = p.parse_args(argv)
    for system in args.systems:
        print(json.dumps(run(system, args.timeout)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
