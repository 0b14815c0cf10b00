"""`Result` of a run: per-job records and a per-round timeline, convertible to pandas."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from hetsched.compiled import round_kernels
from hetsched.errors import HetschedError, SimulationError
from hetsched.model.jobs import Job

META_KEY = "hetsched.sim.result"
RESULT_FORMAT = 1
_RECORD_COLUMNS = ("job_id", "job_type", "scale_factor", "priority_weight", "arrival_time_s", "start_time_s",
                   "finish_time_s", "total_steps", "steps_done", "cost", "deadline_s", "isolated_s", "entity",
                   "pinned_gpu_types")
# The timeline's columns and their types (a run in which nothing ran still has them, with no rows).
_TIMELINE_DTYPES = {"round": np.int64, "start_s": float, "end_s": float, "job_id": np.int64, "partner_id": np.int64,
                    "gpu_type": np.int64, "num_gpus": np.int64, "steps": float, "lease_extended": bool,
                    "cpus_per_gpu": float, "mem_gb_per_gpu": float}


def _side_file(path: Path, name: str) -> Path:
    return path.with_name(f"{path.stem}.{name}.parquet")

if TYPE_CHECKING:
    from hetsched.core.scheduler import RoundPlan, Scheduler


@dataclass
class JobRecord:
    job_id: int
    job_type: str
    scale_factor: int
    priority_weight: float
    arrival_time_s: float
    total_steps: float
    deadline_s: float | None
    start_time_s: float = float("nan")
    finish_time_s: float = float("nan")
    steps_done: float = 0.0
    cost: float = 0.0
    gpu_seconds: dict[str, float] = field(default_factory=dict)
    isolated_s: float = float("nan")      # Shockwave: isolated duration after adaptation (the rho denominator)
    entity: str | None = None             # the user/team/vc that hierarchical policies share among
    pinned_gpu_types: str = ""            # '|'-separated GPU types the job may run on ('': any)

    @property
    def jct_s(self) -> float:
        return self.finish_time_s - self.arrival_time_s


@dataclass
class Result:
    """What a simulation (or a runtime session) produced."""

    policy: str
    gpu_types: tuple[str, ...]
    num_gpus: int
    jobs: dict[int, JobRecord]
    makespan_s: float
    busy_gpu_seconds: float
    window: tuple[int, int] | None
    num_rounds: int
    num_recomputes: int
    timeline: dict[str, np.ndarray] | None = None
    resource_stats: dict[str, float] | None = None     # CPU/memory-aware cores: mean allocation percentages
    adaptations: pd.DataFrame | None = None             # Shockwave: applied batch-size switches
    switches_logged: int = 0

    @property
    def utilization(self) -> float:
        """Busy GPU-seconds over (GPUs x makespan), over the whole run (docs/rules.md#utilization)."""
        return self.busy_gpu_seconds / (self.num_gpus * self.makespan_s) if self.makespan_s > 0 else 0.0

    def window_ids(self) -> list[int]:
        if self.window is None:
            return sorted(self.jobs)
        return [j for j in range(*self.window) if j in self.jobs]

    def jobs_frame(self) -> pd.DataFrame:
        """One row per job (no rows, the same columns, for a run without jobs)."""
        rows = []
        for r in self.jobs.values():
            row = {k: getattr(r, k) for k in _RECORD_COLUMNS}
            row["jct_s"] = r.jct_s
            row["in_window"] = self.window is None or self.window[0] <= r.job_id < self.window[1]
            for g in self.gpu_types:
                row[f"seconds_on_{g}"] = r.gpu_seconds.get(g, 0.0)
            rows.append(row)
        columns = [*_RECORD_COLUMNS, "jct_s", "in_window", *(f"seconds_on_{g}" for g in self.gpu_types)]
        return pd.DataFrame(rows, columns=columns).sort_values("job_id").reset_index(drop=True)

    # ---- persistence ---------------------------------------------------------------------------------
    def to_parquet(self, path: str | Path) -> Path:
        """Write the run to `path` (the per-job table; run-level fields in the file's metadata). A timeline and
        Shockwave's batch-size switches, when present, go beside it as `<stem>.timeline.parquet` and
        `<stem>.adaptations.parquet`. `Result.read_parquet(path)` gives back an equal Result."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = Path(path)
        meta = {"policy": self.policy, "gpu_types": list(self.gpu_types), "num_gpus": self.num_gpus,
                "makespan_s": self.makespan_s, "busy_gpu_seconds": self.busy_gpu_seconds,
                "window": list(self.window) if self.window else None, "num_rounds": self.num_rounds,
                "num_recomputes": self.num_recomputes, "resource_stats": self.resource_stats,
                "switches_logged": self.switches_logged, "format": RESULT_FORMAT}
        frame = self.jobs_frame().drop(columns=["jct_s", "in_window"])
        table = pa.Table.from_pandas(frame, preserve_index=False)
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), META_KEY: json.dumps(meta)})
        from hetsched.io.atomic import replacing

        for name, extra in (("timeline", self.timeline), ("adaptations", self.adaptations)):
            side = _side_file(path, name)          # first: the main file, written last, vouches for its sides
            if extra is not None:
                with replacing(side) as tmp:
                    pd.DataFrame(extra).to_parquet(tmp, index=False)
            else:
                side.unlink(missing_ok=True)
        with replacing(path) as tmp:
            pq.write_table(table, tmp)
        return path

    @classmethod
    def read_parquet(cls, path: str | Path) -> "Result":
        import pyarrow.parquet as pq

        path = Path(path)
        table = pq.read_table(path)
        raw = (table.schema.metadata or {}).get(META_KEY.encode())
        if raw is None:
            raise HetschedError(f"{path}: not a hetsched Result file (no {META_KEY!r} metadata)")
        meta = json.loads(raw)
        gpu_types = tuple(meta["gpu_types"])
        jobs = {}
        for row in table.to_pandas().to_dict("records"):
            deadline = row["deadline_s"]
            jobs[int(row["job_id"])] = JobRecord(
                int(row["job_id"]), row["job_type"], int(row["scale_factor"]), float(row["priority_weight"]),
                float(row["arrival_time_s"]), float(row["total_steps"]),
                None if deadline is None or deadline != deadline else float(deadline),
                float(row["start_time_s"]), float(row["finish_time_s"]), float(row["steps_done"]),
                float(row["cost"]), {g: float(row[f"seconds_on_{g}"]) for g in gpu_types
                                     if row[f"seconds_on_{g}"]}, float(row["isolated_s"]),
                entity=row.get("entity") or None, pinned_gpu_types=row.get("pinned_gpu_types") or "")
        timeline = _side_file(path, "timeline")
        adaptations = _side_file(path, "adaptations")
        return cls(meta["policy"], gpu_types, int(meta["num_gpus"]), jobs, float(meta["makespan_s"]),
                   float(meta["busy_gpu_seconds"]), tuple(meta["window"]) if meta["window"] else None,
                   int(meta["num_rounds"]), int(meta["num_recomputes"]),
                   {k: v.to_numpy() for k, v in pd.read_parquet(timeline).items()} if timeline.exists() else None,
                   meta["resource_stats"], pd.read_parquet(adaptations) if adaptations.exists() else None,
                   int(meta["switches_logged"]))

    def timeline_frame(self) -> pd.DataFrame:
        """One row per job per round: start, end, GPU type, GPUs, steps, and the partner when co-located."""
        if self.timeline is None:
            raise ValueError("this run did not record a timeline (record_timeline=False)")
        frame = pd.DataFrame(self.timeline)
        frame["gpu_type"] = np.asarray(self.gpu_types)[frame["gpu_type"].to_numpy()]
        return frame


class ResultBuilder:
    """Collects the simulator's events into a `Result`; per-round work is array arithmetic by job slot."""

    def __init__(self, scheduler: "Scheduler", config, core_accounts: bool = False):
        self.sched = scheduler
        self.config = config
        self.records: dict[int, JobRecord] = {}
        self.busy = 0.0
        self.rounds = 0
        self.record_timeline = config.record_timeline
        self._tl: list[dict[str, np.ndarray]] = []
        self._prices = np.array([scheduler.cluster.price(g) for g in scheduler.gpu_types])
        self._priced = bool(self._prices.any())
        self._acc = np.zeros((0, 3 + scheduler.n))       # per slot: start, steps, cost, seconds per type
        # Rounds that credit whole rounds (docs/rules.md#credit) keep per-job start, progress and GPU time in the
        # scheduler, which is asked at the end; their rounds reach `round_done` only for the timeline.
        self.core_accounts = core_accounts

    def _slot_row(self, slot: int) -> np.ndarray:
        if slot >= len(self._acc):
            grown = np.zeros((max(slot + 1, 2 * len(self._acc)), self._acc.shape[1]))
            grown[: len(self._acc)] = self._acc
            self._acc = grown
        return self._acc[slot]

    def arrived(self, job: Job, slot: int) -> None:
        """A job the scheduler has just added (both loops, round-based and fluid, call this)."""
        first = self.records.get(job.job_id)
        if first is not None:                   # its record would replace the first one's: a job lost
            raise SimulationError(f"job id {job.job_id} appears twice in the stream (arrivals at "
                                  f"{first.arrival_time_s:g} s and {job.arrival_time_s:g} s)")
        sched = self.sched
        if sched.rounds.reads_table and sched.key_row[slot] < 0:
            # The core runs an unmeasured type at a default rate until the runtime measures it; a simulation has
            # no measurements, so that rate would stay: refused (docs/rules.md#unmeasured).
            raise SimulationError(f"job {job.job_id}: {sched.table.lacks(job.job_type, job.scale_factor)}")
        self.records[job.job_id] = JobRecord(job.job_id, job.job_type, job.scale_factor, job.priority_weight,
                                             job.arrival_time_s, job.total_steps, job.deadline_s,
                                             entity=job.entity, pinned_gpu_types=job.pinned_gpu_types)
        row = self._slot_row(slot)
        row[:] = 0.0
        row[0] = np.nan

    def accounts(self) -> tuple[np.ndarray, np.ndarray, bool]:
        """Per-slot accounts (start, steps, cost, seconds per type) and the GPU types' prices, in
        `round_kernels.QuietRounds`' order, for the compiled rounds that write them."""
        return self._acc, self._prices, self._priced

    def planned(self, plan: "RoundPlan") -> None:
        if not len(plan.entry):
            return
        self.rounds += plan.rounds
        if self.core_accounts:
            return
        if round_kernels.ENABLED:
            round_kernels.mark_started(plan.entry, self.sched.members, self._acc, plan.now)
            return
        slots = self.sched.members[plan.entry].ravel()
        slots = slots[slots >= 0]
        fresh = slots[np.isnan(self._acc[slots, 0])]
        self._acc[fresh, 0] = plan.now

    def round_done(self, plan: "RoundPlan", steps: np.ndarray, start: float, ends: np.ndarray,
                   credited: np.ndarray | None = None) -> None:
        """Account a finished round: steps (k, 2) per member, combination end times (k,). `credited` (k,) is
        the execution time the cluster's accounting credits when it differs from the wall time (Shockwave's
        preemption penalty, docs/rules.md#preemption-penalty); utilization counts it, costs and GPU-seconds count
        the wall time."""
        sched = self.sched
        exec_time = ends - start
        if round_kernels.ENABLED and not (self.core_accounts or self.record_timeline):
            scale = sched.escale[plan.entry].astype(float)
            self.busy += round_kernels.gpu_seconds(exec_time if credited is None else credited, scale)
            round_kernels.account_tasks(plan.entry, plan.gpu_type, sched.members, steps, exec_time, scale,
                                        self._prices, self._priced, self._acc)   # compiled, the arithmetic below
            return
        if self.core_accounts:                            # a whole-round plan's entries are slots
            members = np.stack([plan.entry, np.full(len(plan.entry), -1)], axis=1)
            scale = sched.scale[plan.entry].astype(float)
        else:
            members = sched.members[plan.entry]
            scale = sched.escale[plan.entry].astype(float)
        self.busy += round_kernels.gpu_seconds(exec_time if credited is None else credited, scale)
        valid = members >= 0 if (sched.entry_table.has_pairs or self.record_timeline) else None
        priced = self._priced
        gpu_seconds = exec_time * scale
        cost = self._prices[plan.gpu_type] * exec_time / 3600.0 * scale if priced else None
        acc = self._acc
        if self.core_accounts:                            # the core keeps progress: only the timeline is new
            pass
        elif not sched.entry_table.has_pairs:
            slots = members[:, 0]                         # a job runs at most once per round: no repeats
            acc[slots, 1] += steps[:, 0]
            acc[slots, 3 + plan.gpu_type] += gpu_seconds
            if priced:
                acc[slots, 2] += cost
        else:
            for col in (0, 1):
                v = valid[:, col]
                slots = members[v, col]
                acc[slots, 1] += steps[v, col]
                acc[slots, 3 + plan.gpu_type[v]] += gpu_seconds[v]
                if priced:
                    acc[slots, 2] += cost[v] / valid[v].sum(axis=1)   # a pair's GPUs are paid once
        if self.record_timeline:
            ids = np.where(valid, sched.job_of_slot[np.maximum(members, 0)], -1)
            placed = plan.assignments or ()
            extended = np.array([a.extended for a in placed], bool) if placed else np.zeros(len(plan.entry), bool)
            # Per-GPU CPU cores and GB a CPU/memory placement gave each job (NaN: no placement, the fair share).
            shares = np.array([(a.cpus, a.mem_gb) if a.cpus else (np.nan, np.nan) for a in placed], float) \
                if placed else np.full((len(plan.entry), 2), np.nan)
            for col in (0, 1):
                v = valid[:, col]
                self._tl.append({"round": np.full(v.sum(), self.rounds), "start_s": np.full(v.sum(), start),
                                 "end_s": ends[v], "job_id": ids[v, col], "partner_id": ids[v, 1 - col],
                                 "gpu_type": plan.gpu_type[v], "num_gpus": scale[v].astype(int),
                                 "steps": steps[v, col], "lease_extended": extended[v],
                                 "cpus_per_gpu": shares[v, 0], "mem_gb_per_gpu": shares[v, 1]})

    def _flush(self, job_id: int, slot: int) -> None:
        rec = self.records[job_id]
        if self.core_accounts:
            rec.start_time_s, rec.steps_done, rec.cost, rec.gpu_seconds = self.sched.rounds.account(slot)
            return
        row = self._acc[slot]
        rec.start_time_s, rec.steps_done, rec.cost = float(row[0]), float(row[1]), float(row[2])
        rec.gpu_seconds = {g: float(row[3 + i]) for i, g in enumerate(self.sched.gpu_types) if row[3 + i]}

    def completed(self, job_id: int, slot: int, finish: float) -> None:
        self._flush(job_id, slot)
        self.records[job_id].finish_time_s = finish

    def build(self, now: float) -> Result:
        for job_id, slot in self.sched.slot.items():
            self._flush(job_id, slot)
        timeline = None
        if self.record_timeline:
            timeline = {k: np.concatenate([c[k] for c in self._tl]) if self._tl else np.zeros(0, dtype)
                        for k, dtype in _TIMELINE_DTYPES.items()}
        stats = self.sched.rounds.stats if self.core_accounts else None
        busy = self.sched.rounds.busy_gpu_s if self.core_accounts else self.busy
        return Result(self.sched.policy.name, self.sched.gpu_types, int(self.sched.capacity.sum()), self.records,
                      now, busy, self.config.window, self.rounds, self.sched.num_recomputes, timeline,
                      None if stats is None else stats.averages(self.config.round_s))
