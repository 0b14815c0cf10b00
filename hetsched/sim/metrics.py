"""Metrics of a `Result`: JCT statistics, makespan, utilization, finish-time fairness, cost, SLOs."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hetsched.sim.result import Result


def window_jcts(result: Result) -> np.ndarray:
    """JCTs (s) of the finished jobs in the measurement window, in id order."""
    jct = [result.jobs[j].jct_s for j in result.window_ids()]
    jct = np.array(jct, float)
    return jct[np.isfinite(jct)]


def average_jct(result: Result) -> float:
    jct = window_jcts(result)
    return float(jct.mean()) if len(jct) else float("nan")


def jct_percentiles(result: Result, percentiles=(50, 90, 99)) -> dict[int, float]:
    jct = window_jcts(result)
    if not len(jct):
        return {p: float("nan") for p in percentiles}
    return {p: float(np.percentile(jct, p)) for p in percentiles}


def jct_cdf(result: Result) -> pd.DataFrame:
    """Empirical CDF of window JCTs: columns jct_s, cdf."""
    jct = np.sort(window_jcts(result))
    return pd.DataFrame({"jct_s": jct, "cdf": np.arange(1, len(jct) + 1) / max(len(jct), 1)})


def finish_time_fairness(result: Result, isolated: Result) -> pd.Series:
    """rho per window job: its JCT here over its JCT under the `isolated` policy on the same stream."""
    ids = [j for j in result.window_ids() if j in isolated.jobs]
    rho = {j: result.jobs[j].jct_s / isolated.jobs[j].jct_s for j in ids}
    return pd.Series(rho, name="rho").dropna()


def unfair_fraction(rho: pd.Series, threshold: float = 1.0) -> float:
    """Share of jobs whose rho exceeds `threshold`."""
    return float((rho > threshold).mean()) if len(rho) else float("nan")


def static_rho(result: Result) -> pd.Series:
    """Shockwave's finish-time fairness (docs/rules.md#rho): rho_j = JCT_j / (T_iso_j max(1, N / G)),
    T_iso the isolated duration after adaptation, N the jobs of the run, G its GPUs; rounded to 5 decimals."""
    ids = result.window_ids()
    contention = max(1.0, len(ids) / max(result.num_gpus, 1))
    rho = {j: result.jobs[j].jct_s / (result.jobs[j].isolated_s * contention) for j in ids}
    return pd.Series(rho, name="rho", dtype=float).round(5).dropna()


def total_cost(result: Result) -> float:
    return float(sum(r.cost for r in result.jobs.values()))


def slo_violations(result: Result) -> int:
    """Window jobs with a deadline that finished after it (or did not finish)."""
    count = 0
    for j in result.window_ids():
        r = result.jobs[j]
        if r.deadline_s is not None and not (r.finish_time_s <= r.deadline_s):
            count += 1
    return count


def summary(result: Result) -> dict:
    """The headline numbers of a run, as plain floats (JSON-ready)."""
    pct = jct_percentiles(result, (50, 99))
    return {"policy": result.policy, "avg_jct_s": average_jct(result), "makespan_s": float(result.makespan_s),
            "utilization": float(result.utilization), "num_jobs": len(window_jcts(result)),
            "jct_p50_s": pct[50], "jct_p99_s": pct[99], "total_cost": total_cost(result),
            "slo_violations": slo_violations(result), "num_rounds": result.num_rounds,
            "num_recomputes": result.num_recomputes, **(result.resource_stats or {}), **_fairness(result)}


def _fairness(result: Result) -> dict:
    """Shockwave's fairness numbers, for runs that know each job's isolated duration."""
    if result.adaptations is None:
        return {}
    rho = static_rho(result)
    return {"worst_ftf_rho": float(rho.max()) if len(rho) else float("nan"),
            "unfair_fraction": unfair_fraction(rho, 1.05), "unfair_fraction_1_1": unfair_fraction(rho, 1.1),
            "batch_size_switches": int(len(result.adaptations))}


def with_hours(row: dict) -> dict:
    """Every `*_s` duration of a summary row gets an `*_h` twin beside it (CPU times stay seconds only)."""
    out = {}
    for key, value in row.items():
        out[key] = value
        if key.endswith("_s") and not key.endswith("cpu_s") and isinstance(value, (int, float)):
            out[key[:-2] + "_h"] = value / 3600.0
    return out
