"""Run the same job list on a local runtime cluster and in the simulator, for per-job comparisons."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from hetsched.model.cluster import ClusterSpec
from hetsched.model.jobs import Job
from hetsched.io.throughput_json import COLUMNS, normalise_frame
from hetsched.model.throughputs import ThroughputTable
from hetsched.rates.adaptation.schedules import job_type_of, reachable_batch_sizes

from .launch import DEFAULT_SLOWDOWNS, launch_local_cluster
from .worker import EMULATED_STEPS_PER_S

ROUND_POLL_S = 0.01      # how often a replay polls for the round that starts its arrival clock


def job_types_of(jobs: list[Job]) -> list[str]:
    """The jobs' types, and every type an adaptive one can switch to (its batch-size schedule)."""
    out = {j.job_type for j in jobs}
    for j in jobs:
        if j.mode.value != "static" and j.batch_size is not None:
            out |= {job_type_of(j.model, b) for b in reachable_batch_sizes(j.model, j.batch_size, j.mode.value)}
    return sorted(out)


def emulated_throughputs(job_types: list[str], slowdowns: dict[str, float] | None = None) -> ThroughputTable:
    """The throughputs that emulated workers run at (steps/s per GPU type, whatever the batch size), as a table
    for the simulator."""
    slowdowns = {**DEFAULT_SLOWDOWNS, **(slowdowns or {})}
    rows = [(gpu, "consolidated", t, 1, None, EMULATED_STEPS_PER_S / s, None)
            for gpu, s in slowdowns.items() for t in sorted(set(job_types))]
    return ThroughputTable.from_frame(normalise_frame(pd.DataFrame(rows, columns=list(COLUMNS))), "emulated")


def run_on_local_cluster(jobs: list[Job], cluster: ClusterSpec | str, state_dir: str | Path, *,
                         policy: str = "max_min_fairness_perf", round_s: float = 2.0, timeout_s: float = 600,
                         slowdowns: dict[str, float] | None = None, time_scale: float = 1.0) -> pd.DataFrame:
    """Replay `jobs` (arrival times honoured) on emulated workers; returns each completed job's id, JCT, final
    steps and batch size (0: not adaptive). `time_scale`: elastic policies' application seconds per second."""
    state_dir = Path(state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    table_path = state_dir / "emulated_throughputs.parquet"
    emulated_throughputs(job_types_of(jobs), slowdowns).write(table_path)
    with launch_local_cluster(cluster, state_dir, policy=policy, round_s=round_s, emulate=True,
                              slowdowns=slowdowns, throughputs=str(table_path), time_scale=time_scale) as local:
        start = _just_after_a_round(local, round_s)
        pending = sorted(jobs, key=lambda j: j.arrival_time_s)
        submitted: dict[int, float] = {}
        deadline = time.monotonic() + timeout_s
        while pending:
            due = [j for j in pending if j.arrival_time_s <= time.time() - start]
            for job in due:
                local.submit(job)
                submitted[job.job_id] = time.time()
                pending.remove(job)
            if time.monotonic() > deadline:
                raise TimeoutError("replay did not finish submitting")
            time.sleep(0.05)
        final = local.wait(max(1.0, deadline - time.monotonic()))
        info = local.info()
    final = final[final["state"] == "completed"]
    out = pd.DataFrame({"job_id": final["job_id"],
                         "jct_s": [f - submitted[j] for j, f in zip(final["job_id"], final["finished_s"])],
                         "steps_done": final["steps_done"], "total_steps": final["total_steps"],
                         "batch_size": final["batch_size"]})
    info["round_origin_s"] = -ROUND_POLL_S    # the runtime's rounds start at about this + k x round (arrival clock)
    out.attrs["info"] = info          # the scheduler's figures: rounds, overhead, restarts, batch-size switches
    return out



def _just_after_a_round(local, round_s: float) -> float:
    """Start the arrival clock just after the scheduler planned a round, so the runtime's rounds start at about
    -ROUND_POLL_S + k x round on it (the simulator's fixed-round grid, docs/rules.md#fixed-rounds)."""
    rounds = local.info()["rounds"]
    deadline = time.monotonic() + 2 * round_s + 10
    while time.monotonic() < deadline:
        if local.info()["rounds"] > rounds:
            return time.time()
        time.sleep(ROUND_POLL_S)
    raise TimeoutError(f"the scheduler planned no round in {2 * round_s + 10:.0f} s")
