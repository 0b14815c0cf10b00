"""Gavel's round rules as the stage the one `Scheduler` calls (docs/architecture.md#stages): micro-tasks that run
for a round on one GPU type and are credited one by one (docs/rules.md#select, docs/rules.md#priorities). A round's
jobs come from the policy's allocation through Gavel's priorities, or from a `DecideStage` that picks them itself
(Shockwave's planner, an ordering); then they are placed on GPUs (or on servers with CPU cores and memory). A
`RoundStage` (Synergy's server rounds, an elastic system's rounds) is the other implementation of these calls."""

from __future__ import annotations

import numpy as np

from hetsched.compiled import round_kernels
from hetsched.stages.plans import Assignment, RoundPlan
from hetsched.stages.rounds import Rounds
from hetsched.errors import HetschedError
from hetsched.model.jobs import Job
from hetsched.model.throughputs import JobKey


class TaskRounds(Rounds):
    """Per-micro-task rounds on the scheduler's entries (its jobs and space-sharing pairs)."""

    def __init__(self, sched):
        self.sched = sched          # the `Scheduler` whose entries these rounds run

    def add_job(self, job: Job, remaining_steps: float | None) -> None:
        sched = self.sched
        if sched.resources is not None and (job.cpu_demand, job.mem_demand_gb) != (None, None):
            raise sched.own_demands_refused(job)
        key = JobKey(job.job_type, job.scale_factor)
        known = key in sched.table
        pin = sched.pins.mask_of(job)
        s = sched.job_slots.take(job)
        if pin is not None:
            sched.pins.masks[s] = pin
            sched.pin_off[s] = pin == 0
        sched.remaining[s] = float(job.total_steps if remaining_steps is None else remaining_steps)
        if known:
            sched._set_rates(s, sched.table.index(key))
        else:
            # An unmeasured job type runs at a default rate until measurements arrive (Gavel's DEFAULT_THROUGHPUT).
            sched.key_row[s] = -1
            sched.tput[s] = sched.tput_spread[s] = 1.0
            sched.pins.apply(s)
        sched.scale[s] = job.scale_factor
        deadline = job.deadline_s
        sched.arrival_s[s], sched.weight[s] = job.arrival_time_s, job.priority_weight
        sched.deadline[s] = np.nan if deadline is None else deadline
        if sched.resources is not None:
            sched.resources.add_job(s, job.job_type, job.scale_factor, sched.tput[s])
        if sched.adaptation is not None:
            sched.adaptation.add_job(job)
        sched.entry_table.add([(job.job_id,)])
        sched.need_update = True
        if sched.decide is not None:
            sched.decide.job_added(job)

    def remove_job(self, job_id: int) -> None:
        sched = self.sched
        s = sched.job_slots.release(job_id)
        if sched.pins.masks.pop(s, None) is not None:
            sched.pin_off[s] = False
        if sched.resources is not None:
            sched.resources.remove_job(s)
        if sched.adaptation is not None:
            sched.adaptation.remove_job(job_id)
        sched.entry_table.drop(np.flatnonzero((sched.members[:, 0] == s) | (sched.members[:, 1] == s)))
        sched.need_update = True
        if sched.decide is not None:
            sched.decide.job_removed(job_id)

    def next_round_time(self, t: float) -> float:
        """After an idle gap a round starts at the next arrival itself (docs/rules.md#round)."""
        return t

    def plan_round(self, now: float, force_recompute: bool, place: bool, next_arrival_s: float | None,
                   servers: bool) -> RoundPlan:
        """Decide and select the entries to run from `now` (docs/rules.md#select), then place them."""
        sched = self.sched
        if sched.decide is not None:
            entry, gpu_type, recomputed = sched.decide.select(now)
            plan = RoundPlan(now, entry, gpu_type, recomputed)
        else:
            order = sched.selector.type_order_for_round()          # drawn every planning step (docs/rules.md#select)
            recomputed = sched.maybe_recompute(now, force_recompute)
            if not sched.entries:
                return RoundPlan(now, np.zeros(0, np.int64), np.zeros(0, np.int64), recomputed)
            entry, gpu_type = sched.selector.select(order)
            keep = sched.in_alloc[entry]                  # the others leave their GPUs idle (docs/rules.md#select)
            plan = RoundPlan(now, entry[keep], gpu_type[keep], recomputed)
        if sched.resources is not None:
            sched.resources.place(sched, plan)            # servers, CPU and memory; sets this round's steps/s
        elif place or sched.placement_aware:
            self._place(plan)
        return plan

    def _place(self, plan: RoundPlan) -> None:
        sched = self.sched
        items = [(int(e), int(w), int(sched.escale[e]), sched.last_gpus.get(sched.entries[e]))
                 for e, w in zip(plan.entry, plan.gpu_type)]
        placed = {e: (gpus, extended, spread) for e, _, gpus, extended, spread in sched.placer.place(items)}
        for e, w in zip(plan.entry.tolist(), plan.gpu_type.tolist()):
            gpus, extended, spread = placed[e]
            ids = sched.entries[e]
            if spread and sched.placement_aware and len(ids) == 1:
                sched.etput[e, w, 0] = sched.tput_spread[sched.members[e, 0], w]
            elif len(ids) == 1:
                sched.etput[e, w, 0] = sched.tput[sched.members[e, 0], w]
            tputs = tuple(float(v) for v in sched.etput[e, w, : len(ids)])
            plan.assignments.append(Assignment(e, ids, w, gpus, tputs, int(sched.escale[e]), extended))
        sched.last_gpus = {a.job_ids: (a.gpu_type, a.gpus) for a in plan.assignments}

    def entry_of(self, job_ids: tuple[int, ...]) -> int | None:
        return self.sched.entry_table.entry_of(job_ids)

    def credit(self, entry: np.ndarray, gpu_type: np.ndarray, steps: np.ndarray, exec_time: np.ndarray) -> np.ndarray:
        """Record finished micro-tasks (steps per member, (k, 2)); returns slots of jobs that completed."""
        sched = self.sched
        if sched.decide is None and round_kernels.ENABLED and (
                sched.estimator is None or not sched.entry_table.has_pairs):
            return round_kernels.credit_tasks(entry, gpu_type, sched.members, steps, exec_time, sched.t, sched.S,
                                              sched.remaining)
        if sched.decide is not None:
            sched.decide.measured(entry, gpu_type, exec_time)
        sched.t[entry, gpu_type] += exec_time          # an entry runs at most once per round
        np.add.at(sched.S, gpu_type, exec_time)        # sequential, in plan order (float order matters)
        members = sched.members[entry]
        if sched.estimator is not None and sched.entry_table.has_pairs:
            for (a, b), w in zip(members.tolist(), gpu_type.tolist()):
                if b >= 0:      # after a pair runs, its measured (oracle) throughput replaces the estimate
                    ra, rb = int(sched.key_row[a]), int(sched.key_row[b])
                    sched.views.pairs_run.update({(ra, rb, w), (rb, ra, w)})
        if not sched.entry_table.has_pairs:
            slots = members[:, 0]
            sched.remaining[slots] -= steps[:, 0]      # a job runs at most once per round
        else:
            valid = members >= 0
            slots = members[valid]
            sched.remaining[slots] -= steps[valid]
        done = slots[sched.remaining[slots] <= 0]
        if sched.decide is not None:
            sched.decide.round_done()
        return done

    def credit_plan(self, plan: RoundPlan) -> np.ndarray:
        raise HetschedError("micro-task rounds are credited task by task (`credit`), not as a whole plan")
