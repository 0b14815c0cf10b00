"""The scheduling core: Gavel's round-based mechanism (spec/gavel.md s.3, with the amendments of s.12).

The core holds the active jobs, their time received per GPU type and the current allocation, and turns the
allocation into a plan for the next round. It performs no I/O and reads no clock: the simulator drives it on
a virtual clock, the runtime on the wall clock. Everything per round is numpy over the active combinations
("entries": single jobs and, with space sharing, job pairs).
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field

import numpy as np

from .cluster import ClusterSpec
from .errors import HetschedError
from .jobs import Job
from .placement import Placer
from .policies.base import Allocation, Policy, PolicyView
from .policies.view import sorted_gpu_types
from .throughputs import JobKey, ThroughputTable

log = logging.getLogger(__name__)

#: Gavel's mechanism visits GPU types in this order (heterogeneity-aware policies) before shuffling.
CANONICAL_TYPE_ORDER = ("v100", "p100", "k80")


@dataclass
class Assignment:
    """One combination placed for a round: its jobs, GPU type (column), GPU ids and per-job steps/s."""

    entry: int
    job_ids: tuple[int, ...]
    gpu_type: int
    gpus: tuple[int, ...]
    throughputs: tuple[float, ...]
    scale_factor: int
    extended: bool = False


@dataclass
class RoundPlan:
    """What to run in the next round (plus whether the allocation was recomputed to make it)."""

    now: float
    assignments: list[Assignment] = field(default_factory=list)
    recomputed: bool = False


class Scheduler:
    """Gavel's mechanism around any policy: priorities = allocation / share received, then placement."""

    PRIOR_FRACTION = 0.5   # every entry starts with half a round of "time received" per type

    def __init__(self, cluster: ClusterSpec, policy: Policy, throughputs: ThroughputTable, *,
                 round_s: float = 360.0, min_reset_interval_s: float = 1920.0, seed: int = 0,
                 placement_aware: bool = False):
        self.cluster = cluster
        self.policy = policy
        self.table = throughputs
        self.round_s = float(round_s)
        self.min_reset_interval_s = float(min_reset_interval_s)
        self.prior = self.round_s * self.PRIOR_FRACTION
        self.placement_aware = placement_aware
        self.gpu_types = sorted_gpu_types(cluster)          # column order, as the policies see them
        self.n = len(self.gpu_types)
        missing = [g for g in self.gpu_types if g not in throughputs.gpu_types]
        if missing:
            raise HetschedError(f"throughput table {throughputs.name!r} has no GPU type {missing}")
        self.capacity = np.array([cluster.count(g) for g in self.gpu_types], float)
        known = [g for g in CANONICAL_TYPE_ORDER if g in self.gpu_types]
        self.type_order = [self.gpu_types.index(g) for g in known + [g for g in cluster.gpu_types
                                                                     if g in self.gpu_types and g not in known]]
        self.shuffle = not policy.heterogeneity_aware and not policy.packing
        self._shuffler = random.Random(seed + 5)
        self.placer = Placer(cluster, self.gpu_types)
        self._cols = np.array([throughputs.gpu_index(g) for g in self.gpu_types])
        # Jobs, by id (insertion = arrival order).
        self.jobs: dict[int, Job] = {}
        self.remaining: dict[int, float] = {}
        self._tput: dict[int, np.ndarray] = {}               # (n,) isolated steps/s, consolidated
        self._tput_spread: dict[int, np.ndarray] = {}        # (n,) unconsolidated
        # Entries: combinations with their accounting, rows aligned with self.entries.
        self.entries: list[tuple[int, ...]] = []
        self._entry_index: dict[tuple[int, ...], int] = {}
        self.t = np.zeros((0, self.n))          # time received since the last reset (+ prior)
        self.deficit = np.zeros((0, self.n))
        self.alloc = np.zeros((0, self.n))
        self.in_alloc = np.zeros(0, bool)
        self.ok = np.zeros((0, self.n), bool)   # every member has throughput > 0 on the type
        self.S = np.zeros(self.n)
        self.allocation: Allocation | None = None
        self.need_update = False
        self.last_reset_time = 0.0
        self.num_recomputes = 0
        self._last_gpus: dict[tuple[int, ...], tuple[int, tuple[int, ...]]] = {}

    # ---- jobs -------------------------------------------------------------------------------------
    def add_job(self, job: Job, remaining_steps: float | None = None) -> None:
        if job.job_id in self.jobs:
            raise HetschedError(f"job {job.job_id} is already active")
        key = JobKey(job.job_type, job.scale_factor)
        row = self.table.index(key)
        iso = np.nan_to_num(self.table.isolated[row, self._cols])
        self.jobs[job.job_id] = job
        self.remaining[job.job_id] = float(job.total_steps if remaining_steps is None else remaining_steps)
        self._tput[job.job_id] = iso[:, 0]
        spread = iso[:, 1]
        self._tput_spread[job.job_id] = np.where(np.isnan(self.table.isolated[row, self._cols, 1]), iso[:, 0],
                                                 spread)
        self._add_entry((job.job_id,))
        self.need_update = True

    def remove_job(self, job_id: int) -> None:
        self.jobs.pop(job_id)
        self.remaining.pop(job_id)
        self._tput.pop(job_id)
        self._tput_spread.pop(job_id)
        dead = [i for i, members in enumerate(self.entries) if job_id in members]
        self._drop_entries(dead)
        self.need_update = True

    def _add_entry(self, members: tuple[int, ...], t0: float | None = None) -> None:
        self._entry_index[members] = len(self.entries)
        self.entries.append(members)
        prior = self.prior if t0 is None else t0
        self.t = np.vstack([self.t, np.full((1, self.n), prior)])
        self.deficit = np.vstack([self.deficit, np.zeros((1, self.n))])
        self.alloc = np.vstack([self.alloc, np.zeros((1, self.n))])
        self.in_alloc = np.append(self.in_alloc, False)
        if len(members) == 1:
            ok = self._tput[members[0]] > 0
        else:
            ok = np.all(self._pair_tput(members) > 0, axis=1)
        self.ok = np.vstack([self.ok, ok[None, :]])

    def _drop_entries(self, rows: list[int]) -> None:
        if not rows:
            return
        keep = np.ones(len(self.entries), bool)
        keep[rows] = False
        self.entries = [e for e, k in zip(self.entries, keep) if k]
        self._entry_index = {e: i for i, e in enumerate(self.entries)}
        self.t, self.deficit, self.alloc = self.t[keep], self.deficit[keep], self.alloc[keep]
        self.in_alloc, self.ok = self.in_alloc[keep], self.ok[keep]

    def _pair_tput(self, members: tuple[int, ...]) -> np.ndarray:
        a, b = (self.jobs[j] for j in members)
        ia = self.table.index(JobKey(a.job_type, a.scale_factor))
        ib = self.table.index(JobKey(b.job_type, b.scale_factor))
        return np.nan_to_num(self.table.colocated[ia, ib, self._cols, 0])      # (n, 2)

    # ---- allocation -------------------------------------------------------------------------------
    def view(self, now: float) -> PolicyView:
        ids = sorted(self.jobs)
        jobs = [self.jobs[j] for j in ids]
        keys = [JobKey(j.job_type, j.scale_factor) for j in jobs]
        distinct = list(dict.fromkeys(keys))
        code = {k: i for i, k in enumerate(distinct)}
        colocated = None
        if self.policy.packing and distinct:
            rows = np.array([self.table.index(k) for k in distinct])
            colocated = self.table.colocated[np.ix_(rows, rows, self._cols)][:, :, :, 0, :]
        prices = np.array([self.cluster.price(g) for g in self.gpu_types])
        return PolicyView(
            job_ids=np.array(ids, dtype=np.int64), gpu_types=self.gpu_types, capacity=self.capacity,
            throughput=np.array([self._tput[j] for j in ids]).reshape(len(ids), self.n),
            scale_factor=np.array([j.scale_factor for j in jobs], dtype=np.int64),
            priority_weight=np.array([j.priority_weight for j in jobs], float),
            remaining_steps=np.array([self.remaining[j] for j in ids], float),
            time_since_arrival=np.array([now - j.arrival_time_s for j in jobs], float),
            type_code=np.array([code[k] for k in keys], dtype=np.int64), colocated=colocated, prices=prices,
            deadline_s=np.array([np.nan if j.deadline_s is None else j.deadline_s for j in jobs]),
            entity=None, now=now)

    def _reset_and_recompute(self, now: float) -> None:
        """Gavel's reset event (s.3.4, amendment 7) followed by a policy solve."""
        elapsed = now - self.last_reset_time
        self.deficit += self.alloc * elapsed - (self.t - self.prior)
        allocation = self.policy.allocate(self.view(now)) if self.jobs else None
        self.allocation = allocation
        self.alloc[:] = 0.0
        self.in_alloc[:] = False
        if allocation is not None:
            # Pair entries follow the allocation: new pairs appear, pairs with no time disappear.
            wanted = {tuple(int(allocation.job_ids[i]) for i in pair): row
                      for pair, row in zip(allocation.pairs, allocation.x_pairs) if row.sum() > 0}
            stale = [i for i, e in enumerate(self.entries) if len(e) == 2 and e not in wanted]
            self._drop_entries(stale)
            for members in wanted:
                if members not in self._entry_index:
                    self._add_entry(members)
            rows = [self._entry_index[(int(j),)] for j in allocation.job_ids]
            self.alloc[rows] = allocation.x
            self.in_alloc[rows] = True
            for members, row in wanted.items():
                self.alloc[self._entry_index[members]] = row
                self.in_alloc[self._entry_index[members]] = True
        self.t[:] = self.prior
        self.S = np.full(self.n, self.prior * len(self.entries))
        self.last_reset_time = now
        self.need_update = False
        self.num_recomputes += 1

    def maybe_recompute(self, now: float, force: bool = False) -> bool:
        """Recompute when a reset event is pending and the gate allows it (amendment 5)."""
        if self.need_update and (force or now - self.last_reset_time >= self.min_reset_interval_s
                                 or self.last_reset_time == 0):
            self._reset_and_recompute(now)
            return True
        return False

    # ---- planning ---------------------------------------------------------------------------------
    def priorities(self) -> np.ndarray:
        """allocation / fraction of time received, per entry and type (s.3.4)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            fraction = self.t / self.S[None, :]
            pr = np.where(fraction == 0, self.alloc * 1e9, self.alloc / fraction)
        return np.where((self.alloc == 0) | ~self.ok | ~self.in_alloc[:, None], 0.0, pr)

    def type_order_for_round(self) -> list[int]:
        order = list(self.type_order)
        if self.shuffle:
            self._shuffler.shuffle(order)
        return order

    def plan(self, now: float, force_recompute: bool = False) -> RoundPlan:
        """Pick and place the combinations to run from `now` (s.3.5-3.6)."""
        order = self.type_order_for_round()          # drawn every planning step (amendment 4)
        recomputed = self.maybe_recompute(now, force_recompute)
        plan = RoundPlan(now, recomputed=recomputed)
        if not self.entries:
            return plan
        pr = self.priorities()
        free = self.capacity.copy()
        taken: set[int] = set()
        chosen: list[tuple[int, int]] = []           # (entry, type column)
        fills = self.policy.fills_idle_gpus
        scale = [self.jobs[e[0]].scale_factor for e in self.entries]
        seq = np.arange(len(self.entries))
        for w in order:
            ranking = np.lexsort((seq, -self.alloc[:, w], -self.deficit[:, w], -pr[:, w]))
            for e in ranking.tolist():
                if free[w] <= 0:
                    break
                members = self.entries[e]
                if any(j in taken for j in members) or not self.ok[e, w]:
                    continue
                if not fills and pr[e, w] <= 0:
                    continue
                s = scale[e]
                if len(members) == 2 and self.jobs[members[1]].scale_factor != s:
                    continue
                if s > free[w]:
                    continue
                taken.update(members)
                free[w] -= s
                chosen.append((e, w))
        placed = [(e, w) for e, w in chosen if self.in_alloc[e]]   # amendment 3: others leave GPUs idle
        for e, w, gpus, extended, spread in self.placer.place(
                [(e, w, scale[e], self._last_gpus.get(self.entries[e])) for e, w in placed]):
            members = self.entries[e]
            if len(members) == 1:
                row = self._tput_spread if (spread and self.placement_aware) else self._tput
                tputs = (float(row[members[0]][w]),)
            else:
                tputs = tuple(float(v) for v in self._pair_tput(members)[w])
            plan.assignments.append(Assignment(e, members, w, gpus, tputs, scale[e], extended))
        self._last_gpus = {self.entries[a.entry]: (a.gpu_type, a.gpus) for a in plan.assignments}
        return plan

    # ---- progress ---------------------------------------------------------------------------------
    def credit(self, assignment: Assignment, steps: tuple[float, ...], exec_time: float) -> list[int]:
        """Record a finished micro-task; returns the ids of jobs that completed."""
        e = self._entry_index.get(assignment.job_ids)
        if e is not None:
            self.t[e, assignment.gpu_type] += exec_time
        self.S[assignment.gpu_type] += exec_time
        done = []
        for job_id, n_steps in zip(assignment.job_ids, steps):
            if job_id not in self.remaining:
                continue
            self.remaining[job_id] -= n_steps
            if self.remaining[job_id] <= 0:
                done.append(job_id)
        return done
