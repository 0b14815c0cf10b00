"""The interfaces the one `Scheduler` calls on a decide stage that picks rounds itself (docs/architecture.md#stages):
`DecideStage` (Shockwave's planner, an ordering under Gavel's rules: each round's entries) and `RoundStage`
(Synergy's server rounds, an elastic system's rounds: whole rounds, placed on servers and credited, which are
their own round rules). The hooks default to doing nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from hetsched.stages.rounds import Rounds
from hetsched.errors import HetschedError

if TYPE_CHECKING:
    from hetsched.stages.plans import RoundPlan
    from hetsched.model.jobs import Job


class DecideStage:
    """A decide stage that picks each round's jobs itself (Shockwave's planner, an ordering): the interface the
    one `Scheduler` calls (docs/architecture.md#stages). The hooks default to doing nothing."""

    def attach(self, sched) -> None:
        """`sched`: the `Scheduler` that calls this stage."""
        self.sched = sched

    def round_rules(self, sched) -> "Rounds | None":
        """The round rules the scheduler calls with this decide stage; None: Gavel's micro-task rounds."""
        return None

    def cluster_changed(self) -> None:
        """GPUs joined or left."""

    def job_added(self, job: "Job") -> None:
        """`job` took slot `sched.slot[job.job_id]`."""

    def job_removed(self, job_id: int) -> None:
        """`job_id` leaves (its slot is still assigned during the call)."""

    def slots_grown(self, size: int) -> None:
        """The scheduler's per-slot arrays now have `size` rows."""

    def select(self, now: float) -> "tuple[np.ndarray, np.ndarray, bool]":
        """This round's (entries, GPU type columns, whether the decision was recomputed)."""
        raise NotImplementedError

    def measured(self, entry: np.ndarray, gpu_type: np.ndarray, exec_time: np.ndarray) -> None:
        """A round's micro-tasks ran for `exec_time` seconds."""

    def round_done(self) -> None:
        """A round was credited."""

    def histories(self, credited: list[int]) -> "list[tuple[int, dict]]":
        """What the stage's decisions read of jobs' pasts that their fields and remaining steps do not give, for each
        job whose past changed since the last call (`credited`: the jobs the round just credited), as (job id,
        JSON-able dict): Synergy's seconds run and end of last run (LAS, the starvation guard), Shockwave's
        fair-share finish estimates and calibration. The runtime stores them at each round's end and gives them
        back after a restart (`restore`, docs/rules.md#runtime-restart)."""
        return []

    def restore(self, job_id: int, history: dict) -> None:
        """A restarted runtime gives back what `histories` last said of `job_id`."""

    def state(self) -> "dict | None":
        """What the stage keeps beside its jobs' histories (the planner's round count and clock origin), JSON-able;
        None when nothing. Stored with the histories, given back to a restarted core by `restore_state`."""
        return None

    def restore_state(self, state: dict) -> None:
        """A restarted runtime gives back what `state` said, before its jobs join."""


class RoundStage(DecideStage, Rounds):
    """A decide stage that also selects, places on servers (GPUs, CPU cores, memory) and credits whole rounds:
    every lease ends with the round (Synergy, docs/rules.md#server-credit). A plan may stand for several
    identical rounds (`plan.rounds`)."""

    reads_table: ClassVar[bool] = False     # the stage has its jobs' rates, not the throughput table
    own_lease_start: ClassVar[bool] = False     # the stage delays a new lease's progress itself
    pool_types: tuple[str, ...]         # its servers' GPU types (pinned jobs are checked against them)

    def round_rules(self, sched) -> "RoundStage":
        """Its own: the scheduler calls it for every job and round."""
        return self

    # ---- the one Scheduler's calls, for whole rounds ---------------------------------------------------
    def add_job(self, job: "Job", remaining_steps: float | None) -> None:
        """A slot for the job and its remaining steps (no table row: the stage keeps its demands and rates)."""
        sched = self.sched
        if (job.cpu_demand, job.mem_demand_gb) != (None, None):
            raise sched.own_demands_refused(job)
        sched.pins.mask_of(job, self.pool_types)      # its pool's types (the runtime's columns are the table's)
        s = sched.job_slots.take(job)
        sched.remaining[s] = float(job.total_steps if remaining_steps is None else remaining_steps)
        sched.scale[s], sched.key_row[s] = job.scale_factor, -1
        try:
            self.job_added(job)
        except HetschedError:
            sched.job_slots.release(job.job_id)
            raise

    def remove_job(self, job_id: int) -> None:
        self.job_removed(job_id)
        self.sched.job_slots.release(job_id)

    def plan_round(self, now: float, force_recompute: bool, place: bool, next_arrival_s: float | None,
                   servers: bool) -> "RoundPlan":
        """The next plan (every round is decided again: `force_recompute` changes nothing); `servers`: its
        assignments also name GPUs and CPU/memory shares (the runtime's leases)."""
        plan = self.plan(now, next_arrival_s)
        if servers:
            self.assign(plan)
        return plan

    def entry_of(self, job_ids: tuple[int, ...]) -> int | None:
        """A plan's rows are its jobs' slots."""
        return self.sched.slot.get(job_ids[0]) if len(job_ids) == 1 else None

    def credit(self, entry: np.ndarray, gpu_type: np.ndarray, steps: np.ndarray, exec_time: np.ndarray) -> np.ndarray:
        """Iterations and seconds measured outside the stage (the runtime): `entry` holds slots."""
        return self.credit_measured(entry, steps[:, 0], exec_time)

    def select(self, now: float) -> "tuple[np.ndarray, np.ndarray, bool]":
        raise HetschedError("a whole-round stage plans rounds (`plan`), it does not select entries")

    def plan(self, now: float, next_arrival_s: float | None) -> "RoundPlan":
        """The next plan: slots to run, iterations each (`plan.steps`), its end and how many rounds it covers."""
        raise NotImplementedError

    def finish_s(self, slot: int, end: float) -> float:
        """When the job in `slot`, completed by the plan ending at `end`, finished (its end, unless the stage
        knows better)."""
        return end

    def assign(self, plan: "RoundPlan") -> None:
        """Fill `plan.assignments`: each job's GPU ids and per-GPU CPU/memory share (the runtime's leases)."""
        raise HetschedError(f"{type(self).__name__} cannot name servers for leases")

    def credit_measured(self, slots: np.ndarray, steps: np.ndarray, seconds: np.ndarray) -> np.ndarray:
        """Credit iterations and seconds measured outside the stage (the runtime); the slots that completed."""
        raise NotImplementedError

    def next_round_time(self, t: float) -> float:
        """The first round start at or after `t` (rounds keep a grid)."""
        raise NotImplementedError

    def account(self, slot: int) -> "tuple[float, float, float, dict[str, float]]":
        """(start time, steps done, cost, GPU-seconds per type) of the job in `slot`."""
        raise NotImplementedError
