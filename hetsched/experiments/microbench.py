"""Experiments without the simulator: hierarchical shares over time (Fig. 11) and policy runtimes (Fig. 12)."""

from __future__ import annotations

import random
import time

import numpy as np
import pandas as pd

from hetsched.model.cluster import ClusterSpec
from hetsched.core.registry import make_policy
from hetsched.decide.gavel import view_from_jobs
from hetsched.decide.gavel.shares import proportional_throughput
from hetsched.model.throughputs import ThroughputTable
from hetsched.traces import GavelGenerator


def fig11_jobs(table: ThroughputTable, num_jobs: int = 18, steps_per_job: int = 4, seed: int = 0,
               jobs_per_entity: int = 6) -> list:
    """Fig. 11's stream as a trace: job i arrives at timestep i x `steps_per_job`, belongs to entity
    `e{i // jobs_per_entity}` and has weight (i mod 2) + 1; single-GPU job types drawn by a seeded RNG."""
    rng = random.Random(seed)
    types = sorted({k.job_type for k in table.keys if k.scale_factor == 1})
    base = GavelGenerator(seed=seed, static=True, throughputs=table).jobs(num_jobs)
    return [j.with_(job_type=rng.choice(types), priority_weight=float(i % 2 + 1),
                    arrival_time_s=float(i * steps_per_job), entity=f"e{i // jobs_per_entity}")
            for i, j in enumerate(base)]


def hierarchical_timeline(table: ThroughputTable, jobs=None, entity_weights=None, cluster: str = "3:3:3",
                          timesteps: int | None = None, policy: str = "max_min_fairness_water_filling_perf",
                          entity_policy: str = "fairness") -> pd.DataFrame:
    """Fig. 11 from a trace: at each timestep t (1, 2, ...) the jobs that arrived by t - 1 (jobs never finish)
    are allocated by a hierarchical policy through the core, which gives the policy each job's entity and the
    entities' weights (`{name: weight}`; unlisted entities weigh 1). Default: the paper's stream (`fig11_jobs`)
    with weights 1:2:3. Returns per (timestep, job) normalised effective throughput and its share."""
    from hetsched.core.scheduler import Scheduler

    jobs = sorted(jobs if jobs is not None else fig11_jobs(table), key=lambda j: (j.arrival_time_s, j.job_id))
    if entity_weights is None:
        entity_weights = {"e0": 1.0, "e1": 2.0, "e2": 3.0}
    if timesteps is None:
        timesteps = int(max(j.arrival_time_s for j in jobs)) + 4
    pol = make_policy(policy, entity_policy=entity_policy)
    core = Scheduler(ClusterSpec.load(cluster), pol, table, entity_weights=entity_weights)
    rows, pending = [], list(jobs)
    for step in range(timesteps):
        while pending and pending[0].arrival_time_s <= step:
            core.add_job(pending.pop(0))
        if not core.jobs:
            continue
        view = core.view(float(step))
        alloc = pol.allocate(view)
        eff = alloc.effective_throughput(view) / proportional_throughput(view)
        for job_id, value in zip(view.job_ids.tolist(), eff):
            rows.append({"timestep": step + 1, "job_id": job_id, "entity": core.jobs[job_id].entity,
                         "normalized_throughput": float(value), "policy": policy})
    frame = pd.DataFrame(rows)
    per_step = frame.groupby("timestep")["normalized_throughput"].transform("sum")
    frame["share"] = frame["normalized_throughput"] / per_step
    return frame


def policy_runtimes(table: ThroughputTable, policies: list[str], sizes: list[int], trials: int = 3,
                    seed: int = 0) -> pd.DataFrame:
    """Fig. 12: CPU seconds of one allocation for N single-GPU jobs on N/4 GPUs per type (median of trials)."""
    rows = []
    for n in sizes:
        jobs = GavelGenerator(seed=seed, mean_interarrival_s=1000, throughputs=table).jobs(n)
        per_type = max(1, n // 4)
        view = view_from_jobs(jobs, ClusterSpec.parse(f"{per_type}:{per_type}:{per_type}"), table)
        for policy in policies:
            make_policy(policy).allocate(view)                   # warm-up (first-call costs)
            times = []
            for _ in range(trials):
                p = make_policy(policy)
                start = time.process_time()
                p.allocate(view)
                times.append(time.process_time() - start)
            rows.append({"policy": policy, "num_jobs": n, "seconds": float(np.median(times))})
    return pd.DataFrame(rows)
