"""`LeaseIterator`: what a training loop wraps around its data to run under the scheduler's leases.

    it = LeaseIterator(loader, total_steps=args.num_steps, save=save_ckpt, restore=load_ckpt)
    for batch in it:
        train_step(batch)
    sys.exit(0)   # the iterator has checkpointed; the worker reports the exit

The iterator resumes from the last checkpoint, reports progress, asks for an extension when the lease's
deadline comes, checkpoints and stops when the lease ends or the job is done. Without the scheduler's
environment variables it simply runs `total_steps` steps (so the same script runs standalone).
"""

from __future__ import annotations

import itertools
import os
import time
from typing import Callable, Iterable, Iterator

ENV = ("HETSCHED_SCHEDULER", "HETSCHED_TOKEN", "HETSCHED_JOB_ID", "HETSCHED_LEASE_ID", "HETSCHED_DEADLINE")


class LeaseIterator:
    """Iterates `data` (cycled) until the lease or the job ends; checkpoints through user hooks."""

    def __init__(self, data: Iterable, *, total_steps: int, save: Callable[[int], None] | None = None,
                 restore: Callable[[], int] | None = None, checkpoint_every: int = 50, report_every_s: float = 1.0):
        self._data = itertools.cycle(data) if not isinstance(data, Iterator) else data
        self.total_steps = int(os.environ.get("HETSCHED_TOTAL_STEPS", total_steps))
        self.save, self.checkpoint_every, self.report_every_s = save, checkpoint_every, report_every_s
        self.slowdown = float(os.environ.get("HETSCHED_SLOWDOWN", "1.0"))
        self.managed = all(k in os.environ for k in ENV)
        start = int(os.environ.get("HETSCHED_STEPS_DONE", "0"))
        restored = restore() if restore is not None else 0
        self.steps = self.checkpointed = max(start, restored or 0)
        self.done = False            # True once the job finished all its steps
        self.stopped = False         # True once the lease ended (job may continue elsewhere later)
        self._seconds = 0.0
        self._last = None
        self._next_report = time.monotonic() + report_every_s
        if self.managed:
            from .auth import channel
            from .stubs import pb2, pb2_grpc
            self._pb2 = pb2
            self._stub = pb2_grpc.SchedulerStub(channel(os.environ["HETSCHED_SCHEDULER"],
                                                        os.environ["HETSCHED_TOKEN"]))
            self.job_id = int(os.environ["HETSCHED_JOB_ID"])
            self.lease_id = os.environ["HETSCHED_LEASE_ID"]
            self.deadline = float(os.environ["HETSCHED_DEADLINE"])
            self._clock_offset = 0.0
            self._report(finished=False)         # syncs the clock and checks the lease is still current

    def __iter__(self) -> "LeaseIterator":
        return self

    def _report(self, finished: bool) -> bool:
        """Tell the scheduler where we are; returns whether the lease goes on."""
        try:
            resp = self._stub.UpdateLease(self._pb2.UpdateLeaseRequest(
                job_id=self.job_id, lease_id=self.lease_id, steps_done=self.steps,
                steps_checkpointed=self.checkpointed, seconds=self._seconds, finished=finished), timeout=10)
        except Exception:       # scheduler unreachable: stop safely; the job resumes from its checkpoint
            return False
        self._clock_offset = resp.now_s - time.time()
        self.deadline = resp.deadline_s
        return resp.keep_running

    def _checkpoint(self) -> None:
        if self.save is not None and self.steps > self.checkpointed:
            self.save(self.steps)
        self.checkpointed = self.steps

    def _stop(self, finished: bool):
        self._checkpoint()
        if self.managed:
            self._report(finished=finished)
        self.done, self.stopped = finished, True
        raise StopIteration

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
        if self.steps >= self.total_steps:
            self._stop(finished=True)
        if self.managed:
            clock = time.time() + self._clock_offset
            if clock >= self.deadline or time.monotonic() >= self._next_report:
                self._next_report = time.monotonic() + self.report_every_s
                if not self._report(finished=False):
                    self._stop(finished=False)
        batch = next(self._data)
        self._last = time.monotonic()
        return batch
