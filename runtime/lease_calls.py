"""What a job may ask of the scheduler with its lease token: report progress, meet its other ranks, and move its
checkpoints. Only the job's current lease stores a checkpoint (and the lease before it, on its way out, until the
current one starts); each upload is received into a file of its own and committed only while that holds and no
later step is stored."""

from __future__ import annotations

from . import validate
from .records import Denied, LeaseInfo
from .stubs import pb2


class LeaseCalls:
    """Mixin of `RuntimeState` (its `lock`, `tokens`, `leases`, `active`, `store`, `checkpoints`, `core`)."""

    def lease_for(self, token: str, job_id: int, lease_id: str) -> LeaseInfo:
        lease = self.tokens.get(token)
        if lease is None or lease.job_id != job_id or lease.lease_id != lease_id:
            raise Denied(f"this credential does not hold lease {lease_id!r} of job {job_id}")
        return lease

    def update_lease(self, req, token: str) -> pb2.UpdateLeaseResponse:
        with self.lock:
            lease = self.lease_for(token, req.job_id, req.lease_id)
            now = self.now()
            row = self.active.get(req.job_id)
            if row is None:
                return pb2.UpdateLeaseResponse(keep_running=False, deadline_s=now, now_s=now)
            validate.progress_fields(steps_done=req.steps_done, steps_checkpointed=req.steps_checkpointed,
                                     seconds=req.seconds, steps_run=req.steps_run,
                                     total_steps=self.total_at(row, req.batch_size))
            done = self.counted_now(row, req.steps_done, req.batch_size)      # at another batch size: re-counted
            durable = self.counted_now(row, req.steps_checkpointed, req.batch_size)
            self.live_steps[req.job_id] = max(self.live_steps.get(req.job_id, 0), done)
            if durable > row.steps_done and self._may_store(lease):     # a stale lease's word moves nothing
                row.steps_done = durable
                self.store.set_progress(req.job_id, row.steps_done)
            current = self.leases.get(req.job_id) is lease
            if req.steps_run > 0 and not lease.stepped:
                self.first_steps(lease, now, req.seconds)
            same_unit = not req.batch_size or req.batch_size == self.batch_size_of(row)
            if current and same_unit and req.seconds > 0 and req.steps_run > 0 and self.core is not None:
                self._measure(lease, req.steps_run, req.seconds)
            if req.finished:
                self.finished_flag.add(req.job_id)
            units = dict(batch_size=self.batch_size_of(row), total_steps=row.total_steps, steps_done=done,
                         emulated_steps_per_s=self.emulation(req.job_id, done, False)[0] if current else 0.0)
            if not req.finished and current and now < lease.deadline:
                return pb2.UpdateLeaseResponse(keep_running=True, deadline_s=lease.deadline, now_s=now, **units)
            lease.told_stop = True
            return pb2.UpdateLeaseResponse(keep_running=False, deadline_s=now, now_s=now, **units)

    def _measure(self, lease, steps_run: int, seconds: float) -> None:
        """The lease's steps/s since it started, or since it joined or left a pair (then from its next update on),
        move its job's rate alone or beside its partner (docs/rules.md#measured-rates)."""
        base = lease.rate_from
        if base is None or steps_run < base[0] or seconds < base[1]:      # or the process counts afresh
            lease.rate_from = (steps_run, seconds)
            return
        steps, seconds = steps_run - base[0], seconds - base[1]
        if steps <= 0 or seconds <= 0:
            return
        # What moved is stored at the round's end, for a restart (docs/rules.md#runtime-restart).
        if lease.paired:
            if self.core.measurements.observe_pair_rate(lease.job_id, lease.partner, lease.gpu_type, steps / seconds):
                self.pairs_moved = True
        # Alone: at the table's share, without what the plan's CPU/memory share adds.
        elif self.core.measurements.observe_rate(lease.job_id, lease.gpu_type, steps / seconds / lease.speedup):
            self.rates_moved.add(lease.job_id)

    def rendezvous(self, req, token: str) -> str:
        with self.lock:
            lease = self.lease_for(token, req.job_id, req.lease_id)
            if req.rank == 0 and req.address:
                if len(req.address) > validate.MAX_NAME:
                    raise validate.InvalidInput(f"address: at most {validate.MAX_NAME} characters")
                lease.rendezvous = req.address
            return lease.rendezvous

    def job_of(self, token: str) -> int | None:
        """The job whose lease `token` is, if this scheduler issued it and still keeps it (checked before a stream
        is read). Without the lock: a round holds it while it plans, and a job's call waiting here would hold a
        handler thread outside the jobs' share (a dict lookup is atomic; the call checks the lease again under
        the lock)."""
        lease = self.tokens.get(token)
        return None if lease is None else lease.job_id

    def _may_store(self, lease: LeaseInfo) -> bool:
        """Whether `lease` may make its job's progress durable: it is the current lease, or the one before it on
        its way out until the current one starts, or the job's last lease, ended, with none issued since (its
        last rank still reporting). A stale lease's reports move nothing (docs/rules.md R56)."""
        current = self.leases.get(lease.job_id)
        if current is None:
            recent = self.job_tokens.get(lease.job_id)
            return bool(recent) and recent[-1] == lease.token
        return current is lease or (current.previous is lease and current.started_at is None)

    def _current_lease(self, token: str, job_id: int, lease_id: str):
        """The job's row and lease when `token` holds its current lease; only that lease stores checkpoints."""
        lease = self.lease_for(token, job_id, lease_id)
        row = self.active.get(job_id)
        if row is not None and not self._may_store(lease):
            raise Denied(f"lease {lease_id!r} is no longer job {job_id}'s current lease; only the current lease "
                         f"stores checkpoints")
        return row, lease

    def checkpoint_put(self, token: str, job_id: int, lease_id: str, steps: int, chunks,
                       batch_size: int = 0) -> None:
        """Store a checkpoint at `steps` (counted at `batch_size`: 0 is the job's current one)."""
        with self.lock:
            row, lease = self._current_lease(token, job_id, lease_id)
            if row is None or self.checkpoints is None:
                return
            total = self.total_at(row, batch_size)
            if not 0 <= steps <= total:
                raise validate.InvalidInput(f"steps: 0..{total}, got {steps}")
            steps, unit = self.counted_now(row, steps, batch_size), self.batch_size_of(row)
        tmp = self.checkpoints.receive(job_id, chunks)      # outside the lock: uploads must not stall rounds
        try:
            with self.lock:
                # The lease may have ended, or a later checkpoint been stored, while this one was uploading.
                self._current_lease(token, job_id, lease_id)
                steps = self.counted_now(row, steps, unit)      # the job may have switched meanwhile
                if steps < self.stored_steps.get(job_id, -1):
                    raise Denied(f"job {job_id} already stored a checkpoint at step {self.stored_steps[job_id]}; "
                                 f"this one is at step {steps}")
                self.checkpoints.commit(job_id, tmp)
                self.stored_steps[job_id] = steps
                if steps > row.steps_done:
                    row.steps_done = steps
                    self.store.set_progress(job_id, steps)
        finally:
            self.checkpoints.discard(tmp)               # nothing left when committed

    def checkpoint_get(self, token: str, job_id: int, lease_id: str):
        with self.lock:
            self.lease_for(token, job_id, lease_id)
        return self.checkpoints.get(job_id) if self.checkpoints is not None else iter(())
