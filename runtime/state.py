"""What the scheduler server knows, and the round: the same `Scheduler` core as the simulator, on the wall clock.

Shortly before each round boundary the server credits the ending round to the core (time each lease really
ran, steps measured), admits submitted jobs, plans the next round and turns the plan into leases. A lease is
one process per leased GPU (rank r of k); a co-located pair gets a lease per member on the same GPU. A job
placed on the same GPUs again keeps running (lease extension); otherwise its lease ends with that plan: its
processes checkpoint and exit at their next lease update, and the job's next lease starts once they are gone.
Job state lives in SQLite; checkpoints in the scheduler's state directory. The core is built once and follows
workers joining and leaving through `set_cluster`; the runtime calls only the core's public methods.
"""

from __future__ import annotations

import json
import logging
import math
import secrets
import threading
import time
import uuid
from collections import Counter

import numpy as np

from hetsched.core.scheduler import Scheduler, check_entity_weights
from hetsched.model.jobs import Job
from hetsched.model.servers import Servers
from hetsched.core.registry import check_runtime, decide_of, job_catalog, pipeline_for, planner_params, policy_for
from hetsched.core.run_config import SimulationConfig
from hetsched.model.throughputs import ThroughputTable

from . import validate
from .batch_sizes import BatchSizes, adaptation_field
from .checkpoints import CheckpointStore
from .costs import FixedCosts
from .endings import Endings
from .lease_calls import LeaseCalls
from .local_gpus import stable_parts
from .logs import EventLog
from .memory import RestartMemory
from .records import LeaseInfo, WorkerInfo
from .store import JobRow, Store
from .stubs import pb2
from .worker_calls import WorkerCalls

log = logging.getLogger(__name__)
events = logging.getLogger(EventLog.NAME)     # one key=value line per job event (frequent ones: self.events)
LEASE_TOKENS_KEPT = 4          # per job: a process of an older lease may still report its last checkpoint
#: The runtime's settings, per decide family (each only where a stage reads it, docs/rules.md#settings): no recompute
#: gate on the wall clock (Gavel's physical mode recomputes whenever a reset is pending); batch sizes adapt wherever
#: the pipeline can (docs/rules.md#runtime-batch-sizes; only jobs submitted adaptive ever switch); server rounds
#: plan one round at a time (the wall clock does not skip ahead).
RUNTIME_SETTINGS = {"allocation": {"min_reset_interval_s": 0.0, "dynamic_adaptation": True},
                    "planner": {"dynamic_adaptation": True}, "ordering": {"macro_rounds": False}, "elastic": {}}


class RuntimeState(WorkerCalls, LeaseCalls, Endings, BatchSizes, FixedCosts, RestartMemory):
    """Everything the server knows, guarded by one lock; RPC handlers and the round loop share it."""

    def __init__(self, store: Store, policy: str, round_s: float, throughputs: ThroughputTable, seed: int = 0,
                 worker_timeout_s: float = 5.0, max_attempts: int = 3, slowdowns: dict[str, float] | None = None,
                 checkpoints: CheckpointStore | None = None, entity_weights: dict[str, float] | None = None,
                 shockwave_config: str | None = None, time_scale: float = 1.0):
        self.lock = threading.RLock()
        # Unknown names and refused compositions fail here, before any worker joins.
        decide = policy_for(policy, seed)
        kind = decide_of(decide).kind
        if shockwave_config:                                       # a preset or JSON file (docs/rules.md#ftf-ratio)
            decide = policy_for(policy, seed, **planner_params(kind, shockwave_config))
        self.pipeline = pipeline_for(decide, SimulationConfig(round_s=round_s, seed=seed, time_scale=time_scale,
                                                              **RUNTIME_SETTINGS[kind]))
        check_runtime(self.pipeline)
        self.catalog = job_catalog(self.pipeline, throughputs)     # the job types submissions are checked against
        if kind == "elastic":          # elastic jobs: the measured applications and their GPU types are the table
            throughputs = self.catalog
        self.store, self.policy_name, self.round_s, self.table = store, policy, round_s, throughputs
        self.seed, self.worker_timeout_s, self.max_attempts = seed, worker_timeout_s, max_attempts
        self.slowdowns = slowdowns or {}
        self.entity_weights = dict(entity_weights or {})
        check_entity_weights(decide, self.entity_weights)          # now, not when the first worker joins
        self.checkpoints = checkpoints
        self.epoch = float(store.meta("epoch") or time.time())
        store.set_meta("epoch", repr(self.epoch))
        self.incarnation = uuid.uuid4().hex[:8]           # worker ids from an earlier server are unknown
        self.workers: dict[str, WorkerInfo] = {}
        self.gpu_owner: dict[int, tuple[str, int]] = {}
        self.servers: Servers | None = None            # the workers' servers (the one server model)
        self.peak_gpus = 0
        self.leases: dict[int, LeaseInfo] = {}           # job id -> its current lease
        self.handover_since: dict[str, float] = {}       # lease id -> since when it waits to be handed out
        self.tokens: dict[str, LeaseInfo] = {}           # lease token -> lease (current and recent)
        self.by_lease_id: dict[str, LeaseInfo] = {}
        self.job_tokens: dict[int, list[str]] = {}       # job id -> its recent lease tokens, oldest first
        self.stored_steps: dict[int, int] = {}           # job id -> steps of its stored checkpoint (this run)
        self.running_on: dict[int, set[str]] = {}        # job id -> workers that report a process of it
        self.live_steps: dict[int, int] = {}
        self.credited: dict[int, int] = {}               # steps already credited to the core
        self.finished_flag: set[int] = set()
        self.active: dict[int, JobRow] = {}              # queued and running jobs
        self.to_admit: list[int] = []
        self._started: list[int] = []
        self.core: Scheduler | None = None
        self.plan: list[tuple[tuple[int, ...], int, float]] = []   # (job ids, type column, round start)
        self.rounds = 0
        self.overheads: list[float] = []
        self.rpc_errors: Counter = Counter()             # answers other than OK, by status code name
        self.events = EventLog()
        self._init_batch_sizes()
        self._init_costs()
        self._init_memory()
        self._recover()

    def now(self) -> float:
        return time.time() - self.epoch

    def _recover(self) -> None:
        """A restart: whatever was running is queued again and resumes from its durable progress. A stored row
        that no longer validates (an older server, a hand edit) is failed with the reason, never scheduled. A row
        carries its command's words, split when it was submitted, so that recovery takes time in proportion to the
        queue, not to its commands' lengths (shlex took 107 of 109 s for 5,000 commands of 4 KB); a row of an older
        server is split here once and its words stored."""
        split = []
        for row in self.store.jobs(("queued", "running")):
            try:
                had = bool(row.argv)
                self._check_row(row, validate.MAX_SCALE_FACTOR, allow_unknown_type=True)
                if not had:
                    split.append((row.argv, row.job_id))
            except validate.InvalidInput as exc:
                log.warning("job %d: stored row is invalid (%s); marked failed", row.job_id, exc)
                self.store.set_state(row.job_id, "failed", time.time(), f"invalid job: {exc}")
                continue
            if row.state == "running":
                self.store.set_state(row.job_id, "queued")
                row.state = "queued"
            self.active[row.job_id] = row
            self.to_admit.append(row.job_id)
        if split:
            self.store.set_argvs(split)

    def _check_row(self, row: JobRow, max_scale_factor: int, allow_unknown_type: bool) -> None:
        try:
            words = row.words()
        except ValueError as exc:
            raise validate.InvalidInput(f"command: its stored words do not parse ({exc})") from None
        words = validate.job_fields(self.catalog, job_id=row.job_id, job_type=row.job_type,
                                    scale_factor=row.scale_factor, total_steps=row.total_steps,
                                    priority_weight=row.priority_weight, command=row.command,
                                    allow_unknown_type=allow_unknown_type, max_scale_factor=max_scale_factor,
                                    argv=words)
        if not row.argv:
            row.argv = json.dumps(words)
        validate.job_limits(self.table, pinned_gpu_types=row.pinned_gpu_types, slo_factor=row.slo_factor,
                            duration_s=row.duration_s)

    # ---- clients ----------------------------------------------------------------------------------------
    def submit(self, req) -> int:
        """Validate, store and queue a job (raises InvalidInput / DuplicateJob)."""
        with self.lock:
            priority = req.priority_weight if req.priority_weight != 0 else 1.0
            argv = validate.job_fields(self.catalog, job_id=req.job_id, job_type=req.job_type,
                                       scale_factor=req.scale_factor, total_steps=req.total_steps,
                                       priority_weight=priority, command=req.command,
                                       allow_unknown_type=req.allow_unknown_type,
                                       max_scale_factor=self.peak_gpus or validate.MAX_SCALE_FACTOR)
            if len(req.entity) > 200:
                raise validate.InvalidInput("entity: at most 200 characters")
            validate.job_limits(self.table, pinned_gpu_types=req.pinned_gpu_types, slo_factor=req.slo_factor,
                                duration_s=req.duration_s)
            mode = adaptation_field(req.adaptation, req.job_type, self.pipeline.rates.batch_size)
            row = self.store.add_job(req.job_type, req.scale_factor, req.total_steps, priority, req.command,
                                     time.time(), req.job_id if req.job_id >= 0 else None, entity=req.entity,
                                     adaptation=mode, pinned_gpu_types=req.pinned_gpu_types,
                                     slo_factor=req.slo_factor, duration_s=req.duration_s, argv=argv)
            self.active[row.job_id] = row
            self.to_admit.append(row.job_id)
            events.info("submit job=%d type=%r scale=%d steps=%d", row.job_id, row.job_type, row.scale_factor,
                        row.total_steps)
            return row.job_id

    def status(self, req) -> pb2.StatusResponse:
        """One page of jobs: at most `page_size` (<= 5000) and, whatever their log tails, under 8 MiB."""
        size = min(req.page_size or 500, 5000)
        states = tuple(dict.fromkeys(req.states))
        bad = [s for s in states if s not in validate.STATES][:5]
        if bad or size < 0 or req.page_token < 0:
            raise validate.InvalidInput(f"states: {', '.join(validate.STATES)}; got {bad}" if bad else
                                        "page_size and page_token: must be >= 0")
        rows = self.store.page(req.page_token, size + 1, states)
        jobs, used, next_token = [], 0, rows[size].job_id if len(rows) > size else -1
        with self.lock:
            for r in rows[:size]:
                lease = self.leases.get(r.job_id) if r.state == "running" else None
                job = pb2.JobStatus(job_id=r.job_id, state=r.state,
                                    steps_done=max(r.steps_done, self.live_steps.get(r.job_id, 0)),
                                    total_steps=r.total_steps, attempts=r.attempts, submitted_s=r.submitted_s,
                                    finished_s=r.finished_s or 0.0, log_tail=r.log_tail,
                                    batch_size=self.batch_size_of(r), durable_steps=r.steps_done,
                                    gpu_type=lease.gpu_type if lease else "",
                                    workers=",".join(dict.fromkeys(w for w, _ in lease.parts)) if lease else "")
                used += job.ByteSize() + 8
                if used > validate.MAX_STATUS_BYTES and jobs:
                    next_token = r.job_id
                    break
                jobs.append(job)
            recent = self.overheads[-200:]
            return pb2.StatusResponse(jobs=jobs, workers=len(self.workers), rounds=self.rounds, now_s=self.now(),
                                      mean_round_overhead_s=float(np.mean(recent)) if recent else 0.0,
                                      next_page_token=next_token, counts=self.store.counts(),
                                      leases=len(self.leases), gpus=len(self.gpu_owner),
                                      rpc_errors=dict(self.rpc_errors),
                                      cpu_cores=sum(w.cpu_cores for w in self.workers.values()),
                                      mem_gb=sum(w.mem_gb for w in self.workers.values()),
                                      last_round_overhead_s=recent[-1] if recent else 0.0,
                                      mean_restart_s=self.mean_restart_s(), restarts=self.restart_count,
                                      mean_lease_start_s=self.mean_lease_start_s(),
                                      lease_starts=self.lease_start_count,
                                      batch_size_switches=self.switches)

    # ---- rounds ---------------------------------------------------------------------------------------------
    def _admit(self) -> None:
        pending, self.to_admit = self.to_admit, []
        for job_id in pending:
            row = self.active.get(job_id)
            if row is None or job_id in self.core.jobs:
                continue
            job = Job(job_id=row.job_id, arrival_time_s=max(0.0, row.submitted_s - self.epoch),
                      job_type=row.job_type, scale_factor=row.scale_factor, total_steps=float(row.total_steps),
                      priority_weight=row.priority_weight, command=row.command, entity=row.entity or None,
                      mode=row.adaptation or "static", pinned_gpu_types=row.pinned_gpu_types,
                      slo_factor=row.slo_factor or None, duration_s=row.duration_s or None)
            done = max(self.live_steps.get(job_id, 0), row.steps_done)
            try:
                self.core.add_job(job, remaining_steps=max(1.0, row.total_steps - done))
                self.resume_batch_size(row)
                self._restore(row)
            except Exception as exc:                     # one bad job never stops a round
                log.warning("job %d cannot be scheduled (%s); marked failed", job_id, exc)
                self.store.set_state(job_id, "failed", time.time(), f"cannot be scheduled: {exc}")
                self.active.pop(job_id, None)
                continue
            self.credited[job_id] = done

    def _credit(self, round_end: float) -> list[int]:
        """The ending round's accounting through the core's `credit`: the time each planned lease really ran
        (none for a lease that never started) and the steps its jobs reported. Returns the jobs credited."""
        core, rows = self.core, []
        for members, w, round_start in self.plan:
            e = core.entry_of(members)
            if e is None:
                continue
            ran = 0.0
            for job_id in members:
                lease = self.leases.get(job_id)
                if lease is not None and lease.started_at is not None:
                    ran = max(ran, round_end - max(round_start, lease.started_at))
            steps = [0.0, 0.0]
            for i, job_id in enumerate(members):
                done = max(self.live_steps.get(job_id, 0), self.active[job_id].steps_done)
                steps[i] = float(done - self.credited.get(job_id, done))
                self.credited[job_id] = done
            rows.append((e, w, steps, min(max(ran, 0.0), self.round_s), members))
        if rows:
            e, w, steps, ran, members = zip(*rows)
            core.credit(np.array(e), np.array(w), np.array(steps), np.array(ran))
            for job_id in (j for m in members for j in m):
                if core.remaining[core.slot[job_id]] < 1.0:    # done only when the job says so
                    core.set_remaining(job_id, 1.0)
            return [j for m in members for j in m]
        return []

    def round(self, deadline: float) -> float:
        """Credit the ending round, admit new jobs, plan the next one and issue leases ending at `deadline`.
        Returns the deadline used: a plan that leaves its leases less than half a round moves their end to a later
        boundary of the same grid (docs/rules.md R58, #late-plan)."""
        start = time.perf_counter()
        with self.lock:
            locked_at = time.perf_counter()
            try:
                self.expire_workers()
                if self.core is None or not self.workers:
                    return deadline
                now = self.now()
                credited = self._credit(now)
                self.switch_batch_sizes(credited)                 # credit, switch, flag; then arrivals join
                self._admit()
                try:
                    plan = self.core.plan(now, servers=True)
                finally:
                    self._remember(credited)                      # as the round leaves the core (R67)
                late = self.now() + self.round_s / 2 - deadline
                if late > 0:
                    deadline += math.ceil(late / self.round_s) * self.round_s
                self.plan = self._issue(plan, deadline, now)
                self.handover_since = {k: v for k, v in self.handover_since.items() if k in self.by_lease_id}
                self.rounds += 1
                self.overheads.append(time.perf_counter() - start)
                self.events.flush()                       # under the lock: heartbeats add events too
            finally:
                # No heartbeat is heard while a round holds the lock: that time is not a worker's silence (R58).
                held = time.perf_counter() - locked_at
                for info in self.workers.values():
                    info.last_seen += held
        return deadline

    def _issue(self, plan, deadline: float, now: float) -> list:
        """Leases for the plan's assignments; returns the assignments that run (for the next credit)."""
        planned, running, self._started = set(), [], []
        gpu_type_names = self.core.gpu_types
        # Only a lease that ran in the round now ending can go on: one that ended earlier may have stopped its
        # process already (its exit report still on the way), and extending it would count that exit an attempt.
        ran = {j: self.leases[j] for ids, _, _ in self.plan for j in ids if j in self.leases}
        named = stable_parts([(a.job_ids, a.gpus) for a in plan.assignments],
                             {j: lease.parts for j, lease in ran.items()}, self.servers, self.gpu_owner)
        for a, parts in zip(plan.assignments, named):                  # rank r runs on (worker, local GPU)
            issued, speedup = False, self._planned_speedup(a)
            for job_id in a.job_ids:                                    # a pair: both members on the same GPUs
                planned.add(job_id)
                old = self.leases.get(job_id)
                partner = next((j for j in a.job_ids if j != job_id), -1)
                if old is not None and ran.get(job_id) is old and (old.parts, old.share) == (parts, (a.cpus, a.mem_gb)):
                    if old.partner != partner:                           # extension: the processes keep running
                        old.partner, old.rate_from = partner, None
                        if self.events.on:
                            self.events.add(f"pair job={job_id} lease={old.lease_id} partner={partner}")
                    old.deadline, old.speedup = deadline, speedup
                    issued = True
                    continue
                if old is not None and old.started_at is None:
                    for w in old.workers & self.workers.keys():
                        pending = self.workers[w].to_start
                        pending[:] = [m for m in pending if m.lease_id != old.lease_id]
                self._lease(self.active[job_id], parts, gpu_type_names[a.gpu_type], deadline, now,
                            partner=partner, cpus=a.cpus, mem_gb=a.mem_gb, speedup=speedup)
                issued = True
            if issued:
                running.append((a.job_ids, a.gpu_type, now))
        forgotten = []
        for job_id, lease in list(self.leases.items()):
            if job_id in planned:
                continue
            if lease.started_at is None:
                self.leases.pop(job_id)            # never launched: just forget it
            else:                                  # ends at this plan: its GPUs are the next lease's (R56)
                lease.deadline = min(lease.deadline, now)
            row = self.active.get(job_id)          # a lease that ends at this boundary: the job waits again
            if row is not None and row.state == "running":
                row.state = "queued"
                forgotten.append(job_id)
        self.store.set_states(self._started, "running")          # one transaction per round
        self.store.set_states(forgotten, "queued")
        return running

    def emulation(self, job_id: int, done_steps: float, new_lease: bool) -> tuple[float, float]:
        """An elastic job's rate and restore for emulated workers this round, from the measured traces (R86a);
        (0, 0) for other jobs: an emulated worker runs them at its own rate."""
        if self.pipeline.decide.kind != "elastic" or self.core is None:
            return 0.0, 0.0
        return self.core.rounds.emulation(job_id, done_steps, new_lease)

    def _planned_speedup(self, a) -> float:
        """What a CPU/memory share adds to a job's table rate in the plan (TUNE's ideal share; docs/rules.md
        R52). Its measured rate is divided by it, so that the allocation keeps seeing the rate at the table's
        GPU-proportional share and does not count the speedup twice."""
        core = self.core
        if core.resources is None or len(a.job_ids) != 1:
            return 1.0
        base = core.tput[core.slot[a.job_ids[0]], a.gpu_type]
        return float(a.throughputs[0] / base) if base > 0 and a.throughputs[0] > 0 else 1.0

    def _lease(self, row: JobRow, parts, gpu_type: str, deadline: float, issued_at: float, partner: int,
               cpus: float = 0.0, mem_gb: float = 0.0, speedup: float = 1.0) -> None:
        """One process per part (worker, local GPU); each rank gets the per-GPU CPU and memory share, if any."""
        old = self.leases.get(row.job_id)
        lease = LeaseInfo(secrets.token_hex(6), row.job_id, secrets.token_urlsafe(24), parts, gpu_type, deadline,
                          partner, issued_at=issued_at, share=(cpus, mem_gb), speedup=speedup,
                          resumed=row.steps_done > 0 or row.job_id in self.running_on,
                          previous=old if old is None or old.started_at is not None else old.previous)
        recent = self.job_tokens.setdefault(row.job_id, [])
        while len(recent) >= LEASE_TOKENS_KEPT:
            self.by_lease_id.pop(self.tokens.pop(recent.pop(0)).lease_id, None)
        recent.append(lease.token)
        self.tokens[lease.token] = self.by_lease_id[lease.lease_id] = self.leases[row.job_id] = lease
        rate, delay = self.emulation(row.job_id, row.steps_done, True)
        for rank, (worker_id, local) in enumerate(parts):
            self.workers[worker_id].to_start.append(pb2.Lease(
                lease_id=lease.lease_id, job_id=row.job_id, job_type=row.job_type, command=row.command,
                local_gpus=[local], deadline_s=deadline, total_steps=row.total_steps, steps_done=row.steps_done,
                rank=rank, world_size=len(parts), slowdown=self.workers[worker_id].slowdown,
                lease_token=lease.token, cpu_cores=cpus, mem_gb=mem_gb, batch_size=self.batch_size_of(row),
                emulated_steps_per_s=rate, emulated_delay_s=delay))
        if self.events.on:
            self.events.add(f"lease job={row.job_id} lease={lease.lease_id} gpu={gpu_type} ranks={len(parts)} "
                            f"cpus={cpus:g} mem_gb={mem_gb:g} until={deadline:.1f} partner={partner}")
        if row.state != "running":
            row.state = "running"
            self._started.append(row.job_id)
