"""The scheduler server: the same `Scheduler` core as the simulator, driven by the wall clock over gRPC.

Rounds: shortly before each round boundary the server credits the round that is ending, admits submitted
jobs, plans the next round with the core and turns the plan into leases (job, worker, GPUs, deadline). A job
placed on the same worker and GPUs again keeps running (lease extension); otherwise its lease lapses at the
deadline, the training process checkpoints and exits, and the new lease starts once the old process is gone.
Job state lives in SQLite (`Store`); a restarted server reloads it and tells re-registering workers to drop
what they ran, so jobs resume from their last checkpoint.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from concurrent import futures
from dataclasses import dataclass, field

import grpc
import numpy as np

from hetsched.cluster import ClusterSpec, Server
from hetsched.core import Scheduler
from hetsched.jobs import Job
from hetsched.errors import HetschedError
from hetsched.policies import make_policy
from hetsched.throughputs import JobKey, ThroughputTable, load_throughputs

from .auth import TokenInterceptor
from .store import Store
from .stubs import pb2, pb2_grpc

log = logging.getLogger(__name__)
EMA_ALPHA = 0.5


@dataclass
class WorkerInfo:
    worker_id: str
    gpu_type: str
    num_gpus: int
    slowdown: float
    last_seen: float
    to_start: list = field(default_factory=list)     # Lease messages to hand out at the next heartbeat
    to_stop: list = field(default_factory=list)      # job ids to kill at the next heartbeat
    running: dict = field(default_factory=dict)      # job id -> lease id, as the worker last reported
    orphans: dict = field(default_factory=dict)      # job id -> when it was first seen running without a lease


@dataclass
class LeaseInfo:
    lease_id: str
    job_id: int
    worker_id: str
    local_gpus: tuple[int, ...]
    deadline: float
    started: bool = False


class RuntimeState:
    """Everything the server knows, guarded by one lock; RPC handlers and the round loop share it."""

    def __init__(self, store: Store, policy: str, round_s: float, throughputs: ThroughputTable, seed: int = 0,
                 worker_timeout_s: float = 5.0, max_attempts: int = 3, slowdowns: dict[str, float] | None = None):
        self.lock = threading.RLock()
        probe = make_policy(policy)                      # unknown names fail here, before any worker joins
        if getattr(probe, "resource_aware", False) or getattr(probe, "resource_mechanism", None):
            raise HetschedError(f"policy {policy!r} places CPU cores and memory, but workers do not report them "
                                f"yet: the runtime runs Gavel's policies (Synergy's run in the simulator)")
        self.store, self.policy_name, self.round_s, self.table = store, policy, round_s, throughputs
        self.seed, self.worker_timeout_s, self.max_attempts = seed, worker_timeout_s, max_attempts
        self.slowdowns = slowdowns or {}
        self.epoch = float(store.meta("epoch") or time.time())
        store.set_meta("epoch", repr(self.epoch))
        self.incarnation = uuid.uuid4().hex[:8]           # worker ids from an earlier server are unknown
        self.workers: dict[str, WorkerInfo] = {}
        self.leases: dict[int, LeaseInfo] = {}
        self.live_steps: dict[int, int] = {}
        self.finished_flag: set[int] = set()
        self.core: Scheduler | None = None
        self.plan = None
        self.rounds = 0
        self.overheads: list[float] = []
        # A restart: whatever was running is queued again and resumes from its durable progress.
        for row in store.jobs(("running",)):
            store.set_state(row.job_id, "queued")

    def now(self) -> float:
        return time.time() - self.epoch

    # ---- cluster ------------------------------------------------------------------------------------
    def _cluster(self) -> tuple[ClusterSpec | None, list[str]]:
        order = sorted(self.workers)
        servers = [Server(self.workers[w].gpu_type, self.workers[w].num_gpus) for w in order]
        return (ClusterSpec.from_servers(servers) if servers else None), order

    def rebuild_core(self) -> None:
        """Workers joined or left: a new core over the live workers, with every active job re-added."""
        cluster, self.server_order = self._cluster()
        self.core = None
        if cluster is None:
            return
        # No recompute gate on the wall clock (Gavel's physical mode recomputes whenever a reset is pending).
        policy = make_policy(self.policy_name)
        core = getattr(policy, "core_class", None) or Scheduler      # Shockwave's planner is a core of its own
        self.core = core(cluster, policy, self.table, round_s=self.round_s, min_reset_interval_s=0.0, seed=self.seed)
        self.gpu_owner = {}
        # Map core GPU ids to (worker, local index): the placer numbers GPUs server by server, in spec order.
        next_id = 0
        for w in self.server_order:
            info = self.workers[w]
            for local in range(info.num_gpus):
                self.gpu_owner[next_id] = (w, local)
                next_id += 1
        self.plan = None
        for row in self.store.jobs(("queued", "running")):
            self._admit(row)

    def _admit(self, row) -> None:
        if self.core is None or row.job_id in self.core.jobs:
            return
        job = Job(job_id=row.job_id, arrival_time_s=max(0.0, row.submitted_s - self.epoch), job_type=row.job_type,
                  scale_factor=row.scale_factor, total_steps=float(row.total_steps),
                  priority_weight=row.priority_weight, command=row.command)
        if JobKey(job.job_type, job.scale_factor) not in self.table:
            log.warning("job %d: unknown job type %r; it is scheduled with throughput 1 until measured",
                        job.job_id, job.job_type)
        done = max(self.live_steps.get(row.job_id, 0), row.steps_done)
        self.core.add_job(job, remaining_steps=max(1.0, row.total_steps - done))

    # ---- worker RPCs --------------------------------------------------------------------------------
    def register(self, gpu_type: str, num_gpus: int) -> str:
        with self.lock:
            worker_id = f"{self.incarnation}-{len(self.workers)}-{uuid.uuid4().hex[:6]}"
            self.workers[worker_id] = WorkerInfo(worker_id, gpu_type, num_gpus, self.slowdowns.get(gpu_type, 1.0),
                                                 time.time())
            self.rebuild_core()
            return worker_id

    def heartbeat(self, worker_id: str, jobs) -> pb2.HeartbeatResponse:
        with self.lock:
            info = self.workers.get(worker_id)
            if info is None:
                return pb2.HeartbeatResponse(known=False, now_s=self.now())
            info.last_seen = time.time()
            info.running = {j.job_id: j.lease_id for j in jobs if j.running}
            start, info.to_start = info.to_start, []
            stop, info.to_stop = info.to_stop, []
            # A process without a current lease exits by itself at its next lease update; kill it if it hangs.
            now, grace = self.now(), self.round_s + 3.0
            for job_id, lease_id in info.running.items():
                lease = self.leases.get(job_id)
                if lease is not None and lease.lease_id == lease_id and lease.worker_id == worker_id:
                    info.orphans.pop(job_id, None)
                    overdue = now > lease.deadline + grace
                else:
                    overdue = now - info.orphans.setdefault(job_id, now) > grace
                if overdue and job_id not in stop:
                    stop.append(job_id)
            for msg in start:
                lease = self.leases.get(msg.job_id)
                if lease is not None and lease.lease_id == msg.lease_id:
                    lease.started = True
            return pb2.HeartbeatResponse(known=True, start=start, stop=stop, now_s=self.now())

    def report_exit(self, req) -> None:
        with self.lock:
            row = self.store.job(req.job_id)
            if row is None or row.state in ("completed", "failed"):
                return
            info = self.workers.get(req.worker_id)
            if info is not None:
                info.running.pop(req.job_id, None)
            lease = self.leases.get(req.job_id)
            if lease is not None and lease.lease_id == req.lease_id:
                self.leases.pop(req.job_id)
            if req.job_id in self.finished_flag and req.exit_code == 0:
                self._finish(req.job_id, "completed", req.log_tail)
            elif req.exit_code != 0:
                attempts = row.attempts + 1
                if attempts >= self.max_attempts:
                    log.warning("job %d failed %d times; giving up", req.job_id, attempts)
                    self.store.set_state(req.job_id, "failed", time.time(), req.log_tail[-4000:], attempts_delta=1)
                    self._drop(req.job_id)
                else:
                    self.store.set_state(req.job_id, "queued", log_tail=req.log_tail[-4000:], attempts_delta=1)

    def update_lease(self, req) -> pb2.UpdateLeaseResponse:
        with self.lock:
            now = self.now()
            self.live_steps[req.job_id] = max(self.live_steps.get(req.job_id, 0), int(req.steps_done))
            self.store.set_progress(req.job_id, int(req.steps_checkpointed))
            lease = self.leases.get(req.job_id)
            current = lease is not None and lease.lease_id == req.lease_id
            if current and req.seconds > 0 and req.steps_done > 0:
                self._measure(req.job_id, lease, req)
            if req.finished:
                self.finished_flag.add(req.job_id)
                self.store.set_progress(req.job_id, int(req.steps_checkpointed))
                return pb2.UpdateLeaseResponse(keep_running=False, deadline_s=now, now_s=now)
            if current and now < lease.deadline:
                return pb2.UpdateLeaseResponse(keep_running=True, deadline_s=lease.deadline, now_s=now)
            return pb2.UpdateLeaseResponse(keep_running=False, deadline_s=now, now_s=now)

    def _measure(self, job_id: int, lease: LeaseInfo, req) -> None:
        """Measured steps/s feed the core's throughputs (EMA), so allocations follow reality."""
        core = self.core
        if core is None or job_id not in core.slot:
            return
        gpu = self.workers[lease.worker_id].gpu_type if lease.worker_id in self.workers else None
        if gpu not in core.gpu_types:
            return
        rate = req.steps_done / max(req.seconds, 1e-9)
        col, slot = core.gpu_types.index(gpu), core.slot[job_id]
        old = core.tput[slot, col]
        core.tput[slot, col] = rate if old <= 0 else EMA_ALPHA * rate + (1 - EMA_ALPHA) * old

    def _finish(self, job_id: int, state: str, log_tail: str = "") -> None:
        row = self.store.job(job_id)
        self.store.set_progress(job_id, row.total_steps if state == "completed" else row.steps_done)
        self.store.set_state(job_id, state, time.time(), log_tail[-4000:])
        self._drop(job_id)

    def _drop(self, job_id: int) -> None:
        if self.core is not None and job_id in self.core.jobs:
            self.core.remove_job(job_id)
        self.leases.pop(job_id, None)

    # ---- rounds -------------------------------------------------------------------------------------
    def expire_workers(self) -> None:
        dead = [w for w, info in self.workers.items() if time.time() - info.last_seen > self.worker_timeout_s]
        for w in dead:
            log.warning("worker %s stopped answering; re-queueing its jobs", w)
            self.workers.pop(w)
            for job_id, lease in list(self.leases.items()):
                if lease.worker_id == w:
                    self.leases.pop(job_id)
                    self.live_steps.pop(job_id, None)      # progress since the last checkpoint is lost
                    self.store.set_state(job_id, "queued")
        if dead:
            self.rebuild_core()

    def round(self, deadline: float) -> None:
        """Credit the ending round, admit new jobs, plan the next one and issue leases ending at `deadline`."""
        start = time.perf_counter()
        with self.lock:
            self.expire_workers()
            core = self.core
            if core is None:
                return
            for row in self.store.jobs(("queued", "running")):
                self._admit(row)
            if self.plan is not None and self.plan[0] is core:
                # The ending round's accounting (what the simulator's credit does), by job ids: entries may
                # have moved since the plan was made.
                for members, w in self.plan[1]:
                    e = core._entry_index.get(members)
                    if e is not None:
                        core.t[e, w] += self.round_s
                    core.S[w] += self.round_s
                if hasattr(core, "round_done"):
                    core.round_done()
            for job_id, slot in core.slot.items():
                row_total = core.jobs[job_id].total_steps
                core.remaining[slot] = max(1.0, row_total - self.live_steps.get(job_id, 0))
            now = self.now()
            plan = core.plan(now)
            self.plan = (core, [(core.entries[e], int(w)) for e, w in zip(plan.entry, plan.gpu_type)])
            self._issue(plan, deadline)
            self.rounds += 1
        self.overheads.append(time.perf_counter() - start)

    def _issue(self, plan, deadline: float) -> None:
        planned = set()
        for a in plan.assignments:
            job_id = a.job_ids[0]                 # pairs are not co-located by the runtime: first member only
            planned.add(job_id)
            owners = [self.gpu_owner[g] for g in a.gpus]
            worker_id = owners[0][0]
            local = tuple(loc for w, loc in owners if w == worker_id)
            old = self.leases.get(job_id)
            if old is not None and old.worker_id == worker_id and old.local_gpus == local:
                old.deadline = deadline            # lease extension: same GPUs, the process keeps running
                continue
            row = self.store.job(job_id)
            lease = LeaseInfo(uuid.uuid4().hex[:12], job_id, worker_id, local, deadline)
            msg = pb2.Lease(lease_id=lease.lease_id, job_id=job_id, job_type=row.job_type, command=row.command,
                            local_gpus=list(local), deadline_s=deadline, total_steps=row.total_steps,
                            steps_done=row.steps_done, rank=0, world_size=1,
                            slowdown=self.workers[worker_id].slowdown)
            busy_elsewhere = any(job_id in info.running for info in self.workers.values())
            if old is not None and busy_elsewhere:
                continue                           # start once the old process has checkpointed and exited
            if old is not None and not old.started and old.worker_id in self.workers:
                pending = self.workers[old.worker_id].to_start
                pending[:] = [m for m in pending if m.lease_id != old.lease_id]
            self.leases[job_id] = lease
            self.workers[worker_id].to_start.append(msg)
            self.store.set_state(job_id, "running")
        for job_id, lease in list(self.leases.items()):
            if job_id not in planned and not lease.started:
                self.leases.pop(job_id)            # never launched: just forget it

    def status(self) -> pb2.StatusResponse:
        with self.lock:
            jobs = [pb2.JobStatus(job_id=r.job_id, state=r.state, steps_done=max(r.steps_done,
                                                                                  self.live_steps.get(r.job_id, 0)),
                                  total_steps=r.total_steps, attempts=r.attempts, submitted_s=r.submitted_s,
                                  finished_s=r.finished_s or 0.0, log_tail=r.log_tail)
                    for r in self.store.jobs()]
            recent = self.overheads[-200:]
            return pb2.StatusResponse(jobs=jobs, workers=len(self.workers), rounds=self.rounds, now_s=self.now(),
                                      mean_round_overhead_s=float(np.mean(recent)) if recent else 0.0)


class Servicer(pb2_grpc.SchedulerServicer):
    def __init__(self, state: RuntimeState):
        self.state = state

    def RegisterWorker(self, request, context):
        worker_id = self.state.register(request.gpu_type, max(1, request.num_gpus))
        return pb2.RegisterWorkerResponse(worker_id=worker_id, round_s=self.state.round_s)

    def Heartbeat(self, request, context):
        return self.state.heartbeat(request.worker_id, request.jobs)

    def ReportExit(self, request, context):
        self.state.report_exit(request)
        return pb2.Ack()

    def UpdateLease(self, request, context):
        return self.state.update_lease(request)

    def SubmitJob(self, request, context):
        s = self.state
        with s.lock:
            job_id = s.store.add_job(request.job_type, max(1, request.scale_factor), request.total_steps,
                                     request.priority_weight or 1.0, request.command, time.time(),
                                     request.job_id if request.job_id >= 0 else None)
            if s.core is not None:
                s.core.need_update = True
        return pb2.SubmitJobResponse(job_id=job_id)

    def GetStatus(self, request, context):
        return self.state.status()


class SchedulerServer:
    """gRPC server + round loop. `start()` returns the bound port; `stop()` ends both."""

    def __init__(self, state_dir: str, token: str, policy: str = "max_min_fairness_perf", round_s: float = 360.0,
                 host: str = "127.0.0.1", port: int = 0, throughputs: str = "gavel_simulation", seed: int = 0,
                 worker_timeout_s: float = 5.0, max_attempts: int = 3, slowdowns: dict[str, float] | None = None,
                 tls: tuple[str, str] | None = None):
        self.store = Store(f"{state_dir}/scheduler.sqlite")
        self.state = RuntimeState(self.store, policy, round_s, load_throughputs(throughputs), seed,
                                  worker_timeout_s, max_attempts, slowdowns)
        self.host, self.port, self.token, self.tls = host, port, token, tls
        self._stop = threading.Event()
        self._grpc = None
        self._loop = None

    def start(self) -> int:
        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=32),
                                 interceptors=[TokenInterceptor(self.token)])
        pb2_grpc.add_SchedulerServicer_to_server(Servicer(self.state), self._grpc)
        address = f"{self.host}:{self.port}"
        if self.tls:
            key, cert = (open(p, "rb").read() for p in self.tls)
            self.port = self._grpc.add_secure_port(address, grpc.ssl_server_credentials([(key, cert)]))
        else:
            self.port = self._grpc.add_insecure_port(address)
        self._grpc.start()
        self._loop = threading.Thread(target=self._rounds, name="rounds", daemon=True)
        self._loop.start()
        return self.port

    def _rounds(self) -> None:
        round_s = self.state.round_s
        lead = min(0.5, round_s / 4)             # plan the next round a little before this one ends
        boundary = time.time() + round_s
        self.state.round(boundary - self.state.epoch)
        while not self._stop.wait(max(0.0, boundary - lead - time.time())):
            try:
                self.state.round(boundary + round_s - self.state.epoch)
            except Exception:
                log.exception("round failed; the next round retries")
            boundary += round_s

    def stop(self) -> None:
        self._stop.set()
        if self._grpc is not None:
            self._grpc.stop(grace=1).wait(5)
        if self._loop is not None:
            self._loop.join(timeout=5)
        self.store.close()
