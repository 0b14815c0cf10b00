"""The scheduling core: Gavel's round-based mechanism (docs/rules.md#priorities, docs/rules.md#select).

The core holds the active jobs, their time received per GPU type and the current allocation, and turns the
allocation into a plan for the next round. It performs no I/O and reads no clock: the simulator drives it on
a virtual clock, the runtime on the wall clock. Per-round work is numpy over "entries" (single jobs and, with
space sharing, job pairs); jobs live in slots of preallocated arrays.
"""

from __future__ import annotations

import logging
from typing import Mapping

import numpy as np

from hetsched.core.entries import EntryTable
from hetsched.core.measured import MeasuredRates
from hetsched.core.pins import PinnedJobs
from hetsched.stages.plans import RoundPlan
from hetsched.place.gpus import Placer
from hetsched.select.priority import PrioritySelect
from hetsched.core.slots import JobSlots
from hetsched.rounds.tasks import TaskRounds
from hetsched.core.views import PolicyViews
from hetsched.errors import HetschedError
from hetsched.model.cluster import ClusterSpec
from hetsched.model.jobs import Job
from hetsched.model.throughputs import ThroughputTable
from hetsched.decide.gavel.base import Allocation, Policy
from hetsched.decide.gavel.view import sorted_gpu_types
from hetsched.rates.batch_sizes import BatchSizeSwitching

log = logging.getLogger(__name__)

#: Gavel's mechanism visits GPU types in this order (heterogeneity-aware policies) before shuffling.
CANONICAL_TYPE_ORDER = ("v100", "p100", "k80")


def check_entity_weights(policy, entity_weights) -> None:
    """Entity weights act only on a policy that shares among entities; for any other they would change nothing."""
    if entity_weights and not policy.uses_entities:
        raise HetschedError(f"policy {policy.name!r} does not share among entities, so entity weights would change "
                            f"nothing; use a hierarchical policy (max_min_fairness_water_filling[_perf])")


class Scheduler:
    """The one scheduler: it holds the jobs and calls its round rules (`self.rounds`) for each job and round.
    They are Gavel's micro-task rounds (`TaskRounds`) around an allocation policy (priorities = allocation / share
    received, then placement) or a decide stage that picks each round's jobs itself (`DecideStage`: Shockwave's
    planner, an ordering); or a stage that plans, places and credits whole rounds (`RoundStage`: Synergy's server
    rounds, an elastic system's rounds). The scheduler holds the state (jobs in slots, their entries, the time
    each received); the objects it calls act on it: `job_slots`, `entry_table`, `views` (what the policy sees),
    `selector` (Gavel's priorities and walk), `pins`, `measurements`, `batch_sizes` and the round rules."""

    SLOT_ARRAYS = ("remaining", "tput", "tput_spread", "scale", "key_row", "arrival_s", "weight", "deadline",
                   "pin_off")

    PRIOR_FRACTION = 0.5   # every entry starts with half a round of "time received" per type

    def __init__(self, cluster: ClusterSpec, policy: Policy, throughputs: ThroughputTable, *,
                 round_s: float = 360.0, min_reset_interval_s: float = 1920.0, seed: int = 0,
                 placement_aware: bool = False, estimator=None, resources=None, adaptation=None, decide=None,
                 gpu_types: tuple[str, ...] | None = None, entity_weights: Mapping[str, float] | None = None,
                 round_rules: type | None = None):
        self.cluster = cluster
        self.policy = policy
        self.table = throughputs
        self.round_s = float(round_s)
        self.min_reset_interval_s = float(min_reset_interval_s)
        self.prior = self.round_s * self.PRIOR_FRACTION
        self.placement_aware = placement_aware
        self.estimator = estimator          # ThroughputEstimator: policies see estimated pair throughputs
        self.resources = resources          # TypeAwareResources: CPU/memory placement on the chosen type's servers
        self.adaptation = adaptation        # RuntimeAdaptation: Shockwave's batch-size switching
        # A decide stage that picks each round's jobs itself (Shockwave's planner, an ordering) or whole rounds
        # (Synergy's); None: the policy's allocation and Gavel's priorities (docs/rules.md#decide).
        self.decide = decide
        # The round rules it calls (docs/architecture.md#stages): a decide stage's, else `round_rules` (the class of
        # another, e.g. the ideal mechanism's fluid events) or Gavel's micro-task rounds.
        if decide is not None:
            self.rounds = decide.round_rules(self) or TaskRounds(self)
        else:
            self.rounds = (round_rules or TaskRounds)(self)
        self.entity_weights = dict(entity_weights or {})   # hierarchical policies: weight per entity (default 1)
        check_entity_weights(policy, self.entity_weights)
        self.pins = PinnedJobs(self)                        # jobs pinned to GPU types (docs/rules.md#pins)
        self.measurements = MeasuredRates(self)   # rates the runtime measures (docs/rules.md#measured-rates)
        self.batch_sizes = BatchSizeSwitching(self)     # Shockwave's runtime batch sizes (docs/rules.md#batch-size)
        # Column order, as the policies see them. The runtime passes every type workers may bring, so that
        # workers can join and leave (`set_cluster`) without reshaping the arrays.
        self.gpu_types = tuple(sorted(gpu_types)) if gpu_types else sorted_gpu_types(cluster)
        self.n = n = len(self.gpu_types)
        table_types = self.gpu_types if self.rounds.reads_table else ()    # a whole-round stage has the rates
        missing = [g for g in table_types if g not in throughputs.gpu_types]
        if missing:
            raise HetschedError(f"throughput table {throughputs.name!r} has no GPU type {missing}")
        self._set_capacity(cluster)
        self.selector = PrioritySelect(self, seed)          # Gavel's select stage (docs/rules.md#select)
        self.views = PolicyViews(self)                       # what the policy sees (its `view`)
        self._cols = np.array([throughputs.gpu_index(g) for g in table_types], np.int64)
        self._row_rates: dict[int, tuple[np.ndarray, np.ndarray]] = {}   # table row -> (tput, spread) per column
        # Jobs by slot.
        size = 64
        self.job_slots = JobSlots(self, size, self._slots_grown)     # sets jobs, slot, job_of_slot
        self.remaining = np.zeros(size)
        self.tput = np.zeros((size, n))
        self.tput_spread = np.zeros((size, n))
        self.pin_off = np.zeros((size, n), bool)     # GPU types a pinned job may not use (pins.py)
        self.scale = np.zeros(size, np.int64)
        self.key_row = np.zeros(size, np.int64)
        self.arrival_s = np.zeros(size)         # the policy view's per-job columns (views.py)
        self.weight = np.zeros(size)
        self.deadline = np.zeros(size)
        # Entries (rows aligned): members are slots (-1 = none), insertion order = tie-break order.
        self.entries: list[tuple[int, ...]] = []         # job ids
        self.entry_table = EntryTable(self)              # adds, drops and finds the rows below
        self.members = np.zeros((0, 2), np.int64)
        self.t = np.zeros((0, n))               # time received since the last reset (+ prior)
        self.deficit = np.zeros((0, n))
        self.alloc = np.zeros((0, n))
        self.in_alloc = np.zeros(0, bool)
        self.ok = np.zeros((0, n), bool)        # every member has throughput > 0 on the type
        self.escale = np.zeros(0, np.int64)
        self.etput = np.zeros((0, n, 2))        # steps/s of each member on each type
        self.S = np.zeros(n)
        self.allocation: Allocation | None = None
        self.need_update = False
        self.last_reset_time = 0.0
        self.num_recomputes = 0
        self.last_gpus: dict[tuple[int, ...], tuple[int, tuple[int, ...]]] = {}   # entry -> GPUs of its last round
        if decide is not None:
            decide.attach(self)

    def _set_capacity(self, cluster: ClusterSpec) -> None:
        counts = cluster.as_dict()
        unknown = [g for g, c in counts.items() if c > 0 and g not in self.gpu_types]
        if unknown:
            raise HetschedError(f"cluster has GPU types {unknown} that this scheduler has no columns for "
                                f"({list(self.gpu_types)})")
        self.cluster = cluster
        self.capacity = np.array([counts.get(g, 0) for g in self.gpu_types], float)
        known = [g for g in CANONICAL_TYPE_ORDER if g in self.gpu_types]
        rest = [g for g in cluster.gpu_types if g in self.gpu_types and g not in known]
        self.type_order = [self.gpu_types.index(g) for g in known + rest if counts.get(g, 0) > 0]
        self.type_order_ids = np.array(self.type_order, np.int64)      # the same, for the compiled walk
        self.placer = Placer(cluster, self.gpu_types)

    def set_cluster(self, cluster: ClusterSpec) -> None:
        """GPUs joined or left (the runtime's workers): new capacities and servers; jobs, the time each
        received and the policy's state stay. The allocation is recomputed at the next plan."""
        if self.resources is not None:
            self.resources.cluster_changed(cluster)      # first: servers it cannot use change nothing
        self._set_capacity(cluster)
        self.last_gpus = {}
        self.need_update = True
        if self.decide is not None:
            self.decide.cluster_changed()

    # ---- jobs -------------------------------------------------------------------------------------
    def _slots_grown(self, size: int) -> None:
        if self.decide is not None:
            self.decide.slots_grown(size)

    def add_job(self, job: Job, remaining_steps: float | None = None) -> None:
        if self.adaptation is None and job.mode != "static":
            raise HetschedError(f"job {job.job_id} adapts its batch size ({job.mode.value}), and this run keeps batch "
                                "sizes fixed: use Shockwave's round rules (--rules shockwave, or "
                                "SimulationConfig.for_system('shockwave')), or static jobs (generate --static-modes)")
        if job.slo_factor is not None and job.duration_s is None:     # Gavel's .trace has SLOs but no durations
            raise HetschedError(f"job {job.job_id}: an SLO ({job.slo_factor:g} x its duration) but no duration_s, so "
                                "no deadline; give the trace as .csv or .parquet, which keep durations")
        self.rounds.add_job(job, remaining_steps)

    def own_demands_refused(self, job: Job) -> HetschedError:
        """A job that sets its own CPU/memory demands, where the place stage reads its profile's."""
        return HetschedError(f"job {job.job_id}: sets its own cpu_demand/mem_demand_gb, which no placement reads: "
                             "CPU and memory demands come from its job type's profile (docs/rules.md#profiles). "
                             "Leave those fields empty")

    def _set_rates(self, s: int, row: int) -> None:
        """Slot `s` runs the table's job key `row`: its consolidated and spread steps/s per type."""
        rates = self._row_rates.get(row)
        if rates is None:                          # once per job key (a million arrivals have a few dozen)
            iso = self.table.isolated[row, self._cols]
            tput = np.nan_to_num(iso[:, 0])
            rates = self._row_rates[row] = (tput, np.where(np.isnan(iso[:, 1]), tput, iso[:, 1]))
        self.tput[s], self.tput_spread[s] = rates
        self.key_row[s] = row
        self.measurements.forget(int(self.job_of_slot[s]))     # measured at another batch size, if any
        self.pins.apply(s)

    def remove_job(self, job_id: int) -> None:
        self.measurements.forget(job_id)
        self.rounds.remove_job(job_id)

    def set_remaining(self, job_id: int, steps: float) -> None:
        """Resynchronise a job's remaining steps with progress measured outside the core (the runtime)."""
        self.remaining[self.slot[job_id]] = float(steps)

    def view(self, now: float):
        """The `PolicyView` of the active jobs at `now` (what the policy's allocation reads)."""
        return self.views.view(now)

    # ---- allocation -------------------------------------------------------------------------------
    def _reset_and_recompute(self, now: float) -> None:
        """Gavel's reset event (docs/rules.md#priorities) followed by a policy solve."""
        elapsed = now - self.last_reset_time
        self.deficit += self.alloc * elapsed - (self.t - self.prior)
        allocation = self.policy.allocate(self.views.view(now)) if self.jobs else None
        self.allocation = allocation
        self.alloc[:] = 0.0
        self.in_alloc[:] = False
        if allocation is not None:
            pair_rows, x_pairs = self.entry_table.follow_pairs(allocation)
            rows, x = self.entry_table.rows_of_jobs(allocation.job_ids), allocation.x
            if len(pair_rows):
                rows, x = np.concatenate([rows, pair_rows]), np.r_[x, x_pairs]
            self.alloc[rows] = x
            self.in_alloc[rows] = True
        self.entry_table.changed()
        self.t[:] = self.prior
        self.S = np.full(self.n, self.prior * len(self.entries))
        self.last_reset_time = now
        self.need_update = False
        self.num_recomputes += 1

    def reset_state(self) -> tuple[bool, float, float]:
        """The reset gate (docs/rules.md#reset), in `round_kernels.QuietRounds`' order: pending, last, interval."""
        return self.need_update, self.last_reset_time, self.min_reset_interval_s

    def maybe_recompute(self, now: float, force: bool = False) -> bool:
        """Recompute when a reset event is pending and the gate allows it (docs/rules.md#reset)."""
        if self.need_update and (force or now - self.last_reset_time >= self.min_reset_interval_s
                                 or self.last_reset_time == 0):
            self._reset_and_recompute(now)
            return True
        return False

    # ---- rounds: the round rules' calls ----------------------------------------------------------------
    def next_round_time(self, t: float) -> float:
        """When the next round starts after an idle gap: at the next arrival itself (docs/rules.md#round), or on a
        whole-round stage's grid."""
        return self.rounds.next_round_time(t)

    def plan(self, now: float, force_recompute: bool = False, place: bool = True,
             next_arrival_s: float | None = None, servers: bool = False) -> RoundPlan:
        """Decide, select and place what runs from `now` (docs/rules.md#select). A whole-round stage recomputes
        every round (`force_recompute` changes nothing) and merges rounds up to `next_arrival_s`; `servers`: its
        assignments also name GPUs and CPU/memory shares (the runtime's leases)."""
        return self.rounds.plan_round(now, force_recompute, place, next_arrival_s, servers)

    def entry_of(self, job_ids: tuple[int, ...]) -> int | None:
        """The row of a combination now (a whole-round stage's rows are its jobs' slots), or None if it left."""
        return self.rounds.entry_of(job_ids)

    def credit(self, entry: np.ndarray, gpu_type: np.ndarray, steps: np.ndarray, exec_time: np.ndarray) -> np.ndarray:
        """Record finished micro-tasks (steps per member, (k, 2)); returns slots of jobs that completed."""
        return self.rounds.credit(entry, gpu_type, steps, exec_time)

    def credit_plan(self, plan: RoundPlan) -> np.ndarray:
        """Credit a whole-round plan (docs/rules.md#server-credit); returns the slots of jobs that completed."""
        return self.rounds.credit_plan(plan)
