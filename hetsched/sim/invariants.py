"""Invariants any faithful run satisfies, whatever an artifact printed (docs/rules.md#invariants).

`violations(result, cluster, table)` checks a run that recorded its timeline and returns one line per broken
invariant (an empty list when all hold):

1. **capacity**: in no round do the combinations placed on a GPU type use more GPUs than the cluster has;
2. **work conserved**: each job's credited steps sum to the steps its record says it did, and a completed job did
   all of its steps (unless its batch size, and with it its step count, adapted);
3. **rates**: no job ran faster than its isolated rate on the GPU type it ran on (steps <= rate x seconds);
4. **alone**: no job finished sooner after its arrival than it would alone on its fastest GPU type present;
5. **fluid bound**: the last finish is no earlier than the first arrival plus the GPU-seconds all jobs need at
   their best rates spread over every GPU;
6. **pins**: a job pinned to GPU types runs on no other, alone or beside a partner.

Rates come from the throughput table, so 3-5 apply to jobs whose (type, scale) the table has, and not to runs
whose rates depart from it (batch-size adaptation; CPU/memory shares above the fair one); 5 not to runs that
share GPUs (two jobs on one GPU each run slower but use it at once, which the GPU-time bound does not model).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hetsched.core.registry import place_of, policy_for
from hetsched.model.cluster import ClusterSpec
from hetsched.model.throughputs import JobKey, ThroughputTable

REL = 1e-9      # float slack: steps are credited as products of rates and seconds


def violations(result, cluster: ClusterSpec, table: ThroughputTable | None = None) -> list[str]:
    """The broken invariants of `result` on `cluster` (rates from `table`; without it, only 1 and 2)."""
    tl = result.timeline_frame()
    out = _capacity(tl, cluster) + _work(tl, result, adapted=result.adaptations is not None) + _pins(tl, result)
    # Rates above the table's: batch sizes adapted (Shockwave) or CPU/memory shares above the fair one (TUNE).
    cpu_memory = place_of(policy_for(result.policy, 0)).cpu_memory     # a bare ordering places greedily
    fixed_rates = result.adaptations is None and result.resource_stats is None and not cpu_memory
    space_sharing = bool((tl["partner_id"] >= 0).any())
    if table is not None and fixed_rates:
        best = best_rates(result, cluster, table)
        out += _rates(tl, result, table)
        out += _alone(result, best)
        if not space_sharing:
            out += _fluid(result, cluster, best)
    return out


def _capacity(tl: pd.DataFrame, cluster: ClusterSpec) -> list[str]:
    lead = tl[(tl["partner_id"] < 0) | (tl["job_id"] < tl["partner_id"])]      # a pair's GPUs count once
    used = lead.groupby(["round", "gpu_type"])["num_gpus"].sum()
    cap = cluster.as_dict()
    have = np.array([cap.get(g, 0) for g in used.index.get_level_values("gpu_type")])
    over = used[used.to_numpy() > have]
    return [f"capacity: round {r} uses {n} {g} GPUs of {cap.get(g, 0)}" for (r, g), n in over.head(5).items()]


def _pins(tl: pd.DataFrame, result) -> list[str]:
    allowed = {j: set(r.pinned_gpu_types.split("|")) for j, r in result.jobs.items() if r.pinned_gpu_types}
    out = []
    for job_id, gpu_type, r in zip(tl["job_id"], tl["gpu_type"], tl["round"]):
        if job_id in allowed and gpu_type not in allowed[job_id]:
            out.append(f"pins: job {job_id} ran on {gpu_type} in round {r}, pinned to {sorted(allowed[job_id])}")
            if len(out) == 10:
                break
    return out


def _work(tl: pd.DataFrame, result, adapted: bool) -> list[str]:
    """Credited steps add up; a completed job did all its steps (after a batch-size change a job's step count
    changes with it, so adapted runs check the sums only)."""
    out = []
    credited = tl.groupby("job_id")["steps"].sum()
    for job_id, rec in result.jobs.items():
        steps = float(credited.get(job_id, 0.0))
        if not np.isclose(steps, rec.steps_done, rtol=REL, atol=1e-6):
            out.append(f"work: job {job_id} was credited {steps:.6g} steps in its rounds but records "
                       f"{rec.steps_done:.6g}")
        if not adapted and np.isfinite(rec.finish_time_s) and rec.steps_done < rec.total_steps * (1 - REL) - 1e-6:
            out.append(f"work: job {job_id} finished after {rec.steps_done:.6g} of {rec.total_steps:.6g} steps")
    return out[:10]


def _rate(table: ThroughputTable, job_type: str, scale: int, gpu_type: str) -> float:
    """The job's fastest isolated rate on a type (consolidated or spread), NaN when the table lacks it."""
    key = JobKey(job_type, scale)
    if key not in table or gpu_type not in table.gpu_types:
        return float("nan")
    rates = table.isolated[table.index(key), table.gpu_index(gpu_type)]
    return float(np.nanmax(rates)) if np.isfinite(rates).any() else float("nan")


def _rates(tl: pd.DataFrame, result, table: ThroughputTable) -> list[str]:
    alone = tl[tl["partner_id"] < 0]
    kinds = {j: (r.job_type, r.scale_factor) for j, r in result.jobs.items()}
    cache: dict[tuple, float] = {}
    out = []
    for job_id, gpu_type, steps, seconds in zip(alone["job_id"], alone["gpu_type"], alone["steps"],
                                                alone["end_s"] - alone["start_s"]):
        key = (*kinds[job_id], gpu_type)
        rate = cache.get(key)
        if rate is None:
            rate = cache[key] = _rate(table, *key)
        if np.isfinite(rate) and steps > rate * seconds * (1 + REL) + 1e-6:
            out.append(f"rates: job {job_id} did {steps:.6g} steps in {seconds:.6g} s on {gpu_type} "
                       f"(at most {rate * seconds:.6g} at its isolated rate)")
            if len(out) == 10:
                break
    return out


def best_rates(result, cluster: ClusterSpec, table: ThroughputTable) -> dict[int, float]:
    """Each job's fastest isolated rate over the GPU types the cluster has (jobs the table knows)."""
    present = [g for g, n in cluster.as_dict().items() if n > 0]
    best = {}
    for job_id, rec in result.jobs.items():
        rates = [_rate(table, rec.job_type, rec.scale_factor, g) for g in present]
        rates = [r for r in rates if np.isfinite(r) and r > 0]
        if rates:
            best[job_id] = max(rates)
    return best


def _alone(result, best: dict[int, float]) -> list[str]:
    out = []
    for job_id, rate in best.items():
        rec = result.jobs[job_id]
        alone_s = rec.total_steps / rate
        if np.isfinite(rec.finish_time_s) and rec.jct_s < alone_s * (1 - REL) - 1e-6:
            out.append(f"alone: job {job_id} took {rec.jct_s:.6g} s, less than {alone_s:.6g} s alone on its "
                       f"fastest GPU type")
    return out[:10]


def _fluid(result, cluster: ClusterSpec, best: dict[int, float]) -> list[str]:
    done = [j for j, r in result.jobs.items() if np.isfinite(r.finish_time_s)]
    if not done or any(j not in best for j in done):
        return []
    recs = [result.jobs[j] for j in done]
    need = sum(r.scale_factor * r.total_steps / best[r.job_id] for r in recs)
    bound = min(r.arrival_time_s for r in recs) + need / cluster.num_gpus
    last = max(r.finish_time_s for r in recs)
    if last < bound * (1 - REL) - 1e-6:
        return [f"fluid bound: the last job finished at {last:.6g} s, before the fluid lower bound {bound:.6g} s"]
    return []
