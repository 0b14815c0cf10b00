"""The elastic systems in the one-stream comparison (docs/rules.md#compare): Sia, Pollux and Gavel+TJ run on the
`sia` stream, the first jobs of one of Sia's Helios workloads per seed on its 64-GPU cluster. The round-based
core's policies schedule rigid jobs from throughput tables and the elastic ones need measured step times per
placement, so each side refuses the other's stream, with the reason and what runs instead."""

from __future__ import annotations

import math

from hetsched.decide.elastic.names import ELASTIC_POLICIES

ELASTIC = tuple(ELASTIC_POLICIES)
STREAM = "sia"
DESCRIPTION = "Sia's Helios workloads (elastic jobs)"
#: The comparison's metrics that elastic jobs do not define (no FTF baseline, CPU, memory or prices): NaN there.
NOT_DEFINED = ("worst_rho", "unfair_fraction", "cpu_util", "mem_util", "cost_usd", "num_rounds", "waited_fraction")


def is_elastic(policy: str) -> bool:
    return policy.strip().lower() in ELASTIC


def refusal(stream: str, policy: str) -> str:
    """Why `policy` does not run on `stream` ("" when it does)."""
    if is_elastic(policy) and stream != STREAM:
        return (f"{policy} runs Sia's applications, whose step times are measured per placement and batch size; "
                f"the '{stream}' stream's jobs have only throughput-table rates. Runs instead: {policy} on the "
                f"'{STREAM}' stream.")
    if not is_elastic(policy) and stream == STREAM:
        return (f"{policy} schedules rigid jobs on the round-based core; the '{STREAM}' stream's jobs are elastic "
                f"(GPU type, count and batch size chosen every round). Runs instead: {', '.join(ELASTIC)} on "
                f"this stream.")
    return ""


def run(case, preset) -> dict:
    """One elastic case: workload helios-(seed mod 10 + 1), its first `preset.sia_jobs` jobs; the comparison's
    metrics (FTF, CPU, memory and cost have no counterpart for these jobs: NaN)."""
    from hetsched.decide.elastic.cluster import ElasticCluster
    from hetsched.experiments.elastic import ElasticRun, run_one

    out = run_one(ElasticRun(case.policy.strip().lower(), f"helios-{case.seed % 10 + 1}", "sia_hetero",
                             preset.sia_jobs, case.seed))
    gpus = ElasticCluster.parse("sia_hetero").total_gpus
    used = out["gpu_h_per_job"] * out["jobs"] / (gpus * out["makespan_h"]) if out["makespan_h"] > 0 else 0.0
    return {"num_jobs": out["jobs"], "finished": out["jobs"], "avg_jct_h": out["avg_jct_h"],
            "p99_jct_h": out["p99_jct_h"], "makespan_h": out["makespan_h"], "gpu_util": used, "cpu_s": out["cpu_s"],
            **dict.fromkeys(NOT_DEFINED, math.nan)}
