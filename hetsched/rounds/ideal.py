"""Gavel's "ideal" mechanism (Fig. 13; docs/rules.md#ideal) as round rules of the one loop: no rounds of fixed
length, allocations applied as exact fluid rates. Each plan runs every active job at its allocation's effective
throughput until the next event, the earlier of the next arrival and the first completion, computed exactly (the
artifact's version crashes at HEAD and only advanced to arrival times); the allocation is recomputed at every
event. A plan is credited whole (`credit_plan`), as a whole-round stage's is, and the rules keep each job's start
and steps (`account`): a fluid share has no GPUs, so no GPU-seconds per type and no cost."""

from __future__ import annotations

import numpy as np

from hetsched.stages.plans import RoundPlan
from hetsched.rounds.tasks import TaskRounds
from hetsched.errors import SimulationError
from hetsched.model.jobs import Job

EPS_STEPS = 1e-6        # a job within this fraction of its steps (at least 1e-6 steps) has completed


class IdealRounds(TaskRounds):
    """Fluid rates between events, on the scheduler's jobs (added and removed as Gavel's rounds do)."""

    def __init__(self, sched):
        super().__init__(sched)
        self.busy_gpu_s = 0.0           # GPUs in use x time (the allocation's GPUs, fractional)
        self.stats = None               # no CPU/memory shares
        self._acc = np.zeros((64, 2))   # per slot: start (NaN until it first progresses), steps done
        self._event = None              # the plan's (job ids, slots, rates, length, times to finish)

    def add_job(self, job: Job, remaining_steps: float | None) -> None:
        super().add_job(job, remaining_steps)
        s = self.sched.slot[job.job_id]
        if s >= len(self._acc):
            grown = np.zeros((max(s + 1, 2 * len(self._acc)), 2))
            grown[: len(self._acc)] = self._acc
            self._acc = grown
        self._acc[s] = (np.nan, 0.0)

    def plan_round(self, now: float, force_recompute: bool, place: bool, next_arrival_s: float | None,
                   servers: bool) -> RoundPlan:
        """Every active job at its allocation's rate until the next arrival or the first completion."""
        sched = self.sched
        if not sched.jobs:                  # the loop waits for the next arrival: nothing to allocate
            return RoundPlan(now, np.zeros(0, np.int64), np.zeros(0, np.int64))
        view = sched.view(now)
        allocation = sched.policy.allocate(view)
        sched.num_recomputes += 1
        rate = allocation.effective_throughput(view)
        with np.errstate(divide="ignore"):
            to_finish = np.where(rate > 0, view.remaining_steps / rate, np.inf)
        dt = min(to_finish.min(), (next_arrival_s - now) if next_arrival_s is not None else np.inf)
        if not np.isfinite(dt):
            raise SimulationError(f"no job makes progress under {sched.policy.name} and none will arrive")
        self.busy_gpu_s += float(allocation.gpus_used(view.scale_factor).sum()) * dt
        slots = np.array([sched.slot[j] for j in view.job_ids.tolist()], np.int64)
        self._event = (view.job_ids, slots, rate, dt, to_finish)
        return RoundPlan(now, slots, np.zeros(len(slots), np.int64), True, steps=rate * dt, end=now + dt)

    def credit_plan(self, plan: RoundPlan) -> np.ndarray:
        """The event's progress; the slots of the jobs that completed at its end."""
        sched, acc = self.sched, self._acc
        job_ids, slots, rate, dt, to_finish = self._event
        started = np.isnan(acc[slots, 0]) & (rate > 0)
        acc[slots[started], 0] = plan.now
        acc[slots, 1] += rate * dt
        sched.remaining[slots] -= rate * dt
        total = np.array([sched.jobs[j].total_steps for j in job_ids.tolist()])
        done = (sched.remaining[slots] <= EPS_STEPS * np.maximum(1.0, total)) | (to_finish <= dt)
        return slots[done]

    def finish_s(self, slot: int, end: float) -> float:
        return end

    def account(self, slot: int) -> tuple[float, float, float, dict[str, float]]:
        """(start time, steps done, cost, GPU-seconds per type) of the job in `slot`."""
        start, steps = self._acc[slot]
        return float(start), float(steps), 0.0, {}
