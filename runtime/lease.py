"""`LeaseIterator`: what a training loop wraps around its data to run under the scheduler's leases.

    it = LeaseIterator(loader, total_steps=args.num_steps, save=save_ckpt, restore=load_ckpt)
    for batch in it:
        train_step(batch)
    sys.exit(0)   # the iterator has checkpointed; the worker reports the exit

The iterator fetches the job's latest checkpoint from the scheduler and resumes from it, reports progress, asks
for an extension when the lease's deadline comes, and checkpoints and stops when the lease ends or the job is
done. Each checkpoint that `save` writes into `checkpoint_dir` is streamed to the scheduler before it counts as
durable, so the job resumes with its weights on any worker. A multi-GPU job runs one iterator per rank: rank 0
talks to the scheduler, and `sync(stop) -> stop` (an all-reduce the training script provides) makes every rank
stop at the same step. Without the scheduler's environment the iterator simply runs `total_steps` steps.

An adaptive job (Accordion, GNS) passes its `batch_size` and a `rebatch(batch_size) -> data` hook: when the
scheduler switches its batch size (docs/rules.md#runtime-batch-sizes) a single-process job takes the new data, its
steps re-counted by the scheduler, and checkpoints at once; a multi-process job switches at its next lease.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator

UPLOAD_TRIES = 4                 # a busy scheduler (RESOURCE_EXHAUSTED) is retried after 0.2, 0.4, 0.8 s (calls too)
BUSY_WAIT_S = 60.0               # how long a lease update due now waits for a busy scheduler (a long plan)
RESTORE_WAIT_S = 120.0           # how long the first restore retries a busy or unreachable scheduler (backoff)
CALL_TIMEOUT_S = 10.0
ENV = ("HETSCHED_SCHEDULER", "HETSCHED_LEASE_TOKEN", "HETSCHED_JOB_ID", "HETSCHED_LEASE_ID", "HETSCHED_DEADLINE")


def busy(exc: Exception) -> bool:
    """A scheduler too busy to answer now (its calls' share taken, or a plan holding it past the timeout)."""
    import grpc

    return isinstance(exc, grpc.RpcError) and exc.code() in (grpc.StatusCode.RESOURCE_EXHAUSTED,
                                                             grpc.StatusCode.DEADLINE_EXCEEDED)


def _endless(data: Iterable) -> Iterator:
    """An iterator stays as it is (it may be endless); a collection is cycled."""
    return data if isinstance(data, Iterator) else itertools.cycle(data)


class LeaseIterator:
    """Iterates `data` (cycled) until the lease or the job ends; checkpoints through user hooks."""

    def __init__(self, data: Iterable, *, total_steps: int, save: Callable[[int], None] | None = None,
                 restore: Callable[[], int] | None = None, checkpoint_every: int = 50, report_every_s: float = 1.0,
                 checkpoint_dir: str | None = None, sync: Callable[[bool], bool] | None = None,
                 batch_size: int = 0, rebatch: Callable[[int], Iterable] | None = None):
        self._data = _endless(data)
        self.total_steps = int(os.environ.get("HETSCHED_TOTAL_STEPS", total_steps))
        self.save, self.checkpoint_every, self.report_every_s = save, checkpoint_every, report_every_s
        self.slowdown = float(os.environ.get("HETSCHED_SLOWDOWN", "1.0"))
        self.rank = int(os.environ.get("HETSCHED_RANK", "0"))
        self.world_size = int(os.environ.get("HETSCHED_WORLD_SIZE", "1"))
        self.sync = sync if self.world_size > 1 else None
        self.managed = all(k in os.environ for k in ENV)
        ckpt = checkpoint_dir or os.environ.get("HETSCHED_CHECKPOINT_DIR")
        self.checkpoint_dir = Path(ckpt) if ckpt else None
        self.rebatch = rebatch
        self.adaptive = "HETSCHED_BATCH_SIZE" in os.environ      # the scheduler counts its steps at a batch size
        self.batch_size = int(os.environ.get("HETSCHED_BATCH_SIZE", "0")) or int(batch_size)
        if rebatch is not None and batch_size and self.batch_size != batch_size:
            self._data = _endless(rebatch(self.batch_size))    # a lease that starts after a switch
        self.done = False            # True once the job finished all its steps
        self.stopped = False         # True once the lease ended (job may continue elsewhere later)
        self._seconds = 0.0
        self._last = None
        self._next_report = time.monotonic() + report_every_s
        start = int(os.environ.get("HETSCHED_STEPS_DONE", "0"))
        if self.managed:
            from .auth import channel
            from .stubs import pb2, pb2_grpc
            self._pb2 = pb2
            self._stub = pb2_grpc.SchedulerStub(channel(
                os.environ["HETSCHED_SCHEDULER"], os.environ["HETSCHED_LEASE_TOKEN"], os.environ.get("HETSCHED_TLS_CA"),
                scheme="Lease", server_name=os.environ.get("HETSCHED_TLS_SERVER_NAME")))
            self.job_id = int(os.environ["HETSCHED_JOB_ID"])
            self.lease_id = os.environ["HETSCHED_LEASE_ID"]
            self.deadline = float(os.environ["HETSCHED_DEADLINE"])
            self._clock_offset = 0.0
            if self.checkpoint_dir is not None and restore is not None:
                self._restore_checkpoint()
        restored = restore() if restore is not None else 0
        if self.adaptive:
            restored = 0     # an adaptive job's steps are the scheduler's count, at the lease's batch size
        self.steps = self.checkpointed = self._start = max(start, restored or 0)
        self.upload_error: str | None = None
        if self.managed and self.rank == 0:
            self._report(finished=False)         # syncs the clock and checks the lease is still current

    def _restore_checkpoint(self) -> None:
        """Fetch the stored checkpoint. A scheduler whose transfer slots are taken (RESOURCE_EXHAUSTED), or that is
        restarting, is retried with backoff (0.2 s doubling to 5 s) for up to RESTORE_WAIT_S; any other error, or
        one that lasts longer, is raised: a job must not train on from scratch over a checkpoint it could not read."""
        import grpc

        from .checkpoints import download
        give_up, pause = time.monotonic() + RESTORE_WAIT_S, 0.2
        retry = (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
        while True:
            try:
                download(self._stub, self._pb2, self.job_id, self.lease_id, self.checkpoint_dir)
                return
            except grpc.RpcError as exc:
                if exc.code() not in retry or time.monotonic() + pause > give_up:
                    raise
            time.sleep(pause)
            pause = min(5.0, 2 * pause)

    def __iter__(self) -> "LeaseIterator":
        return self

    def resume_at(self, steps: int) -> None:
        """Start counting from `steps` (a multi-GPU job's ranks adopt rank 0's checkpoint step)."""
        self.steps = self.checkpointed = self._start = int(steps)

    def rendezvous(self, address: str = "", timeout_s: float = 60.0) -> str:
        """Multi-GPU jobs: rank 0 posts `address` (host:port of its torch.distributed store); every rank gets
        it back (the others wait for it, bounded)."""
        deadline = time.monotonic() + timeout_s
        while True:
            resp = self._call(self._stub.Rendezvous, self._pb2.RendezvousRequest(
                job_id=self.job_id, lease_id=self.lease_id, rank=self.rank, address=address))
            if resp.address:
                return resp.address
            if time.monotonic() > deadline:
                raise TimeoutError(f"rank 0 of job {self.job_id} did not post its address in {timeout_s} s")
            time.sleep(0.2)

    def _call(self, method, request):
        """One call; a busy scheduler (RESOURCE_EXHAUSTED) is retried after 0.2, 0.4, 0.8 s."""
        import grpc

        for attempt in range(UPLOAD_TRIES):
            try:
                return method(request, timeout=CALL_TIMEOUT_S)
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED or attempt == UPLOAD_TRIES - 1:
                    raise
            time.sleep(0.2 * 2 ** attempt)

    def _report(self, finished: bool) -> bool:
        """Tell the scheduler where we are; returns whether the lease goes on. A busy scheduler (its job calls
        taken, or a plan holding it past the call's timeout) does not end a lease: before the deadline the job
        trains on and reports at its next report; at the deadline, or when done, the update is retried with
        backoff for up to BUSY_WAIT_S. The update carries totals, so a retry is harmless."""
        request = self._pb2.UpdateLeaseRequest(
            job_id=self.job_id, lease_id=self.lease_id, steps_done=self.steps, steps_checkpointed=self.checkpointed,
            seconds=self._seconds, steps_run=self.steps - self._start, finished=finished,
            batch_size=self.batch_size if self.adaptive else 0)
        give_up, pause = time.monotonic() + BUSY_WAIT_S, 0.2
        while True:
            try:
                resp = self._stub.UpdateLease(request, timeout=CALL_TIMEOUT_S)
                break
            except Exception as exc:   # unreachable, or busy for too long: stop; the job resumes from its checkpoint
                if busy(exc) and not finished and time.time() + self._clock_offset < self.deadline:
                    return True
                if not busy(exc) or time.monotonic() + pause > give_up:
                    print(f"hetsched: lease update failed, stopping: {type(exc).__name__}: {exc}", file=sys.stderr)
                    return False
                time.sleep(pause)
                pause = min(2.0, 2 * pause)
        self._clock_offset = resp.now_s - time.time()
        self.deadline = resp.deadline_s
        if resp.batch_size and resp.batch_size != self.batch_size and self.world_size == 1 and not finished:
            self._switch(resp.batch_size, resp.steps_done, resp.total_steps)
        return resp.keep_running

    def _switch(self, batch_size: int, steps: int, total_steps: int) -> None:
        """The scheduler changed this job's batch size: continue at it, with the steps it re-counted."""
        print(f"hetsched: batch size {self.batch_size} -> {batch_size} at step {self.steps} (now step {steps} of "
              f"{total_steps})", file=sys.stderr, flush=True)
        self.batch_size, self.total_steps = int(batch_size), int(total_steps)
        self.steps = self._start = int(steps)
        self._seconds, self.checkpointed = 0.0, 0
        if self.rebatch is not None:
            self._data = _endless(self.rebatch(self.batch_size))
        self._checkpoint()           # durable at the new count

    def _checkpoint(self) -> None:
        """Save (rank 0), stream the checkpoint to the scheduler, then count the steps as durable."""
        if self.rank != 0 or self.steps <= self.checkpointed:
            return
        if self.save is not None:
            self.save(self.steps)
            if self.managed and self.checkpoint_dir is not None and not self._upload():
                return                # not durable yet: the next checkpoint tries again
        self.checkpointed = self.steps

    def _upload(self) -> bool:
        """Stream the checkpoint; a busy scheduler is retried (bounded), any failure is said on stderr and kept in
        `upload_error`. Returns whether the checkpoint is durable."""
        import grpc

        from .checkpoints import upload
        for attempt in range(UPLOAD_TRIES):
            try:
                upload(self._stub, self._pb2, self.job_id, self.lease_id, self.steps, self.checkpoint_dir,
                       self.batch_size if self.adaptive else 0)
                self.upload_error = None
                return True
            except grpc.RpcError as exc:
                self.upload_error = f"{exc.code().name}: {exc.details()}"
                if exc.code() not in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE):
                    break
            except OSError as exc:
                self.upload_error = f"cannot pack the checkpoint: {exc}"
                break
            time.sleep(0.2 * 2 ** attempt)
        print(f"hetsched: checkpoint at step {self.steps} not stored: {self.upload_error}", file=sys.stderr)
        return False

    def _stop(self, finished: bool):
        self._checkpoint()
        # A job whose last checkpoint is not durable has not finished: it resumes from the stored one (rank 0
        # uploads; the other ranks follow it).
        if self.rank == 0 and self.managed and self.save is not None and self.checkpoint_dir is not None:
            finished = finished and self.checkpointed >= self.steps
        if self.managed and self.rank == 0:
            self._report(finished=finished)
        self.done, self.stopped = finished, True
        raise StopIteration

    def _lease_over(self) -> bool:
        if not self.managed or self.rank != 0:
            return False
        clock = time.time() + self._clock_offset
        if clock >= self.deadline or time.monotonic() >= self._next_report:
            self._next_report = time.monotonic() + self.report_every_s
            return not self._report(finished=False)
        return False

    def __next__(self):
        now = time.monotonic()
        if self._last is not None:
            elapsed = now - self._last
            if self.slowdown > 1.0:       # emulate a slower GPU type on a CPU-only machine
                time.sleep((self.slowdown - 1.0) * elapsed)
                elapsed *= self.slowdown
            self._seconds += elapsed
            self.steps += 1
            if self.checkpoint_every and self.steps % self.checkpoint_every == 0:
                self._checkpoint()
        if self.stopped:
            raise StopIteration
        finished = self.steps >= self.total_steps
        stop = finished or self._lease_over()
        if self.sync is not None:
            stop = self.sync(stop)        # every rank stops at the same step
        if stop:
            self._stop(finished=finished)
        batch = next(self._data)
        self._last = time.monotonic()
        return batch
