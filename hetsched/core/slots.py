"""Jobs in slots of preallocated numpy arrays: the scheduler's bookkeeping, which its stages index by slot."""

from __future__ import annotations

from typing import Callable

import numpy as np

from hetsched.errors import HetschedError
from hetsched.model.arrays import grow_arrays
from hetsched.model.jobs import Job


class JobSlots:
    """Gives each active job of `owner` a slot. The owner keeps `jobs`/`slot` dicts, `job_of_slot` and per-slot
    arrays named in its `SLOT_ARRAYS`, which double when full (`grown(size)` is called after)."""

    def __init__(self, owner, size: int = 64, grown: Callable[[int], None] | None = None):
        self.owner = owner
        self.grown = grown
        owner.jobs = {}
        owner.slot = {}
        owner.job_of_slot = np.full(size, -1, np.int64)
        self._free = list(range(size - 1, -1, -1))

    def grow(self) -> None:
        owner = self.owner
        old = len(owner.job_of_slot)
        grow_arrays(owner, ("job_of_slot",) + owner.SLOT_ARRAYS, old * 2)
        owner.job_of_slot[old:] = -1
        self._free.extend(range(old * 2 - 1, old - 1, -1))
        if self.grown is not None:
            self.grown(old * 2)

    def active_by_id(self) -> np.ndarray:
        """The slots of the active jobs in ascending job id (the order of `sorted(owner.jobs)`)."""
        of = self.owner.job_of_slot
        slots = np.flatnonzero(of >= 0)
        return slots[np.argsort(of[slots], kind="stable")]

    def slots_of(self, job_ids: np.ndarray) -> np.ndarray:
        """The slot of each active job in `job_ids`."""
        slot = self.owner.slot
        return np.fromiter((slot[j] for j in np.asarray(job_ids).tolist()), np.int64, len(job_ids))

    def take(self, job: Job) -> int:
        """A free slot for a new active job."""
        owner = self.owner
        if job.job_id in owner.jobs:
            raise HetschedError(f"job {job.job_id} is already active")
        if not self._free:
            self.grow()
        s = self._free.pop()
        owner.jobs[job.job_id] = job
        owner.slot[job.job_id] = s
        owner.job_of_slot[s] = job.job_id
        return s

    def release(self, job_id: int) -> int:
        """Forget an active job; returns its slot (free for reuse)."""
        owner = self.owner
        s = owner.slot.pop(job_id)
        owner.jobs.pop(job_id)
        owner.job_of_slot[s] = -1
        self._free.append(s)
        return s
