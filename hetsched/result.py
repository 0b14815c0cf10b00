"""`Result` of a run: per-job records and a per-round timeline, convertible to pandas."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .jobs import Job

if TYPE_CHECKING:
    from .core import Assignment, RoundPlan, Scheduler


@dataclass
class JobRecord:
    job_id: int
    job_type: str
    scale_factor: int
    priority_weight: float
    arrival_time_s: float
    total_steps: float
    deadline_s: float | None
    start_time_s: float = float("nan")
    finish_time_s: float = float("nan")
    steps_done: float = 0.0
    cost: float = 0.0
    gpu_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def jct_s(self) -> float:
        return self.finish_time_s - self.arrival_time_s


@dataclass
class Result:
    """What a simulation (or a runtime session) produced."""

    policy: str
    gpu_types: tuple[str, ...]
    num_gpus: int
    jobs: dict[int, JobRecord]
    makespan_s: float
    busy_gpu_seconds: float
    window: tuple[int, int] | None
    num_rounds: int
    num_recomputes: int
    timeline: dict[str, np.ndarray] | None = None

    @property
    def utilization(self) -> float:
        """Busy GPU-seconds over (GPUs x makespan), over the whole run (Gavel's definition, s.3.10)."""
        return self.busy_gpu_seconds / (self.num_gpus * self.makespan_s) if self.makespan_s > 0 else 0.0

    def window_ids(self) -> list[int]:
        if self.window is None:
            return sorted(self.jobs)
        return [j for j in range(*self.window) if j in self.jobs]

    def jobs_frame(self) -> pd.DataFrame:
        rows = []
        for r in self.jobs.values():
            row = {k: getattr(r, k) for k in ("job_id", "job_type", "scale_factor", "priority_weight",
                                              "arrival_time_s", "start_time_s", "finish_time_s", "total_steps",
                                              "steps_done", "cost", "deadline_s")}
            row["jct_s"] = r.jct_s
            row["in_window"] = self.window is None or self.window[0] <= r.job_id < self.window[1]
            for g in self.gpu_types:
                row[f"seconds_on_{g}"] = r.gpu_seconds.get(g, 0.0)
            rows.append(row)
        return pd.DataFrame(rows).sort_values("job_id").reset_index(drop=True)

    def timeline_frame(self) -> pd.DataFrame:
        """One row per job per round: start, end, GPU type, GPUs, steps, and the partner when co-located."""
        if self.timeline is None:
            raise ValueError("this run did not record a timeline (record_timeline=False)")
        frame = pd.DataFrame(self.timeline)
        frame["gpu_type"] = np.asarray(self.gpu_types)[frame["gpu_type"].to_numpy()]
        return frame


class ResultBuilder:
    """Collects events from the simulator loop into a `Result`."""

    def __init__(self, scheduler: "Scheduler", config):
        self.sched = scheduler
        self.config = config
        self.records: dict[int, JobRecord] = {}
        self.busy = 0.0
        self.rounds = 0
        self.record_timeline = config.record_timeline
        self._tl: dict[str, list] = {k: [] for k in ("round", "start_s", "end_s", "job_id", "partner_id",
                                                     "gpu_type", "num_gpus", "steps", "lease_extended")}
        self._prices = np.array([scheduler.cluster.price(g) for g in scheduler.gpu_types])

    def arrived(self, job: Job) -> None:
        self.records[job.job_id] = JobRecord(job.job_id, job.job_type, job.scale_factor, job.priority_weight,
                                             job.arrival_time_s, job.total_steps, job.deadline_s)

    def planned(self, plan: "RoundPlan") -> None:
        if plan.assignments:
            self.rounds += 1
        for a in plan.assignments:
            for j in a.job_ids:
                rec = self.records[j]
                if np.isnan(rec.start_time_s):
                    rec.start_time_s = plan.now

    def micro_task(self, a: "Assignment", steps, start: float, end: float, exec_time: float) -> None:
        self.busy += exec_time * a.scale_factor
        gpu = self.sched.gpu_types[a.gpu_type]
        share = 1.0 / len(a.job_ids)          # a pair's GPUs are paid once, half by each job
        for j, n in zip(a.job_ids, steps):
            rec = self.records[j]
            rec.steps_done += n
            rec.gpu_seconds[gpu] = rec.gpu_seconds.get(gpu, 0.0) + exec_time * a.scale_factor
            rec.cost += self._prices[a.gpu_type] * exec_time / 3600.0 * a.scale_factor * share
        if self.record_timeline:
            tl = self._tl
            for k, (j, n) in enumerate(zip(a.job_ids, steps)):
                tl["round"].append(self.rounds)
                tl["start_s"].append(start)
                tl["end_s"].append(end)
                tl["job_id"].append(j)
                tl["partner_id"].append(a.job_ids[1 - k] if len(a.job_ids) == 2 else -1)
                tl["gpu_type"].append(a.gpu_type)
                tl["num_gpus"].append(a.scale_factor)
                tl["steps"].append(n)
                tl["lease_extended"].append(a.extended)

    def completed(self, job_id: int, finish: float) -> None:
        self.records[job_id].finish_time_s = finish

    def build(self, now: float) -> Result:
        timeline = {k: np.asarray(v) for k, v in self._tl.items()} if self.record_timeline else None
        return Result(self.sched.policy.name, self.sched.gpu_types, int(self.sched.capacity.sum()), self.records,
                      now, self.busy, self.config.window, self.rounds, self.sched.num_recomputes, timeline)
