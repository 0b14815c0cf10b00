"""The simulator's side of Shockwave's round rules: the preemption penalty (docs/rules.md#preemption-penalty),
batch-size switches after each micro-task (docs/rules.md#batch-size), the over-deadline rule, and each job's isolated
duration for finish-time fairness."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hetsched.model.jobs import Job
from hetsched.model.throughputs import ThroughputTable
from hetsched.rates.adaptation.profile import epoch_profile, profile_gpu_type

OVER_DEADLINE = 1.5       # a job that has run 1.5 x its isolated duration is force-completed


class AdaptationTracker:
    """Per-round hooks that `RoundSimulation` calls when `dynamic_adaptation` is on."""

    def __init__(self, sim, table: ThroughputTable):
        self.sim = sim
        self.sched = sim.sched
        self.table = table
        self.penalty = float(sim.config.preemption_penalty_s)
        self.threshold = float(sim.config.round_s) - 5.0
        self.profile_type = profile_gpu_type(table)
        self.isolated: dict[int, float] = {}
        self.run_s: dict[int, float] = {}
        self.events: list[tuple[float, int, int, int, int]] = []
        self._prev: np.ndarray | None = None          # job ids placed in the round before the one that ended

    def arrived(self, job: Job) -> None:
        profile = epoch_profile(job, self.table, self.profile_type)
        self.isolated[job.job_id] = profile.isolated_s if profile is not None else float(job.duration_s or np.nan)
        self.run_s[job.job_id] = 0.0

    def penalize(self, plan, steps: np.ndarray, exec_time: np.ndarray):
        """docs/rules.md#preemption-penalty: jobs not placed in the previous round lose `penalty` s of a (nearly)
        full micro-task; their finish time, and so the round's end, does not move."""
        ids = self.sched.job_of_slot[self.sched.members[plan.entry, 0]]
        prev, self._prev = self._prev, ids
        if prev is None or not self.penalty or (len(ids) == len(prev) and (ids == prev).all()):
            return steps, exec_time                   # (the same jobs as last round: nobody was preempted)
        hit = ~np.isin(ids, prev) & (exec_time != 0) & (exec_time > self.threshold)
        if not hit.any():
            return steps, exec_time
        steps, exec_time = steps.copy(), exec_time.copy()
        e = exec_time[hit]
        steps[hit, 0] = np.floor(steps[hit, 0] * (e - self.penalty) / e)
        exec_time[hit] = e - self.penalty
        return steps, exec_time

    def after_round(self, plan, completed: np.ndarray, exec_time: np.ndarray) -> np.ndarray:
        """Switch flagged jobs' batch sizes; add force-completed (over-deadline) jobs to `completed`."""
        sched = self.sched
        ids = sched.job_of_slot[sched.members[plan.entry, 0]].tolist()
        for job_id, t in zip(ids, exec_time.tolist()):
            self.run_s[job_id] += t
        for sw in sched.batch_sizes.switch(ids):
            self.events.append((self.sim.now, sw.job_id, sw.epoch, sw.old_batch_size, sw.new_batch_size))
        done = set(completed.tolist())
        over = [sched.slot[j] for j in ids if self.run_s[j] > OVER_DEADLINE * self.isolated[j]
                and sched.slot[j] not in done] if self.sim.rules.over_deadline else []
        return np.concatenate([completed, np.array(over, completed.dtype)]) if over else completed

    def annotate(self, result) -> None:
        for job_id, rec in result.jobs.items():
            rec.isolated_s = self.isolated.get(job_id, float("nan"))
        result.adaptations = pd.DataFrame(self.events, columns=["time_s", "job_id", "epoch", "old_batch_size",
                                                                 "new_batch_size"])
        result.switches_logged = self.sched.adaptation.logged
