"""The interfaces the one `Scheduler` calls on a decide stage that picks rounds itself (docs/architecture.md#stages):
`DecideStage` (Shockwave's planner, an ordering under Gavel's rules: each round's entries) and `RoundStage`
(Synergy's server rounds, an elastic system's rounds: whole rounds, placed on servers and credited). The hooks default to doing nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from hetsched.errors import HetschedError

if TYPE_CHECKING:
    from hetsched.core.scheduler import RoundPlan, Scheduler
    from hetsched.model.jobs import Job


class DecideStage:
    """A decide stage that picks each round's jobs itself (Shockwave's planner, an ordering): the interface the
    one `Scheduler` calls (docs/architecture.md#stages). The hooks default to doing nothing."""

    #: False: the stage returns a round's (entries, GPU type columns) and the scheduler places them and credits
    #: each micro-task; True (`RoundStage`): the stage also places and credits whole rounds.
    whole_rounds: ClassVar[bool] = False

    def attach(self, sched: "Scheduler") -> None:
        self.sched = sched

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


class RoundStage(DecideStage):
    """A decide stage that also selects, places on servers (GPUs, CPU cores, memory) and credits whole rounds:
    every lease ends with the round (Synergy, docs/rules.md#server-credit). A plan may stand for several
    identical rounds (`plan.rounds`)."""

    whole_rounds: ClassVar[bool] = True
    pool_types: tuple[str, ...]         # its servers' GPU types (pinned jobs are checked against them)

    def select(self, now: float) -> "tuple[np.ndarray, np.ndarray, bool]":
        raise HetschedError("a whole-round stage plans rounds (`plan`), it does not select entries")

    def plan(self, now: float, next_arrival_s: float | None) -> "RoundPlan":
        """The next plan: slots to run, iterations each (`plan.steps`), its end and how many rounds it covers."""
        raise NotImplementedError

    def credit_plan(self, plan: "RoundPlan") -> np.ndarray:
        """Credit a finished plan; the slots of the jobs that completed."""
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
