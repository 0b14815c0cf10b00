"""How a lease and a job end (docs/rules.md#runtime-attempts): an exit report, an exit report that never came, a
worker that stopped answering, a cancel. Every end of a launched process that was not a clean stop counts as an
attempt (`--max-attempts`)."""

from __future__ import annotations

import logging
import time

from .logs import EventLog
from .records import Denied, LeaseInfo, NotFound, WorkerInfo
from .store import JobRow

log = logging.getLogger(EventLog.NAME)     # one key=value line per job event

#: Exit code recorded for a process whose worker stopped listing it without ever reporting its exit.
LOST_EXIT = -1


class Endings:
    """Mixin of `RuntimeState` (its `lock`, `workers`, `leases`, `by_lease_id`, `active`, `store`, `core`)."""

    def report_exit(self, req) -> None:
        with self.lock:
            info = self.worker(req.worker_id, req.session)
            if info is None:
                raise Denied(f"worker {req.worker_id!r} is not registered")
            lease = self.by_lease_id.get(req.lease_id)
            if lease is not None and (lease.job_id != req.job_id or info.worker_id not in lease.workers):
                raise Denied(f"lease {req.lease_id!r} of job {req.job_id} was not issued to this worker")
            self._exited(info, req.job_id, lease, req.exit_code, req.log_tail[-4000:], req.rank)

    def _exited(self, info: WorkerInfo, job_id: int, lease: LeaseInfo | None, code: int, tail: str,
                rank: int = 0) -> None:
        """A process of `lease` on `info`'s worker is gone with `code`. Rank 0 reports the job's progress and
        its end; another rank's clean exit decides nothing (it stops with rank 0, and its exit report could come
        before rank 0's last update: the finished job's attempt was counted as failed and the job ran again)."""
        info.running.pop(job_id, None)
        info.vanished.pop(job_id, None)
        self._not_running(job_id, info.worker_id)
        row = self.active.get(job_id)
        if lease is None or row is None or (rank > 0 and code == 0):   # a finished job's last ranks, a cancelled
            return                                                         # job, or a rank that stopped cleanly
        current = self.leases.get(job_id) is lease
        if current:
            self.leases.pop(job_id)
        if current and (code != 0 or job_id in self.finished_flag):
            self._stop_ranks(lease, info.worker_id)             # a clean stop: the other ranks exit by themselves
        if job_id in self.finished_flag and code == 0:
            log.info("finish job=%d lease=%s", job_id, lease.lease_id)
            self._finish(job_id, "completed", tail)
        elif code != 0:
            self._attempt_failed(lease, row, f"exit code {code}", tail)
        elif current and not lease.told_stop and self.now() < lease.deadline:
            done = max(self.live_steps.get(job_id, 0), row.steps_done)
            self._attempt_failed(lease, row, f"exited with code 0 after {done} of {row.total_steps} steps "
                                             f"while its lease was running", tail)
        elif current and row.state == "running":           # a lease that ended: waiting for the next one
            row.state = "queued"
            self.store.set_state(job_id, "queued")

    def _lost_exits(self, info: WorkerInfo, now: float) -> None:
        """Processes of a current lease that `info`'s worker stopped listing (or never listed after the start was
        handed out) and whose exit report has not come within the worker timeout: ended, the report lost."""
        for job_id, (lease_id, since) in list(info.vanished.items()):
            lease = self.leases.get(job_id)
            if lease is None or lease.lease_id != lease_id:
                info.vanished.pop(job_id)
            elif now - since > self.worker_timeout_s:
                log.warning("lost job=%d lease=%s worker=%s: no process and no exit report for %.0f s",
                            job_id, lease_id, info.worker_id, now - since)
                clean = lease.told_stop or now >= lease.deadline
                self._exited(info, job_id, lease, 0 if clean else LOST_EXIT,
                             "[hetsched] its worker stopped listing the process; the exit report never came")

    def _not_running(self, job_id: int, worker_id: str) -> None:
        on = self.running_on.get(job_id)
        if on is not None:
            on.discard(worker_id)
            if not on:
                self.running_on.pop(job_id)

    def _stop_ranks(self, lease: LeaseInfo, except_worker: str | None) -> None:
        for w in lease.workers - {except_worker}:
            if w in self.workers:
                self.workers[w].to_stop.append(lease.job_id)

    def _attempt_failed(self, lease: LeaseInfo, row: JobRow, reason: str, tail: str) -> None:
        if lease.failed:
            return                                        # one attempt, however many ranks report it
        lease.failed = True
        row.attempts += 1
        tail = f"{tail}\n[hetsched] attempt {row.attempts} failed: {reason}"[-4000:]
        if row.attempts >= self.max_attempts:
            log.warning("fail job=%d attempts=%d reason=%s; giving up", row.job_id, row.attempts, reason)
            self.store.set_state(row.job_id, "failed", time.time(), tail, attempts_delta=1)
            self._drop(row.job_id)
        else:
            log.info("retry job=%d attempt=%d reason=%s", row.job_id, row.attempts, reason)
            self.store.set_state(row.job_id, "queued", log_tail=tail, attempts_delta=1)
            row.state = "queued"

    def cancel(self, job_id: int) -> str:
        """Stop a queued or running job for good: its processes are killed, its state becomes `cancelled`.
        Returns the state it had; a finished job keeps its state (raises NotFound for an unknown id)."""
        with self.lock:
            row = self.active.get(job_id)
            if row is None:
                stored = self.store.job(job_id)
                if stored is None:
                    raise NotFound(f"job {job_id} does not exist")
                return stored.state
            lease = self.leases.get(job_id)
            for w in (lease.workers if lease is not None else set()) | self.running_on.get(job_id, set()):
                if w in self.workers:
                    self.workers[w].to_stop.append(job_id)
            log.info("cancel job=%d state=%s", job_id, row.state)
            self._finish(job_id, "cancelled", "[hetsched] cancelled")
            return row.state

    def _finish(self, job_id: int, state: str, log_tail: str = "") -> None:
        row = self.active[job_id]
        self.store.set_progress(job_id, row.total_steps if state == "completed" else row.steps_done)
        self.store.set_state(job_id, state, time.time(), log_tail[-4000:])
        self._drop(job_id)

    def _drop(self, job_id: int) -> None:
        if self.core is not None and job_id in self.core.jobs:
            self.core.remove_job(job_id)
        self.leases.pop(job_id, None)
        self.active.pop(job_id, None)
        self.live_steps.pop(job_id, None)
        self.credited.pop(job_id, None)
        self.finished_flag.discard(job_id)
        self.stored_steps.pop(job_id, None)
        for token in self.job_tokens.pop(job_id, []):
            self.by_lease_id.pop(self.tokens.pop(token).lease_id, None)
        if self.checkpoints is not None:
            self.checkpoints.drop(job_id)

    def expire_workers(self) -> None:
        """Workers silent for longer than the timeout are dropped; a lease that had started on one counts as a
        failed attempt (its progress since the last checkpoint is lost), one never started is just re-queued."""
        dead = [w for w, info in self.workers.items() if time.time() - info.last_seen > self.worker_timeout_s]
        for w in dead:
            log.warning("expire worker=%s: silent for more than %.1f s; re-queueing its jobs", w,
                        self.worker_timeout_s)
            for job_id in self.workers.pop(w).running:
                self._not_running(job_id, w)
            for job_id, lease in list(self.leases.items()):
                if w in lease.workers:
                    self.leases.pop(job_id)
                    self.live_steps.pop(job_id, None)      # progress since the last checkpoint is lost
                    self._stop_ranks(lease, w)
                    row = self.active.get(job_id)
                    if row is None:
                        continue
                    if lease.started_at is not None:
                        self._attempt_failed(lease, row, f"its worker {w} stopped answering", "")
                    if job_id in self.active:
                        row.state = "queued"
                        self.store.set_state(job_id, "queued")
        if dead:
            self._cluster_changed()
