"""Build a `PolicyView` from jobs, a cluster spec and a throughput table."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from hetsched.model.cluster import ClusterSpec
from hetsched.model.jobs import Job
from hetsched.model.throughputs import JobKey, ThroughputTable
from hetsched.decide.gavel.base import PolicyView


def sorted_gpu_types(cluster: ClusterSpec) -> tuple[str, ...]:
    """Policies see GPU types in sorted order (Gavel's matrix column order: k80, p100, v100)."""
    return tuple(sorted(t for t, n in zip(cluster.gpu_types, cluster.counts) if n > 0))


def view_from_jobs(jobs: Sequence[Job], cluster: ClusterSpec, table: ThroughputTable, *, now: float = 0.0,
                   remaining_steps: Sequence[float] | None = None, packing: bool = True) -> PolicyView:
    """A snapshot of `jobs` at time `now` (remaining steps default to each job's total)."""
    gpu_types = sorted_gpu_types(cluster)
    keys = [JobKey(j.job_type, j.scale_factor) for j in jobs]
    tput = np.nan_to_num(table.matrix(keys, gpu_types)) if jobs else np.zeros((0, len(gpu_types)))
    spread = table.matrix(keys, gpu_types, consolidated=False) if jobs else tput
    spread = np.where(np.isnan(spread), tput, spread)           # unmeasured spread placement: as consolidated
    distinct = list(dict.fromkeys(keys))
    code = {k: i for i, k in enumerate(distinct)}
    colocated = None
    if packing and distinct:
        rows = np.array([table.index(k) for k in distinct])
        cols = np.array([table.gpu_index(g) for g in gpu_types])
        colocated = table.colocated[np.ix_(rows, rows, cols)][:, :, :, 0, :]
    deadlines = np.array([np.nan if j.deadline_s is None else j.deadline_s for j in jobs])
    return PolicyView(
        job_ids=np.array([j.job_id for j in jobs], dtype=np.int64),
        gpu_types=gpu_types,
        capacity=np.array([cluster.count(g) for g in gpu_types], float),
        throughput=tput,
        unconsolidated=spread,
        scale_factor=np.array([j.scale_factor for j in jobs], dtype=np.int64),
        priority_weight=np.array([j.priority_weight for j in jobs], float),
        remaining_steps=np.array(remaining_steps if remaining_steps is not None else
                                 [j.total_steps for j in jobs], float),
        time_since_arrival=np.array([max(0.0, now - j.arrival_time_s) for j in jobs], float),
        type_code=np.array([code[k] for k in keys], dtype=np.int64),
        colocated=colocated,
        prices=np.array([cluster.price(g) for g in gpu_types], float),
        deadline_s=deadlines,
        now=now,
    )
