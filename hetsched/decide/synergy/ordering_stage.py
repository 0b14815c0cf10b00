"""Synergy's orderings as the decide and select stages of the one `Scheduler` (docs/rules.md#ordering-any-cluster).

Each round the ordering ranks the active jobs (FIFO, SRTF, LAS, FTF, DRF, Tetris, or any registered one), and the
jobs are taken in that order, each on its fastest GPU type that still has room for its gang (a later smaller job
may fill in). The scheduler's CPU/memory placement then places them on that type's servers, and the round is
credited per micro-task like Gavel's. So an ordering runs on mixed GPU types and on Gavel's job types, whose
CPU/memory demands come from the one demand model (`data/resources/gavel_models.csv`).
"""

from __future__ import annotations

import numpy as np

from hetsched.errors import HetschedError
from hetsched.model.jobs import Job
from hetsched.stages.decide import DecideStage
from hetsched.decide.synergy.merging import STARVATION_S
from hetsched.decide.synergy.ordering import Ordering, OrderingView


class OrderingStage(DecideStage):
    """An ordering on the one scheduler: the scheduler calls it as it calls Shockwave's planner."""

    starvation_s = STARVATION_S

    def __init__(self, ordering: Ordering, fair: bool):
        self.ordering = ordering
        self._fair = fair                  # GPU-proportional shares: remaining time without the CPU/memory speedup
        self.arrival: dict[int, float] = {}
        self.total: dict[int, float] = {}
        self.attained: dict[int, float] = {}      # seconds run
        self.last_run: dict[int, float] = {}
        self.speedup: dict[int, float] = {}       # CPU/memory speedup of the job's last round
        self.raised: set[int] = set()             # the starvation guard sorts these first
        self.now = 0.0

    def attach(self, sched) -> None:
        self.sched = sched
        self.cluster_changed()

    def cluster_changed(self) -> None:
        servers = self.sched.cluster.server_shapes()
        self.totals = (float(sum(s.num_gpus for s in servers)), float(sum(s.cpu_cores or 0 for s in servers)),
                       float(sum(s.dram_gb or 0.0 for s in servers)))

    def job_added(self, job: Job) -> None:
        if self.sched.key_row[self.sched.slot[job.job_id]] < 0:
            raise HetschedError(f"job {job.job_id}: job type {job.job_type!r} has no rate in the throughput table "
                                f"{self.sched.table.name!r}; an ordering on mixed GPU types reads rates from the table "
                                f"(Synergy's model names run under Synergy's rules, --rules synergy)")
        j = job.job_id
        self.arrival[j], self.total[j] = job.arrival_time_s, float(job.total_steps)
        self.attained[j], self.last_run[j], self.speedup[j] = 0.0, -1.0, 1.0

    def job_removed(self, job_id: int) -> None:
        for table in (self.arrival, self.total, self.attained, self.last_run, self.speedup):
            table.pop(job_id, None)
        self.raised.discard(job_id)

    # ---- decide and select ------------------------------------------------------------------------------
    def columns(self, ids: list[int]) -> "_Columns":
        """What an ordering reads, for the jobs `ids` (positions 0..n-1)."""
        sched = self.sched
        slots = np.array([sched.slot[j] for j in ids], np.int64)
        fastest = sched.tput[slots].max(axis=1)
        demand = sched.resources.demands(slots)
        return _Columns(
            arrival=np.array([self.arrival[j] for j in ids]), total=np.array([self.total[j] for j in ids]),
            remaining=sched.remaining[slots].astype(float), attained=np.array([self.attained[j] for j in ids]),
            escale=sched.scale[slots], iter_time=np.where(fastest > 0, 1.0 / np.maximum(fastest, 1e-300), np.inf),
            speedup_now=np.array([self.speedup[j] for j in ids]), cpu_demand=demand[:, 0], mem_demand=demand[:, 1],
            priority=np.array([1.0 if j in self.raised else 0.0 for j in ids]), totals=self.totals, fair=self._fair)

    def select(self, now: float) -> tuple[np.ndarray, np.ndarray, bool]:
        """The jobs in the ordering's rank, each on its fastest GPU type with room for its gang."""
        sched = self.sched
        self.now = now
        if not sched.jobs:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), False
        ids = sorted(sched.jobs, key=lambda j: (self.arrival[j], j))    # arrival order: stable ties
        cols = self.columns(ids)
        rank = self.ordering.rank(OrderingView(cols, np.arange(len(ids)), now))
        self._raise_guard(ids, now)
        free = sched.capacity.copy()
        entries, types = [], []
        for i in rank.tolist():
            s = sched.slot[ids[i]]
            g = sched.scale[s]
            rates = np.where(free >= g, sched.tput[s], 0.0)
            w = int(np.argmax(rates))
            if rates[w] <= 0:
                continue
            free[w] -= g
            entries.append(sched.entry_table.index[(ids[i],)])
            types.append(w)
            if free.max() <= 0:
                break
        return np.array(entries, np.int64), np.array(types, np.int64), True

    def _raise_guard(self, ids: list[int], now: float) -> None:
        """A job not run for 1000 h is sorted first from the next round on (docs/rules.md#starvation-guard)."""
        for j in ids:
            since = self.last_run[j] if self.last_run[j] >= 0 else self.arrival[j]
            if now - since > self.starvation_s:
                self.raised.add(j)

    # ---- progress ------------------------------------------------------------------------------------------
    def measured(self, entry: np.ndarray, gpu_type: np.ndarray, exec_time: np.ndarray) -> None:
        """A round ran: attained service, the last time each job ran, and the speedup it got."""
        sched = self.sched
        slots = sched.members[entry, 0]
        used = sched.etput[entry, gpu_type, 0]
        table = sched.tput[slots, gpu_type]
        end = self.now + exec_time
        for s, t, e, u, r in zip(slots.tolist(), exec_time.tolist(), end.tolist(), used.tolist(), table.tolist()):
            j = int(sched.job_of_slot[s])
            self.attained[j] += t
            self.last_run[j] = e
            self.speedup[j] = u / r if r > 0 else 1.0
            self.raised.discard(j)

    def round_done(self) -> None:
        """Nothing to advance: the ordering ranks afresh every round."""


class _Columns:
    """Arrays by position with the names `OrderingView` reads (the resource core's names)."""

    def __init__(self, *, totals, fair, **arrays):
        self.__dict__.update(arrays)
        self.pool = type("Pool", (), {"totals": totals})()
        self._fair = fair
