"""What workers ask of the scheduler: to register (their GPUs, CPU cores and memory become the core's cluster), and
their heartbeats, which list the processes they run and take the leases handed out and the stops (docs/rules.md
R56: a lease waits for what still runs before it on its GPUs)."""

from __future__ import annotations

import logging
import secrets
import time
import uuid

from hetsched.core.registry import build_scheduler
from hetsched.errors import HetschedError
from hetsched.model.cluster import ClusterSpec, Server
from hetsched.model.servers import Servers

from . import validate
from .records import Denied, WorkerInfo
from .stubs import pb2

log = logging.getLogger(__name__.rpartition(".")[0] + ".state")
HANDOVER_S = 30.0              # a lease waits this long for an ended lease's process on its GPU, then it is stopped


class WorkerCalls:
    """Mixin of `RuntimeState` (its `lock`, `workers`, `leases`, `by_lease_id`, `running_on`, `active`, `core`)."""

    def register(self, gpu_type: str, num_gpus: int, name: str, cpu_cores: int = 0,
                 mem_gb: float = 0.0) -> tuple[str, str]:
        validate.worker_fields(self.table, gpu_type=gpu_type, num_gpus=num_gpus, name=name, cpu_cores=cpu_cores,
                               mem_gb=mem_gb)
        with self.lock:
            worker_id = f"{self.incarnation}-{len(self.workers)}-{uuid.uuid4().hex[:6]}"
            session = secrets.token_urlsafe(24)
            self.workers[worker_id] = WorkerInfo(worker_id, session, gpu_type, num_gpus,
                                                 self.slowdowns.get(gpu_type, 1.0), time.time(), cpu_cores, mem_gb)
            try:
                self._cluster_changed()
            except HetschedError as exc:              # e.g. a second GPU type, or no CPU/memory, for server rounds
                self.workers.pop(worker_id)
                self._cluster_changed()
                raise validate.InvalidInput(f"this worker cannot join a {self.policy_name!r} cluster: {exc}") \
                    from None
            log.info("register worker=%s name=%r gpus=%d gpu_type=%s cpu_cores=%d mem_gb=%.1f", worker_id, name,
                     num_gpus, gpu_type, cpu_cores, mem_gb)
            return worker_id, session

    def worker(self, worker_id: str, session: str) -> WorkerInfo | None:
        """The registered worker, if the session proves the caller is it (None: unknown, register again)."""
        info = self.workers.get(worker_id)
        if info is not None and not secrets.compare_digest(info.session, session):
            raise Denied(f"worker {worker_id}: wrong session")
        return info

    @staticmethod
    def _server(info: WorkerInfo) -> Server:
        """A worker's server shape: its GPUs, and its CPU cores and memory when it reports them."""
        return Server(info.gpu_type, info.num_gpus, info.cpu_cores or None, info.mem_gb or None)

    def _cluster_changed(self) -> None:
        """Workers joined or left: new capacities for the same core (jobs and time received stay)."""
        order = sorted(self.workers)
        self.gpu_owner, self.servers = {}, None
        if not order:
            return
        cluster = ClusterSpec.from_servers([self._server(self.workers[w]) for w in order])
        # A plan names GPUs in the cluster's one numbering (ClusterSpec.gpu_ids): each id is a worker's local GPU.
        self.gpu_owner = {g: (w, local) for w, ids in zip(order, cluster.gpu_ids()) for local, g in enumerate(ids)}
        self.servers = Servers.of(cluster)                         # the workers' free GPUs when leases are named
        self.peak_gpus = max(self.peak_gpus, cluster.num_gpus)
        if self.core is None:
            self.core = build_scheduler(self.pipeline, cluster, self.table, seed=self.seed,
                                        gpu_types=tuple(self.table.gpu_types), entity_weights=self.entity_weights)
            self._restore_core()                                   # learnt before a restart (R67)
        else:
            self.core.set_cluster(cluster)

    def heartbeat(self, req) -> pb2.HeartbeatResponse:
        with self.lock:
            info = self.worker(req.worker_id, req.session)
            if info is None:
                return pb2.HeartbeatResponse(known=False, now_s=self.now())
            if len(req.jobs) > validate.MAX_JOBS_PER_HEARTBEAT:
                raise validate.InvalidInput(f"jobs: at most {validate.MAX_JOBS_PER_HEARTBEAT} per heartbeat")
            info.last_seen = time.time()
            now = self.now()
            running = {j.job_id: j.lease_id for j in req.jobs if j.running}
            for job_id in info.running.keys() - running.keys():
                self._not_running(job_id, info.worker_id)
                lease = self.leases.get(job_id)
                if lease is not None and lease.lease_id == info.running[job_id]:
                    info.vanished.setdefault(job_id, (lease.lease_id, now))    # until its exit report comes
            for job_id in running.keys() - info.running.keys():
                self.running_on.setdefault(job_id, set()).add(info.worker_id)
            for job_id, lease_id in running.items():         # listed under the lease it waited for: there
                if info.vanished.get(job_id, ("",))[0] == lease_id:
                    info.vanished.pop(job_id)
            info.running = running
            self._lost_exits(info, now)
            start, info.to_start = self._startable(info, info.to_start, now)
            stop, info.to_stop = info.to_stop, []
            # A process without a current lease exits by itself at its next lease update; kill it if it hangs.
            grace = self.round_s + 3.0
            for job_id, lease_id in info.running.items():
                lease = self.leases.get(job_id)
                if lease is not None and lease.lease_id == lease_id and info.worker_id in lease.workers:
                    info.orphans.pop(job_id, None)
                    overdue = now > lease.deadline + grace
                else:
                    overdue = now - info.orphans.setdefault(job_id, now) > grace
                if overdue and job_id not in stop:
                    stop.append(job_id)
            for msg in start:
                lease = self.leases.get(msg.job_id)
                if lease is not None and lease.lease_id == msg.lease_id:
                    if info.running.get(msg.job_id) != msg.lease_id:      # (another rank of it may be listed)
                        info.vanished[msg.job_id] = (msg.lease_id, now)    # until the worker lists it
                    if lease.started_at is None:
                        lease.started_at = now
                        if self.events.on:
                            self.events.add(f"start job={msg.job_id} lease={msg.lease_id} worker={info.worker_id}")
            self.events.flush()
            return pb2.HeartbeatResponse(known=True, start=start, stop=stop, now_s=now)

    def _startable(self, info: WorkerInfo, pending: list, now: float) -> tuple[list, list]:
        """Leases to hand out now, and those kept until what still runs before them has exited: their job's older
        processes (a lease that ended at this boundary, checkpointing on its way out), or another job's process
        whose lease ended on the same GPU of this worker (two jobs' processes were alive on one GPU for up to 11 s
        at a hand-over). A lease handed out starts from the durable progress of that moment, which includes the
        older processes' last checkpoint. A process that holds a waiting lease's GPU for longer than HANDOVER_S
        is stopped (docs/rules.md R56)."""
        start, keep = [], []
        for msg in pending:
            older = [w for w in self.running_on.get(msg.job_id, ())
                     if w in self.workers and self.workers[w].running.get(msg.job_id) != msg.lease_id]
            holders = self._holding_gpus(info, msg, now)
            if older or holders:
                keep.append(msg)
                waiting = self.handover_since.setdefault(msg.lease_id, now)
                if holders and now - waiting > HANDOVER_S:
                    info.to_stop.extend(j for j in holders if j not in info.to_stop)
                continue
            self.handover_since.pop(msg.lease_id, None)
            row = self.active.get(msg.job_id)
            if row is not None:
                msg.steps_done, msg.total_steps, msg.batch_size = row.steps_done, row.total_steps, \
                    self.batch_size_of(row)
            start.append(msg)
        return start, keep

    def _holding_gpus(self, info: WorkerInfo, msg, now: float) -> list[int]:
        """Other jobs whose process still runs on `info`'s worker, on one of `msg`'s GPUs, under a lease that has
        ended (a co-located partner's current lease shares the GPU by design)."""
        holders = []
        for job_id, lease_id in info.running.items():
            lease = self.by_lease_id.get(lease_id)
            if job_id == msg.job_id or lease is None:
                continue
            ended = self.leases.get(job_id) is not lease or lease.deadline <= now
            if ended and any(w == info.worker_id and g in msg.local_gpus for w, g in lease.parts):
                holders.append(job_id)
        return holders
