"""Finish-time fairness of an elastic run (docs/rules.md#elastic-ftf): each job's JCT over the time it would take
alone on its fair share of each GPU type, weighted by that type's share of the cluster (the Sia draft's Eq. 3).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from hetsched.decide.elastic.cluster import ElasticCluster, place
from hetsched.decide.elastic.jobs import RIGID, ElasticJob


def mean_contention(result, submit_s: float, completion_s: float) -> float:
    """Jobs arrived and unfinished, averaged over the decisions in the job's lifetime (at least 1: itself)."""
    times = (np.arange(len(result.contention)) + 1) * result.round_s          # decision k at (k + 1) rounds
    inside = (times >= submit_s) & (times <= completion_s)
    return max(float(result.contention[inside].mean()) if inside.any() else 1.0, 1.0)


def isolated_s(job: ElasticJob, gpu_type: str, share: float, cluster: ElasticCluster) -> float:
    """Seconds `job` (not yet run) takes alone on `share` GPUs of `gpu_type`: on k GPUs (its own count if rigid,
    else the whole GPUs of its share, at least one, at most the type's) from its first start, restore included,
    its batch chosen as it learns; a share that is not k whole GPUs time-shares them (x k / share)."""
    whole = job.target_replicas if job.category == RIGID else max(1, math.floor(share))
    k = min(whole, cluster.gpus(gpu_type))
    alloc = place(cluster, {}, {job.name: (gpu_type, k)})[job.name]
    job.reallocate(alloc)
    job.step(float("inf"), 0.0)
    return float(job.completion_s) * k / share


def finish_time_fairness(result, jobs: list[ElasticJob], cluster: ElasticCluster) -> pd.DataFrame:
    """Per finished job: its JCT, mean contention and rho = sum over GPU types g it can run on of
    P(g) x JCT / T_g, where P(g) is g's share of those types' GPUs and T_g its time alone on its fair share of g
    (the type's GPUs / mean contention). Of `jobs` (the run's) only what defines each job is read."""
    by_name = {j.name: j for j in jobs}
    rows = []
    for rec in result.jobs.itertuples(index=False):
        job = by_name[rec.name]
        types = [t for t in cluster.types if t in job.app.types]
        total = sum(cluster.gpus(t) for t in types)
        contention = mean_contention(result, rec.submit_s, rec.completion_s)
        rho = 0.0
        for gpu_type in types:
            alone = ElasticJob(job.name, job.app, 0.0, job.target_replicas, job.target_batch, job.category,
                               job.unaware)
            t_alone = isolated_s(alone, gpu_type, cluster.gpus(gpu_type) / contention, cluster)
            rho += cluster.gpus(gpu_type) / total * rec.jct_s / t_alone
        rows.append((rec.name, rec.jct_s, contention, rho))
    return pd.DataFrame(rows, columns=["name", "jct_s", "contention", "rho"])


def summary(rho: pd.Series) -> dict[str, float]:
    """The draft's Fig. 8 numbers: the worst rho and the fraction of jobs with rho > 1."""
    return {"ftf_worst": float(rho.max()), "ftf_unfair": float((rho > 1.0).mean())}
