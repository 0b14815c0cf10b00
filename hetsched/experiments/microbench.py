"""Experiments without the simulator: hierarchical shares over time (Fig. 11) and policy runtimes (Fig. 12)."""

from __future__ import annotations

import random
import time
from dataclasses import replace

import numpy as np
import pandas as pd

from ..cluster import ClusterSpec
from ..policies import make_policy, view_from_jobs
from ..policies.shares import proportional_throughput
from ..throughputs import ThroughputTable
from ..traces import GavelGenerator


def hierarchical_timeline(table: ThroughputTable, num_jobs: int = 18, steps_per_job: int = 4, seed: int = 0,
                          entity_weights=(1.0, 2.0, 3.0), jobs_per_entity: int = 6,
                          policy: str = "max_min_fairness_water_filling_perf", entity_policy: str = "fairness",
                          ) -> pd.DataFrame:
    """Fig. 11: 3 K80 + 3 P100 + 3 V100; a job arrives every `steps_per_job` timesteps; job i belongs to entity
    i // jobs_per_entity and has weight (i mod 2) + 1. Returns per (timestep, job) normalised throughput."""
    rng = random.Random(seed)
    types = sorted({k.job_type for k in table.keys if k.scale_factor == 1})
    base = GavelGenerator(seed=seed, static=True, throughputs=table).jobs(num_jobs)
    jobs = [j.with_(job_type=rng.choice(types), priority_weight=float(i % 2 + 1)) for i, j in enumerate(base)]
    cluster = ClusterSpec.parse("3:3:3")
    rows = []
    pol = make_policy(policy, entity_policy=entity_policy)
    for step in range(num_jobs * steps_per_job):
        active = jobs[: step // steps_per_job + 1]
        view = view_from_jobs(active, cluster, table)
        entity = np.arange(len(active)) // jobs_per_entity
        view = replace(view, entity=entity, entity_weight=np.asarray(entity_weights, float))
        alloc = pol.allocate(view)
        eff = alloc.effective_throughput(view) / proportional_throughput(view)
        for i, value in enumerate(eff):
            rows.append({"timestep": step + 1, "job_id": i, "entity": int(entity[i]),
                         "normalized_throughput": float(value), "policy": policy})
    frame = pd.DataFrame(rows)
    frame["share"] = frame["normalized_throughput"] / frame.groupby("timestep")["normalized_throughput"].transform("sum")
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
