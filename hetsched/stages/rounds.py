"""The round rules' interface (docs/architecture.md#stages): what the one `Scheduler` calls for every job and round,
`sched.rounds`. Gavel's micro-task rounds (`TaskRounds`), the ideal mechanism's (`IdealRounds`) and every whole-round
stage (`RoundStage`: Synergy's server rounds, an elastic system's) implement it."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar

import numpy as np

if TYPE_CHECKING:
    from hetsched.stages.plans import RoundPlan
    from hetsched.model.jobs import Job


def grid_start(t: float, origin_s: float, round_s: float) -> float:
    """The first round start at or after `t` on the grid origin + k x round."""
    return origin_s + max(0, math.ceil((t - origin_s) / round_s - 1e-12)) * round_s


class Rounds:
    """The round rules the scheduler calls for every job and round (`sched.rounds`): `TaskRounds`, `IdealRounds`
    or a `RoundStage`."""

    reads_table: ClassVar[bool] = True      # jobs' rates are the throughput table's rows (docs/rules.md#rates)

    def add_job(self, job: "Job", remaining_steps: float | None) -> None:
        raise NotImplementedError

    def remove_job(self, job_id: int) -> None:
        raise NotImplementedError

    def plan_round(self, now: float, force_recompute: bool, place: bool, next_arrival_s: float | None,
                   servers: bool) -> "RoundPlan":
        """What runs from `now`; `servers`: its assignments also name GPUs and CPU/memory shares (leases)."""
        raise NotImplementedError

    def entry_of(self, job_ids: tuple[int, ...]) -> int | None:
        """The row of a combination now, or None if it left."""
        raise NotImplementedError

    def credit(self, entry: np.ndarray, gpu_type: np.ndarray, steps: np.ndarray, exec_time: np.ndarray) -> np.ndarray:
        """Record finished micro-tasks (steps per member, (k, 2)); returns slots of jobs that completed."""
        raise NotImplementedError

    def credit_plan(self, plan: "RoundPlan") -> np.ndarray:
        """Credit a finished plan as a whole; the slots of the jobs that completed."""
        raise NotImplementedError

    def next_round_time(self, t: float) -> float:
        """When the next round starts after an idle gap that ends at `t`."""
        raise NotImplementedError

    def idle_plan_s(self, now: float) -> float | None:
        """When nothing ran: the next plan before the next arrival's (None: waiting changes no plan)."""
        return None

    def waiting_helps(self, now: float) -> bool:
        """Whether a plan that runs nothing, with nothing left to arrive, can change by waiting alone."""
        return False
