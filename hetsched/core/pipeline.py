"""A run as stages: decide, select, place, rates and round rules (docs/architecture.md#stages).

Each stage is a typed value. The registry (`hetsched.core.registry`) turns a policy name and a run's settings into a
`Pipeline` and refuses, when it is built, any combination whose stages cannot all act on the run
(`CompositionError` names the two stages and what would work). The simulator and the runtime build their
scheduler from the pipeline; no stage is chosen by a flag on a policy object.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal

import numpy as np

from hetsched.errors import HetschedError

if TYPE_CHECKING:
    from hetsched.core.scheduler import RoundPlan, Scheduler
    from hetsched.model.jobs import Job

DecideKind = Literal["allocation", "planner", "ordering"]
SelectKind = Literal["priority", "planned", "gpu_fill"]
PlaceKind = Literal["gpus", "fair", "greedy", "tune", "opt"]
Credit = Literal["task", "round"]

CPU_MEMORY_PLACEMENTS: tuple[str, ...] = ("fair", "greedy", "tune", "opt")


def grid_start(t: float, origin_s: float, round_s: float) -> float:
    """The first round start at or after `t` on the grid origin + k x round."""
    return origin_s + max(0, math.ceil((t - origin_s) / round_s - 1e-12)) * round_s


class CompositionError(HetschedError):
    """Two stages that cannot act together in one run: names both and says what would work."""

    def __init__(self, first: str, second: str, why: str, works: str):
        self.stages = (first, second)
        super().__init__(f"{first} x {second}: {why}. {works}")


@dataclass(frozen=True)
class Decide:
    """Step 1 (docs/rules.md#decide): Gavel's allocation (time fractions -> priorities), Shockwave's planner
    (the job sets of the next rounds) or Synergy's ordering (a rank of the runnable jobs)."""

    kind: DecideKind
    policy: object                 # the policy object: `Policy`, `ShockwavePolicy` or `ResourcePolicy`
    packing: bool = False          # space sharing: the allocation has pair rows

    def __str__(self) -> str:
        return f"decide {self.policy.name.split('+')[0]!r} ({self.kind})"


@dataclass(frozen=True)
class Select:
    """Step 2 (docs/rules.md#select): by priority per GPU type (Gavel), the planned set (Shockwave) or the
    greedy GPU-count fill in rank order (Synergy)."""

    kind: SelectKind

    def __str__(self) -> str:
        return f"select {self.kind!r}"


@dataclass(frozen=True)
class Place:
    """Step 3 (docs/rules.md#place): GPUs only, with consolidation and lease extension (`gpus`), or GPUs, CPU
    cores and memory per server (Synergy's `fair`, `greedy`, `tune`, `opt`); `least_free` is Synergy's `+place`
    (the fullest server that fits first)."""

    kind: PlaceKind = "gpus"
    least_free: bool = False

    @property
    def cpu_memory(self) -> bool:
        return self.kind in CPU_MEMORY_PLACEMENTS

    def __str__(self) -> str:
        return f"place {self.kind + ('+place' if self.least_free else '')!r}"


@dataclass(frozen=True)
class Rates:
    """Step 4 (docs/rules.md#rates): the table's rate x placement x CPU/memory speedup x current batch size."""

    placement_aware: bool = False                         # a spread gang runs at the unconsolidated rate
    batch_size: bool = False                              # Shockwave's runtime batch-size switching
    estimate_colocation: tuple[int, float] | None = None  # pair rates estimated by matrix completion
    profiles_ratio: int | None = None                     # CPU:GPU ratio of the CPU/memory sensitivity profiles

    def __str__(self) -> str:
        parts = [name for name, on in (("placement-aware", self.placement_aware), ("batch size", self.batch_size),
                                       ("estimated co-location", self.estimate_colocation is not None),
                                       (f"profiles {self.profiles_ratio}", self.profiles_ratio is not None)) if on]
        return f"rates {' + '.join(['table'] + parts)!r}"


@dataclass(frozen=True)
class RoundRules:
    """The mechanism's rules (docs/rules.md#round): round length, when progress is credited (`task`: at each
    micro-task's own finish, Gavel and Shockwave; `round`: every lease ends with the round, Synergy), the grid
    origin, the preemption penalty, the runtime's lease start and fixed rounds, Shockwave's over-deadline completion,
    the reset gate and the trace-replay reset; `ideal`: fluid rates, no rounds."""

    round_s: float
    credit: Credit = "task"
    min_reset_interval_s: float = 1920.0
    preemption_penalty_s: float = 0.0
    lease_start_s: float = 0.0
    fixed_rounds: bool = False
    over_deadline: bool = True
    replay_reset: bool = True
    grid_origin_s: float = 0.0
    macro_rounds: bool = True
    ideal: bool = False

    def __post_init__(self):
        """Values no run can mean (a zero or NaN round ran until its round budget; an unknown credit failed deep
        inside the round loop)."""
        bad = []
        if not (math.isfinite(self.round_s) and self.round_s > 0):
            bad.append(f"round_s={self.round_s!r} (a positive number of seconds)")
        if self.credit not in ("task", "round"):
            bad.append(f"credit={self.credit!r} ('task' or 'round')")
        for name in ("min_reset_interval_s", "preemption_penalty_s"):
            if not getattr(self, name) >= 0:
                bad.append(f"{name}={getattr(self, name)!r} (seconds >= 0)")
        if not math.isfinite(self.grid_origin_s):
            bad.append(f"grid origin (round_origin_s) {self.grid_origin_s!r} (finite seconds)")
        if bad:
            raise HetschedError(f"round rules: {', '.join(bad)}")

    def __str__(self) -> str:
        parts = [f"{self.round_s:g} s rounds", f"credit per {self.credit}"]
        if self.preemption_penalty_s:
            parts.append(f"preemption penalty {self.preemption_penalty_s:g} s")
        if self.lease_start_s:
            parts.append(f"lease start {self.lease_start_s:g} s")
        if self.fixed_rounds:
            parts.append("fixed rounds")
        if not self.over_deadline:
            parts.append("no over-deadline completion")
        if self.grid_origin_s:
            parts.append(f"grid origin {self.grid_origin_s:g} s")
        if self.ideal:
            parts = ["ideal (fluid, no rounds)"]
        return f"rules {', '.join(parts)!r}"


@dataclass(frozen=True)
class Pipeline:
    """One of each stage: what the registry returns for `FIFO+tune`, `gavel+tune`, `shockwave`, ..."""

    name: str
    decide: Decide
    select: Select
    place: Place
    rates: Rates
    rules: RoundRules

    @property
    def policy(self):
        return self.decide.policy

    def stages(self) -> dict[str, str]:
        """Each stage in words (the CLI's `--json` config and `hetsched policies`)."""
        return {k: str(getattr(self, k)).split(" ", 1)[1]
                for k in ("decide", "select", "place", "rates", "rules")}


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
    gpu_type: str                       # its servers' one GPU type (pinned jobs are checked against it)

    def select(self, now: float) -> "tuple[np.ndarray, np.ndarray, bool]":
        raise HetschedError("a whole-round stage plans rounds (`plan`), it does not select entries")

    def plan(self, now: float, next_arrival_s: float | None) -> "RoundPlan":
        """The next plan: slots to run, iterations each (`plan.steps`), its end and how many rounds it covers."""
        raise NotImplementedError

    def credit_plan(self, plan: "RoundPlan") -> np.ndarray:
        """Credit a finished plan; the slots of the jobs that completed."""
        raise NotImplementedError

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
